package sqlstore

import (
	"path/filepath"
	"testing"
)

// TestCatchUpCopiesTheWALBeforeARestart writes some thousands of frames
// and checks that catchUp checkpoints again while a pass finds
// catchUpFrames new frames or more, and stops at the first that finds
// fewer: the restart after it, which the writer waits for, has little
// left to copy.
func TestCatchUpCopiesTheWALBeforeARestart(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	err = s.w.exclusive(ctx, func() error {
		for _, q := range []string{
			`CREATE TABLE filler (b BLOB)`,
			`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO filler SELECT randomblob(3000) FROM n`,
		} {
			if _, err := s.wdb.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var busy, frames, copied int64
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		t.Fatal(err)
	}
	if frames < 2*catchUpFrames {
		t.Fatalf("the setup wrote %d frames: too few", frames)
	}
	// From a WAL seen empty: one pass finds every frame new, the next
	// none.
	if got := s.catchUp(ctx, 0); got != 2 {
		t.Errorf("catchUp from an empty WAL made %d passes, want 2", got)
	}
	// Seen at its end already: one pass.
	if got := s.catchUp(ctx, frames); got != 1 {
		t.Errorf("catchUp from the WAL's end made %d passes, want 1", got)
	}
}
