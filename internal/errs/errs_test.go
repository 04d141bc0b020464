package errs_test

import (
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

func TestTruncate(t *testing.T) {
	f := func(s string, n int, want string) {
		t.Helper()
		if got := errs.Truncate(s, n); got != want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", s, n, got, want)
		}
	}
	f("", 3, "")
	f("abc", 3, "abc")
	f("abcd", 3, "abc...")
	f("abcd", 0, "...")
	f("abcd", -1, "...")
	f("aé", 2, "a...") // é is two bytes: never cut in half
	f("日本語", 4, "日...")
	f("日本語", 6, "日本...")
}

func TestClip(t *testing.T) {
	f := func(s string, n int, want string) {
		t.Helper()
		if got := errs.Clip(s, n); got != want {
			t.Errorf("Clip(%q, %d) = %q, want %q", s, n, got, want)
		}
	}
	f("", 3, "")
	f("abc", 3, "abc")
	f("abcd", 3, "abc")
	f("abcd", -1, "")
	f("aé", 2, "a")
	f("日本語", 5, "日")
	f("日本語", 6, "日本")
	f("\xff\xfe", 1, "\xff") // bytes that are not UTF-8 are cut where they fall
}

func FuzzTruncate(f *testing.F) {
	f.Add("日本語 text", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := errs.Truncate(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Truncate(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		cut := got[:len(got)-3]
		if len(cut) > max(n, 0) || s[:len(cut)] != cut || got[len(cut):] != "..." {
			t.Fatalf("Truncate(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q cuts a character", s, n, got)
		}
	})
}
