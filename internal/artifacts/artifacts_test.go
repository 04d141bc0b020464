package artifacts

import (
	"strings"
	"testing"
	"time"

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

// TestPartTokenExpires: a part token names its user and lasts
// PartTokenTTL; after that, or for another path, upload or secret, it is
// refused.
func TestPartTokenExpires(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	s := New(nil, Options{Secret: []byte("0123456789abcdef0123456789abcdef"), PartTokenTTL: time.Hour, Now: clock})
	tok := s.PartToken("1/r/artifacts/big.bin", "u1", 42)
	if user, err := s.CheckPartToken("1/r/artifacts/big.bin", "u1", tok); err != nil || user != 42 {
		t.Fatalf("fresh token: user %d, %v", user, err)
	}
	other := New(nil, Options{Secret: []byte("another secret, just as long....."), Now: clock})
	for name, check := range map[string]func() error{
		"ErrOtherPath":   func() error { _, err := s.CheckPartToken("1/r/artifacts/other.bin", "u1", tok); return err },
		"ErrOtherUpload": func() error { _, err := s.CheckPartToken("1/r/artifacts/big.bin", "u2", tok); return err },
		"ErrOtherSecret": func() error { _, err := other.CheckPartToken("1/r/artifacts/big.bin", "u1", tok); return err },
	} {
		if err := check(); !errs.Is(err, errs.PermissionDenied) {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
	}
	now = now.Add(time.Hour)
	if _, err := s.CheckPartToken("1/r/artifacts/big.bin", "u1", tok); !errs.Is(err, errs.PermissionDenied) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("token after its hour: %v, want PermissionDenied saying it expired", err)
	}
}
