package artifacts

import (
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// TestInvalidPathWholeCharacters checks that the error quoting a long
// path cuts it between characters: a cut at byte 200 split the three-byte
// 日 there, and %q showed its first byte as \xe6.
func TestInvalidPathWholeCharacters(t *testing.T) {
	p := "/" + strings.Repeat("a", 198) + "日本語"
	_, err := CleanPath(p)
	msg := err.Error()
	if !errs.Is(err, errs.Invalid) || errs.MessageOf(err) != "Invalid path" || !strings.Contains(msg, `aaaa..."`) || strings.Contains(msg, `\x`) {
		t.Errorf("CleanPath: %q, want MLflow's \"Invalid path\" caused by an error quoting the path cut before 日", msg)
	}
}

// TestCleanPathDotSegments checks that '.' segments name the directory
// itself, as to MLflow, and that '..' stays refused.
func TestCleanPathDotSegments(t *testing.T) {
	for in, want := range map[string]string{
		".": "", "./": "", "1/r/artifacts/.": "1/r/artifacts", "./a/./b/.": "a/b", "a/./b.txt": "a/b.txt", "a/b/": "a/b",
	} {
		got, err := CleanPath(in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "a/..", "./../a", "a/./../b", "/.", "a//b", "a/.#"} {
		if _, err := CleanPath(in); errs.MessageOf(err) != "Invalid path" {
			t.Errorf("CleanPath(%q): %v, want \"Invalid path\"", in, err)
		}
	}
}
