package blobtest

import (
	"slices"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

func testList(t *testing.T, s blob.Store) {
	ctx := t.Context()
	for key, size := range map[string]int{
		"d/a.txt": 1, "d/a/x": 2, "d/a0": 3, "d/b/1": 4, "d/b/2/deep": 5, "d/c": 6, "top": 7,
	} {
		MustPut(t, s, key, RandomBytes(int64(size), 5))
	}
	// Byte order of names, a directory's with its slash: '.' < '/' < '0'.
	want := []blob.Entry{
		{Name: "a.txt", Size: 1}, {Name: "a/", IsDir: true}, {Name: "a0", Size: 3},
		{Name: "b/", IsDir: true}, {Name: "c", Size: 6},
	}
	got := MustList(t, s, "d/", "", 0)
	if !sameEntries(got, want) {
		t.Errorf("List(d/) = %v, want %v", names(got), names(want))
	}
	for _, e := range got {
		if !e.IsDir && (e.ModTime.IsZero() || time.Since(e.ModTime) > time.Hour) {
			t.Errorf("List(d/) entry %s has ModTime %v", e.Name, e.ModTime)
		}
	}

	t.Run("Pages", func(t *testing.T) {
		tests := map[string]struct {
			after string
			limit int
			want  []string
		}{
			"First":      {"", 2, []string{"a.txt", "a/"}},
			"AfterDir":   {"a/", 2, []string{"a0", "b/"}},
			"AfterFile":  {"a.txt", 1, []string{"a/"}},
			"Last":       {"b/", 2, []string{"c"}},
			"End":        {"c", 2, []string{}},
			"NoLimit":    {"a0", 0, []string{"b/", "c"}},
			"NotAName":   {"a1", 0, []string{"b/", "c"}},
			"BeforeAll":  {"A", 1, []string{"a.txt"}},
			"DirNoSlash": {"b", 0, []string{"b/", "c"}},
		}
		for name, tt := range tests {
			t.Run(name, func(t *testing.T) {
				if got := names(MustList(t, s, "d/", tt.after, tt.limit)); !slices.Equal(got, tt.want) {
					t.Errorf("List(d/, after %q, limit %d) = %q, want %q", tt.after, tt.limit, got, tt.want)
				}
			})
		}
	})
	t.Run("PageByPage", func(t *testing.T) {
		var all []blob.Entry
		after := ""
		for range 10 {
			page := MustList(t, s, "d/", after, 1)
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			after = page[len(page)-1].Name
		}
		if !sameEntries(all, want) {
			t.Errorf("paging one by one gave %v, want %v", names(all), names(want))
		}
	})
	t.Run("Root", func(t *testing.T) {
		want := []string{"d/", "top"}
		if got := names(MustList(t, s, "", "", 0)); !slices.Equal(got, want) {
			t.Errorf("List(\"\") = %q, want %q", got, want)
		}
	})
	t.Run("Nested", func(t *testing.T) {
		want := []string{"1", "2/"}
		if got := names(MustList(t, s, "d/b/", "", 0)); !slices.Equal(got, want) {
			t.Errorf("List(d/b/) = %q, want %q", got, want)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		for _, prefix := range []string{"nothing/", "d/nothing/", "d/c/", "top/", "d/a.txt/"} {
			got, err := s.List(ctx, prefix, "", 0)
			if err != nil {
				t.Errorf("List(%q): %v", prefix, err)
			}
			if got == nil || len(got) != 0 {
				t.Errorf("List(%q) = %v, want an empty, non-nil list", prefix, got)
			}
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		for _, prefix := range []string{"d", "/d/", "d//", "../", "./", "d/../"} {
			_, err := s.List(ctx, prefix, "", 0)
			WantCode(t, err, errs.Invalid)
		}
		for _, after := range []string{"a/b", "..", "/x", "x\x00"} {
			_, err := s.List(ctx, "d/", after, 0)
			WantCode(t, err, errs.Invalid)
		}
	})
}

func testDelete(t *testing.T, s blob.Store) {
	ctx := t.Context()
	MustPut(t, s, "a/b/c", []byte("1"))
	MustPut(t, s, "x/y", []byte("2"))
	if err := s.Delete(ctx, "a/b"); err != nil {
		t.Fatalf("Delete of a directory name: %v", err)
	}
	if got, _ := MustRead(t, s, "a/b/c"); string(got) != "1" {
		t.Fatalf("Delete(a/b) touched a/b/c")
	}
	if err := s.Delete(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stat(ctx, "a/b/c")
	WantCode(t, err, errs.NotFound)
	if err := s.Delete(ctx, "a/b/c"); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	// The directories a/b/ and a/ are empty now: no listing shows them.
	if got := names(MustList(t, s, "", "", 0)); !slices.Equal(got, []string{"x/"}) {
		t.Errorf("List(\"\") after deleting a/b/c = %q, want [x/]", got)
	}
	if got := MustList(t, s, "a/", "", 0); len(got) != 0 {
		t.Errorf("List(a/) after deleting a/b/c = %v, want empty", names(got))
	}
	// And a key can be written again where the directories were.
	MustPut(t, s, "a/b/c", []byte("3"))
	if got, _ := MustRead(t, s, "a/b/c"); string(got) != "3" {
		t.Errorf("rewrite after delete read %q", got)
	}
}

func testDeleteAll(t *testing.T, s blob.Store) {
	ctx := t.Context()
	for _, key := range []string{"a/1", "a/sub/2", "a/sub/deep/3", "ab/x", "a.txt", "b/a/1"} {
		MustPut(t, s, key, []byte(key))
	}
	if err := s.DeleteAll(ctx, "a/"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a/1", "a/sub/2", "a/sub/deep/3"} {
		_, err := s.Stat(ctx, key)
		WantCode(t, err, errs.NotFound)
	}
	for _, key := range []string{"ab/x", "a.txt", "b/a/1"} {
		if got, _ := MustRead(t, s, key); string(got) != key {
			t.Errorf("DeleteAll(a/) changed %s", key)
		}
	}
	if got, want := names(MustList(t, s, "", "", 0)), []string{"a.txt", "ab/", "b/"}; !slices.Equal(got, want) {
		t.Errorf("List(\"\") after DeleteAll(a/) = %q, want %q", got, want)
	}
	if err := s.DeleteAll(ctx, "b/a/"); err != nil {
		t.Fatal(err)
	}
	if got, want := names(MustList(t, s, "", "", 0)), []string{"a.txt", "ab/"}; !slices.Equal(got, want) {
		t.Errorf("List(\"\") after DeleteAll(b/a/) = %q, want %q (empty b/ gone)", got, want)
	}
	for _, prefix := range []string{"missing/", "a.txt/", "a/"} {
		if err := s.DeleteAll(ctx, prefix); err != nil {
			t.Errorf("DeleteAll(%q) with nothing under it: %v", prefix, err)
		}
	}
	for _, prefix := range []string{"", "ab", "/ab/", "../"} {
		WantCode(t, s.DeleteAll(ctx, prefix), errs.Invalid)
	}
	if got, _ := MustRead(t, s, "ab/x"); string(got) != "ab/x" {
		t.Errorf("refused DeleteAll calls changed ab/x")
	}
}
