package mlflowimport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct{ in, driver, dsn, err string }{
		{"sqlite:///mlflow.db", "sqlite3", "file:mlflow.db?mode=ro&_busy_timeout=10000", ""},
		{"sqlite:////abs/mlflow.db", "sqlite3", "file:/abs/mlflow.db?mode=ro&_busy_timeout=10000", ""},
		{"postgresql://u:p@db:5432/mlflow", "pgx", "postgres://u:p@db:5432/mlflow", ""},
		{"postgresql+psycopg2://u@db/mlflow?sslmode=disable", "pgx", "postgres://u@db/mlflow?sslmode=disable", ""},
		{"postgres://db/mlflow", "pgx", "postgres://db/mlflow", ""},
		{"sqlite:///", "", "", "names no database"},
		{"mysql://u:secret@h/db", "", "", "unsupported database"},
		{"mlflow.db", "", "", "want sqlite:///"},
	} {
		driver, dsn, err := parseURL(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.in, err, c.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("%s: message shows the password: %v", c.in, err)
			}
			continue
		}
		if err != nil || driver != c.driver || dsn != c.dsn {
			t.Errorf("%s: %q %q %v, want %q %q", c.in, driver, dsn, err, c.driver, c.dsn)
		}
	}
}

func TestResolveArtifactDirs(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) string {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	here := mk("mlruns/1/aaa/artifacts")
	mk("mlruns/2") // an experiment whose runs logged nothing
	moved := mk("moved/1/bbb/artifacts")
	served := mk("served/5/ccc/artifacts")

	for _, c := range []struct {
		root, uri, want, err string
	}{
		{"", "file://" + here, here, ""},
		{"", here, here, ""},
		{"", "file://" + root + "/mlruns/2/zzz/artifacts", "", ""},        // nothing logged
		{"", "file://" + root + "/mlruns/9/zzz/artifacts", "", ""},        // the root is there
		{"", "file:///gone/host/mlruns/1/bbb/artifacts", "", "not found"}, // moved, no --artifacts
		{filepath.Join(root, "moved"), "file:///gone/host/mlruns/1/bbb/artifacts", moved, ""},
		{filepath.Join(root, "served"), "mlflow-artifacts:/5/ccc/artifacts", served, ""},
		{filepath.Join(root, "served"), "mlflow-artifacts://host:5000/5/ccc/artifacts", served, ""},
		{filepath.Join(root, "served"), "mlflow-artifacts:/5/../../../etc/artifacts", "", "leaves"},
		{"", "s3://bucket/1/x/artifacts", "", "only local artifact stores"},
		{"", "", "", "no artifact URI"},
	} {
		c2 := &ArtifactCopier{Root: c.root}
		got, err := c2.resolve(c.uri)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %q, %v; want error %q", c.uri, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s (root %q): got %q, %v; want %q", c.uri, c.root, got, err, c.want)
		}
	}
}
