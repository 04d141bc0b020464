package workspace

import (
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
