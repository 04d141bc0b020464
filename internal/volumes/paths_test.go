package volumes

import (
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

func TestParsePath(t *testing.T) {
	ok := func(in string, want Path) {
		t.Helper()
		got, err := ParsePath(in)
		if err != nil {
			t.Fatalf("ParsePath(%q): %v", in, err)
		}
		if got != want {
			t.Fatalf("ParsePath(%q) = %+v, want %+v", in, got, want)
		}
	}
	ok("/Volumes/main/team/ckpt", Path{"main", "team", "ckpt", ""})
	ok("/Volumes/main/team/ckpt/", Path{"main", "team", "ckpt", ""})
	ok("/Volumes/Main/Team/CKPT/Step_1/.metadata", Path{"main", "team", "ckpt", "Step_1/.metadata"})
	ok("/Volumes/m/s/v/a b/#x%2e%2e/ü.txt", Path{"m", "s", "v", "a b/#x%2e%2e/ü.txt"})
	ok("/Volumes/m/s/v/dir/", Path{"m", "s", "v", "dir"})

	bad := func(in, mention string) {
		t.Helper()
		_, err := ParsePath(in)
		if errs.CodeOf(err) != errs.Invalid {
			t.Fatalf("ParsePath(%q) = %v, want Invalid", in, err)
		}
		if !strings.Contains(errs.MessageOf(err), mention) {
			t.Fatalf("ParsePath(%q): message %q does not mention %q", in, errs.MessageOf(err), mention)
		}
	}
	bad("", "/Volumes/<catalog>")
	bad("/Workspace/x", "/Volumes/<catalog>")
	bad("/Volumes", "/Volumes/<catalog>")
	bad("/Volumes/", "outside any volume")
	bad("/Volumes/main/team", "outside any volume")
	bad("/Volumes/main/team/", "outside any volume")
	bad("/Volumes/main//ckpt/x", "empty segment")
	bad("/Volumes/main/team/ckpt//x", "empty segment")
	bad("/Volumes/main/team/ckpt/../../other/v/x", "'..'")
	bad("/Volumes/main/team/ckpt/a/./b", "'.'")
	bad("/Volumes/main/../x/y", "'..'")
	bad("/Volumes/main/team/ckpt/a\\..\\b", "backslash")
	bad("/Volumes/main/team/ckpt/a\x00b", "control")
	bad("/Volumes/main/team/ckpt/a\nb", "control")
	bad("/Volumes/main/team/ckpt/"+DirMarker, "reserved")
	bad("/Volumes/main/team/ckpt/"+strings.Repeat("x", 256), "255")
	bad("/Volumes/main/team/ckpt/"+strings.Repeat("x/", 500)+"y", "960")
	bad("/Volumes/ma.in/team/ckpt/x", "catalog name")
	bad("/Volumes/main/-team/ckpt/x", "schema name")
	bad("/Volumes/main/team/ck pt/x", "volume name")
	bad("/Volumes/m/s/v/\xff", "UTF-8")
}

func TestPathHelpers(t *testing.T) {
	p := Path{"m", "s", "v", "a/b/c.txt"}
	if p.String() != "/Volumes/m/s/v/a/b/c.txt" || p.Name() != "c.txt" || p.Dir().Rel != "a/b" || p.Dir().Dir().Dir().Rel != "" {
		t.Fatalf("helpers: %s %s %s", p, p.Name(), p.Dir())
	}
	if j := p.Dir().Join("d"); j.Rel != "a/b/d" || (Path{"m", "s", "v", ""}).Join("x").Rel != "x" {
		t.Fatalf("join: %s", j)
	}
	if p.FullName() != "m.s.v" {
		t.Fatal(p.FullName())
	}
}

// FuzzParsePath checks that whatever ParsePath accepts stays inside its
// volume and prints back to itself.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/Volumes/m/s/v/a", "/Volumes/m/s/v/../x", "/Volumes/m/s/v/a//b", "/Volumes/M/s/v/", "/Volumes/m/s/v/%2e%2e/x", "/Volumes/m/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			if errs.CodeOf(err) != errs.Invalid {
				t.Fatalf("ParsePath(%q): code %s", s, errs.CodeOf(err))
			}
			return
		}
		if p.Rel != "" {
			for _, seg := range strings.Split(p.Rel, "/") {
				if seg == "" || seg == "." || seg == ".." || seg == DirMarker || strings.ContainsAny(seg, "\\\x00") {
					t.Fatalf("ParsePath(%q) accepted segment %q", s, seg)
				}
			}
		}
		q, err := ParsePath(p.String())
		if err != nil || q != p {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v, %v", s, p, p.String(), q, err)
		}
	})
}

// TestQuotedInputWholeCharacters checks that an error quoting a long
// input cuts it between characters: a cut at a byte count split the
// three-byte 日 at byte 120, and %q showed its first byte as \xe6.
func TestQuotedInputWholeCharacters(t *testing.T) {
	long := strings.Repeat("a", 119) + "日本語"
	want := `aaaa..."`
	_, errSplit := SplitFullName("volume", long, 3)
	_, errName := ValidateName("volume", long)
	_, errPath := ParsePath("/Volumes/" + long[9:])
	for name, err := range map[string]error{"SplitFullName": errSplit, "ValidateName": errName, "ParsePath": errPath} {
		msg := errs.MessageOf(err)
		if !errs.Is(err, errs.Invalid) || !strings.Contains(msg, want) || strings.Contains(msg, `\x`) {
			t.Errorf("%s: %q, want an invalid error quoting %s", name, msg, want)
		}
	}
}
