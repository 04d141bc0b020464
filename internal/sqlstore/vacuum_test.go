package sqlstore

import (
	"path/filepath"
	"testing"
)

// TestVacuumGivesBackFreePages frees a fifth of the file, as compaction
// does when it merges small chunks, and checks that one vacuum step gives
// vacuumPages of them back to the file system. SQLite's incremental_vacuum
// frees one page per row it returns: run with Exec, it stopped after one,
// and a compacted database never shrank.
func TestVacuumGivesBackFreePages(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	// The checkpoint loop vacuums too, every half second while the writer
	// is idle: stopped, so that the counts below are this test's alone (on
	// a busy machine it took a step between them). Close closes the fresh
	// channel and finds the loop done.
	close(s.ckptQuit)
	<-s.ckptDone
	s.ckptQuit = make(chan struct{})
	count := func(pragma string) int64 {
		t.Helper()
		var n int64
		if err := s.wdb.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err = s.w.exclusive(ctx, func() error {
		for _, q := range []string{
			`CREATE TABLE filler (b BLOB)`,
			`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) INSERT INTO filler SELECT zeroblob(3000) FROM n`,
			// Every fifth row, so that the free pages lie all over the file.
			`DELETE FROM filler WHERE rowid % 5 = 0`,
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
	free, pages := count("freelist_count"), count("page_count")
	if free < 2*vacuumPages || free*10 < pages {
		t.Fatalf("the setup freed %d of %d pages: too few to vacuum", free, pages)
	}
	if !s.vacuumSome(ctx) {
		t.Fatal("vacuumSome did nothing with a fifth of the file free")
	}
	if got := count("freelist_count"); got != free-vacuumPages {
		t.Errorf("free pages after one step: %d, want %d (%d given back)", got, free-vacuumPages, vacuumPages)
	}
	// The file shrinks by as many pages, and by the pointer-map pages
	// that mapped them.
	if got := count("page_count"); got > pages-vacuumPages {
		t.Errorf("pages after one step: %d, want at most %d", got, pages-vacuumPages)
	}
	// Steps go on until free pages are under a tenth of the file.
	for i := 0; s.vacuumSome(ctx); i++ {
		if i > 10 {
			t.Fatal("vacuum never stops")
		}
	}
	if free, pages := count("freelist_count"), count("page_count"); free*10 >= pages && free >= 1024 {
		t.Errorf("after vacuuming: %d of %d pages free", free, pages)
	}
}
