package blobtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// InvalidKeys returns keys that ValidateKey refuses, one per rule.
func InvalidKeys() []string {
	return []string{
		"", "/abs", "a//b", "a/", "/", ".", "..", "a/./b", "a/../b", "../x", "x/..",
		`a\b`, "a\x00b", "a\nb", "a\tb", "a\x7fb", "a\u0085b", "a\xffb",
		strings.Repeat("s", 256), strings.Repeat("a/", 512) + "a",
	}
}

func testInvalidKeys(t *testing.T, s blob.Store) {
	ctx := t.Context()
	id, err := s.CreateMultipart(ctx, "valid")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range InvalidKeys() {
		calls := map[string]func() error{
			"Put": func() error { _, err := s.Put(ctx, key, strings.NewReader("x"), 1); return err },
			"Open": func() error {
				rc, _, err := s.Open(ctx, key, 0, -1)
				if err == nil {
					rc.Close()
				}
				return err
			},
			"Stat":            func() error { _, err := s.Stat(ctx, key); return err },
			"Delete":          func() error { return s.Delete(ctx, key) },
			"CreateMultipart": func() error { _, err := s.CreateMultipart(ctx, key); return err },
			"PutPart": func() error {
				_, err := s.PutPart(ctx, key, id, 1, strings.NewReader("x"), 1)
				return err
			},
			"CompleteMultipart": func() error {
				_, err := s.CompleteMultipart(ctx, key, id, []blob.Part{{Number: 1, ETag: "0123456789abcdef0123456789abcdef"}})
				return err
			},
			"AbortMultipart": func() error { return s.AbortMultipart(ctx, key, id) },
		}
		if key != "" {
			calls["List"] = func() error { _, err := s.List(ctx, key+"/", "", 0); return err }
			calls["DeleteAll"] = func() error { return s.DeleteAll(ctx, key+"/") }
		}
		for name, call := range calls {
			if err := call(); !errs.Is(err, errs.Invalid) {
				t.Errorf("%s(%q) = %v, want an %s error", name, clipKey(key), err, errs.Invalid)
			}
		}
	}
	if got := MustList(t, s, "", "", 0); len(got) != 0 {
		t.Errorf("refused calls left %v", names(got))
	}
	if err := s.AbortMultipart(ctx, "valid", id); err != nil {
		t.Error(err)
	}
}

// SpecialKeys returns valid keys with characters that need escaping in
// URLs, shells or file systems.
func SpecialKeys() []string {
	return []string{
		"with space/file name.txt",
		"unicode/Ünïcødé/日本語.bin",
		"emoji/😀.png",
		"hash/#frag#",
		"percent/100%25%",
		"plus/a+b c+",
		"query/?x=1&y=2",
		"quotes/'single' \"double\"",
		"misc/~tilde;semi:colon,comma=eq@at$dollar!bang*star(paren)[br]{br}|pipe^caret`tick",
		"dots/.hidden/..name/...",
		"trailing space /x ",
		"-dash/-x",
		strings.Repeat("é", 127) + "/" + strings.Repeat("x", 255),
	}
}

func testSpecialKeys(t *testing.T, s blob.Store) {
	ctx := t.Context()
	for _, key := range SpecialKeys() {
		if err := blob.ValidateKey(key); err != nil {
			t.Fatalf("special key %q is not valid: %v", key, err)
		}
		MustPut(t, s, key, []byte(key))
		if got, info := MustRead(t, s, key); string(got) != key || info.Key != key {
			t.Errorf("key %q read back %q (info key %q)", key, got, info.Key)
		}
		dir, base := "", key
		if i := strings.LastIndexByte(key, '/'); i >= 0 {
			dir, base = key[:i+1], key[i+1:]
		}
		if got := names(MustList(t, s, dir, "", 0)); !slices.Contains(got, base) {
			t.Errorf("List(%q) = %q, missing %q", dir, got, base)
		}
	}
	for _, key := range SpecialKeys() {
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q): %v", key, err)
		}
		_, err := s.Stat(ctx, key)
		WantCode(t, err, errs.NotFound)
	}
	if got := MustList(t, s, "", "", 0); len(got) != 0 {
		t.Errorf("after deleting every special key, List(\"\") = %q", names(got))
	}
}
