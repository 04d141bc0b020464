package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sextant/sextant/internal/tracking"
)

// TestSQLiteFileModes: the database file and its -wal and -shm (password
// and token hashes, sessions) are 0600, whatever the umask lets through.
func TestSQLiteFileModes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sextant.db")
	s, err := Open(ctx, path, Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Tracking().CreateExperiment(ctx, &tracking.Experiment{Name: "modes"}, func(id string) string { return "mlflow-artifacts:/" + id }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", filepath.Base(p), got)
		}
	}
}
