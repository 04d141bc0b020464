package workspace

import (
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

func TestParseResource(t *testing.T) {
	ok := func(in string, want Resource) {
		t.Helper()
		got, err := ParseResource(in)
		if err != nil || got != want {
			t.Fatalf("ParseResource(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	ok("experiment:12", Resource{ResourceExperiment, "12"})
	ok("folder:/Workspace/Shared//team/", Resource{ResourceFolder, "/Shared/team"})
	ok("catalog:Main", Resource{ResourceCatalog, "main"})
	ok("schema:main.Vision", Resource{ResourceSchema, "main.vision"})
	ok("volume:main.vision.ckpt", Resource{ResourceVolume, "main.vision.ckpt"})
	for _, bad := range []string{"", "volume:main.vision", "volume:main..ckpt", "schema:main", "catalog:", "catalog:a.b", "table:x", "volume:a.b.c.d"} {
		if _, err := ParseResource(bad); errs.CodeOf(err) != errs.Invalid {
			t.Fatalf("ParseResource(%q): %v, want Invalid", bad, err)
		}
	}
	if s := (Resource{ResourceVolume, "a.b.c"}).String(); s != "volume a.b.c" {
		t.Fatal(s)
	}
}

// TestQuotedInputWholeCharacters checks that an error quoting a long
// input cuts it between characters: a cut at a byte count split the
// three-byte 日 at byte 120, and %q showed its first byte as \xe6.
func TestQuotedInputWholeCharacters(t *testing.T) {
	long := strings.Repeat("a", 119) + "日本語"
	want := `aaaa..."`
	_, errPath := NormalizePath(long)
	_, errResource := ParseResource("experiment" + long[10:])
	for name, err := range map[string]error{"NormalizePath": errPath, "ParseResource": errResource} {
		msg := errs.MessageOf(err)
		if !errs.Is(err, errs.Invalid) || !strings.Contains(msg, want) || strings.Contains(msg, `\x`) {
			t.Errorf("%s: %q, want an invalid error quoting %s", name, msg, want)
		}
	}
}
