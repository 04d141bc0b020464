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

	secret := mk("home/.ssh")
	if err := os.Symlink(secret, filepath.Join(root, "mlruns", "1", "link")); err != nil {
		t.Fatal(err)
	}
	mlruns := filepath.Join(root, "mlruns")

	for _, c := range []struct {
		root    string
		allowed []string
		uri     string
		want    string
		err     string
	}{
		{"", []string{mlruns}, "file://" + here, here, ""},
		{"", []string{mlruns}, here, here, ""},
		{"", []string{mlruns}, "file://" + root + "/mlruns/2/zzz/artifacts", "", ""}, // nothing logged
		{"", []string{mlruns}, "file://" + root + "/mlruns/9/zzz/artifacts", "", ""}, // the root is there
		{"", nil, "file:///gone/host/mlruns/1/bbb/artifacts", "", "not found"},       // moved, no --artifacts
		{filepath.Join(root, "moved"), nil, "file:///gone/host/mlruns/1/bbb/artifacts", moved, ""},
		{filepath.Join(root, "served"), nil, "mlflow-artifacts:/5/ccc/artifacts", served, ""},
		{filepath.Join(root, "served"), nil, "mlflow-artifacts://host:5000/5/ccc/artifacts", served, ""},
		{filepath.Join(root, "served"), nil, "mlflow-artifacts:/5/../../../etc/artifacts", "", "leaves"},
		{"", nil, "s3://bucket/1/x/artifacts", "", "only local artifact stores"},
		{"", nil, "", "", "no artifact URI"},
		// What the database names is read only under the directories named.
		{"", nil, "file://" + here, "", "was not read"},
		{"", []string{mlruns}, "file://" + secret, "", "was not read"},
		{"", []string{mlruns}, "file://" + mlruns + "/../home/.ssh", "", "was not read"},
		{"", []string{mlruns}, "file://" + mlruns + "/1/link", "", "was not read"},
		{filepath.Join(root, "moved"), nil, "file://" + secret, "", "was not read"},
		{"", []string{mlruns + "2"}, "file://" + here, "", "was not read"}, // a sibling with the same prefix
	} {
		c2 := &ArtifactCopier{Root: c.root, Allowed: c.allowed}
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
