package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
)

// TestWriterKeepsTempInMemory checks that the write connection keeps its
// savepoint journals in memory (see writerDriver): on a file, every
// request of a group wrote the pages it changed to /var/tmp.
func TestWriterKeepsTempInMemory(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var mode int
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("temp_store %d on the write connection, want 2 (MEMORY)", mode)
	}
}
