package blob_test

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/blobtest"
	"github.com/sextant/sextant/internal/errs"
)

func TestValidateKey(t *testing.T) {
	tests := map[string]struct {
		key  string
		want string // substring of the error message; "" for a valid key
	}{
		"OK":               {"exp/1/run/abc/artifacts/model/MLmodel", ""},
		"OKOneSegment":     {"x", ""},
		"OKDotted":         {".hidden/..x/x.", ""},
		"OKLongest":        {strings.Repeat(strings.Repeat("k", 255)+"/", 3) + "k/" + strings.Repeat("k", 254), ""},
		"OKSpecial":        {"a b/#%+?&=;:,@$!*()[]{}|^`~'\"<>", ""},
		"OKUnicode":        {"日本語/Ünïcødé/😀", ""},
		"ErrEmpty":         {"", "empty"},
		"ErrAbsolute":      {"/a", "starts with /"},
		"ErrTrailingSlash": {"a/", "ends with /"},
		"ErrDoubleSlash":   {"a//b", "empty segment"},
		"ErrDot":           {"a/./b", "contains a . segment"},
		"ErrDotOnly":       {".", "contains a . segment"},
		"ErrDotDot":        {"a/../b", "contains a .. segment"},
		"ErrDotDotLead":    {"../b", "contains a .. segment"},
		"ErrBackslash":     {`a\b`, "backslash"},
		"ErrNUL":           {"a\x00", "control character"},
		"ErrNewline":       {"a\nb", "control character"},
		"ErrDEL":           {"a\x7f", "control character"},
		"ErrC1":            {"a\u0080", "control character"},
		"ErrUTF8":          {"a\xc3", "UTF-8"},
		"ErrLongSegment":   {strings.Repeat("k", 256), "longer than 255"},
		"ErrLongKey":       {strings.Repeat("k/", 512) + "k", "longer than 1024"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := blob.ValidateKey(tt.key)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateKey(%q) = %v, want nil", tt.key, err)
				}
				return
			}
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("ValidateKey(%q) = %v, want an invalid error", tt.key, err)
			}
			if msg := errs.MessageOf(err); !strings.Contains(msg, tt.want) {
				t.Errorf("ValidateKey(%q) message %q does not say %q", tt.key, msg, tt.want)
			}
		})
	}
	for _, key := range blobtest.InvalidKeys() {
		if blob.ValidateKey(key) == nil {
			t.Errorf("blobtest.InvalidKeys() has valid key %q", key)
		}
	}
}

// FuzzValidateKey checks that every key ValidateKey accepts is a clean,
// local, slash-separated path that stays under any root it is joined to,
// and that refusals are errs.Invalid.
//
//	go test -run '^$' -fuzz '^FuzzValidateKey$' -fuzztime 20s ./internal/blob/
func FuzzValidateKey(f *testing.F) {
	for _, k := range append(append([]string{"a", "a/b", "a b/c#d%e+f", "../x", "a/./b", "a\\b"}, blobtest.InvalidKeys()...), blobtest.SpecialKeys()...) {
		f.Add(k)
	}
	root := filepath.Join(f.TempDir(), "root")
	f.Fuzz(func(t *testing.T, key string) {
		err := blob.ValidateKey(key)
		if err != nil {
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("ValidateKey(%q) = %v, not an invalid error", key, err)
			}
			return
		}
		switch {
		case len(key) == 0 || len(key) > blob.MaxKeyLen:
			t.Fatalf("accepted key of %d bytes", len(key))
		case !utf8.ValidString(key):
			t.Fatalf("accepted invalid UTF-8 %q", key)
		case strings.ContainsAny(key, "\\\x00"):
			t.Fatalf("accepted %q", key)
		case path.Clean(key) != key:
			t.Fatalf("accepted unclean key %q (clean: %q)", key, path.Clean(key))
		case !filepath.IsLocal(key):
			t.Fatalf("accepted non-local key %q", key)
		}
		joined := filepath.Join(root, filepath.FromSlash(key))
		rel, err := filepath.Rel(root, joined)
		if err != nil || !filepath.IsLocal(rel) || filepath.ToSlash(rel) != key {
			t.Fatalf("key %q joined to %s gives %s (rel %q, %v)", key, root, joined, rel, err)
		}
		for seg := range strings.SplitSeq(key, "/") {
			if len(seg) > blob.MaxSegmentLen || seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted key %q with segment %q", key, seg)
			}
		}
	})
}
