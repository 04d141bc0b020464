package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// TestReadConnectionsWriteNothing checks that opening a read connection
// writes nothing, and that a read connection cannot write. Before the fix
// every read connection ran PRAGMA auto_vacuum when it opened, which
// writes the database header (one WAL frame a connection), so that on a
// full disk reads failed while connections opened. First eight new
// connections of a running store's read pool on a quiet database; then,
// with nothing else running that could write (the store closed, so no
// writer, checkpoint, compaction or probe loop), a fresh pool with the
// reader's DSN on the closed, checkpointed file: the database, its WAL
// are unchanged byte for byte, and the WAL it creates is empty.
func TestReadConnectionsWriteNothing(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sextant.db")
	files := []string{path, path + "-wal", path + "-shm"}
	s, err := Open(ctx, path, Options{ReadConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close(context.Background())
		}
	}()
	svc := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateExperiment(ctx, "/Shared/quiet", "", nil); err != nil {
		t.Fatal(err)
	}
	// Everything into the database file, an empty WAL: nothing is left
	// for the background checkpoints to change.
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// readThrough opens n connections of db, reads and tries to write
	// through each, and closes them.
	readThrough := func(db *sql.DB, n int) {
		t.Helper()
		var conns []*sql.Conn
		for range n {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			var n int
			if err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM experiments`).Scan(&n); err != nil || n != 2 {
				t.Fatalf("read on a new read connection: %d experiments, %v", n, err)
			}
			if _, err := c.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('from_a_reader', 'x')`); err == nil {
				t.Fatal("a read connection wrote a row")
			}
		}
		for _, c := range conns {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// compare checks that each file is as it was. A read connection on a
	// WAL database whose WAL and shared-memory files are gone (the last
	// writer deleted them on close) creates them, as SQLite does for every
	// reader: an empty WAL, and the index SQLite builds from the WAL in
	// shared memory, which holds no data. Any write would leave a frame in
	// the WAL or change the database file.
	compare := func(when string, before, after [][]byte) {
		t.Helper()
		for i, name := range []string{"sextant.db", "sextant.db-wal", "sextant.db-shm"} {
			switch {
			case before[i] == nil && after[i] != nil && name == "sextant.db-wal" && len(after[i]) > 0:
				t.Errorf("%s: %s, absent before, has %d bytes: a read connection wrote", when, name, len(after[i]))
			case before[i] == nil && name != "sextant.db":
			case after[i] == nil:
				t.Errorf("%s: %s is gone", when, name)
			case !bytes.Equal(before[i], after[i]):
				t.Errorf("%s: %s changed: %d bytes before, %d after", when, name, len(before[i]), len(after[i]))
			}
		}
	}

	// The running store's pool. The shared-memory file is left out: the
	// store's own connections use it.
	before := append(readFiles(t, files[:2]...), nil)
	readThrough(s.rdb, 8)
	compare("the running store's read pool", before, append(readFiles(t, files[:2]...), nil))

	// A fresh pool on the closed file.
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	before = readFiles(t, files...)
	if before[0] == nil {
		t.Fatal("the closed database has no file")
	}
	db, err := sql.Open("sqlite3", readerDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	readThrough(db, 8)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	compare("a fresh read pool on the closed database", before, readFiles(t, files...))
}

// readFiles returns each file's bytes, nil for a file that does not exist
// (an empty file reads as a non-nil empty slice).
func readFiles(t *testing.T, paths ...string) [][]byte {
	t.Helper()
	out := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			b = []byte{}
		}
		out[i] = b
	}
	return out
}

// TestNewDatabaseAutoVacuum checks that a new database is created with
// incremental auto-vacuum, which the connections no longer ask for.
func TestNewDatabaseAutoVacuum(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sextant.db")
	for i := range 2 { // created, then reopened
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var mode int
		if err := s.rdb.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != 2 {
			t.Errorf("open %d: auto_vacuum is %d, want 2 (incremental)", i, mode)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory and returns
// it; the test is skipped where it cannot (not root, not Linux), unless
// SEXTANT_TEST_TMPFS=required (scripts/test.sh sets it as root), which
// fails it instead.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs to fill (needs root on Linux; CI runs as root): %v %s", err, bytes.TrimSpace(out))
		if os.Getenv("SEXTANT_TEST_TMPFS") == "required" { // scripts/test.sh, as root
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file until the file system has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestFullDisk fills the file system under a store: writes fail with
// InsufficientStorage and the store says it is read-only; reads go on; the
// store reopens on the full disk (read-only, every acknowledged point
// readable); once space is freed it becomes writable by itself and the
// next writes succeed.
func TestFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "8m")
	ctx := t.Context()
	path := filepath.Join(dir, "sextant.db")
	open := func() (*Store, *tracking.Service) {
		t.Helper()
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		svc := tracking.NewService(s.Tracking(), tracking.Options{})
		return s, svc
	}
	s, svc := open()
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	expID, err := svc.CreateExperiment(ctx, "/Shared/full", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := svc.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: expID})
	if err != nil {
		t.Fatal(err)
	}
	runID := run.Info.RunID

	var acked int64 // steps [0, acked) are acknowledged
	logSteps := func(svc *tracking.Service) error {
		b := tracking.Batch{}
		for i := range int64(200) {
			b.Metrics = append(b.Metrics, tracking.Metric{Key: "loss", Point: metrics.Point{Step: acked + i, TimestampMs: 1000 + acked + i, Value: float64(acked + i)}})
		}
		err := svc.LogBatch(ctx, runID, b)
		if err == nil {
			acked += 200
		}
		return err
	}
	if err := logSteps(svc); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(dir, "filler"))
	var werr error
	for i := 0; i < 10000 && werr == nil; i++ {
		werr = logSteps(svc)
	}
	if errs.CodeOf(werr) != errs.InsufficientStorage || !strings.Contains(errs.MessageOf(werr), "disk is full") {
		t.Fatalf("a write on a full disk: %v (code %s), want InsufficientStorage saying the disk is full", werr, errs.CodeOf(werr))
	}
	if h := s.Health(); h.Writable || !strings.Contains(h.Reason, "disk is full") {
		t.Errorf("health on a full disk: %+v", h)
	}
	checkHistory(t, svc, runID, acked)
	if err := s.Close(ctx); err != nil {
		t.Logf("close on a full disk: %v", err)
	}

	// Reopen on the full disk.
	s, svc = open()
	defer s.Close(context.Background())
	if h := s.Health(); h.Writable || !strings.Contains(h.Reason, "disk is full") {
		t.Errorf("health after reopening on a full disk: %+v", h)
	}
	if err := svc.Init(ctx); err != nil && errs.CodeOf(err) != errs.InsufficientStorage {
		t.Errorf("init on a full disk: %v", err)
	}
	checkHistory(t, svc, runID, acked)
	if err := logSteps(svc); errs.CodeOf(err) != errs.InsufficientStorage {
		t.Fatalf("a write after reopening on a full disk: %v, want InsufficientStorage", err)
	}

	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	// The probe notices within probeEvery; wait generously.
	deadline := time.Now().Add(time.Minute)
	for !s.Health().Writable {
		if time.Now().After(deadline) {
			t.Fatalf("still read-only a minute after space was freed: %+v", s.Health())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 3 {
		if err := logSteps(svc); err != nil {
			t.Fatalf("a write after space was freed: %v", err)
		}
	}
	checkHistory(t, svc, runID, acked)
}

// checkHistory checks that metric loss holds exactly steps [0, n).
func checkHistory(t *testing.T, svc *tracking.Service, runID string, n int64) {
	t.Helper()
	var got int64
	token := ""
	for {
		page, err := svc.MetricHistory(t.Context(), runID, "loss", 0, token)
		if err != nil {
			t.Fatalf("read the history: %v", err)
		}
		for _, p := range page.Points {
			if p.Step != got {
				t.Fatalf("history: step %d where %d was expected", p.Step, got)
			}
			got++
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if got != n {
		t.Fatalf("history holds %d points, %d were acknowledged", got, n)
	}
}

// TestReadOnlyUntilSpaceReturns: a store made read-only by a full disk
// does not call itself writable while its file system is still full, even
// though a small probe write would fit (into pages a checkpoint freed in
// the WAL file), so that /health does not flap, and it refuses writes that
// would fit as well, so that they agree with /health; once space returns,
// writes are tried again at once, and the next probe makes it writable.
func TestReadOnlyUntilSpaceReturns(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	svc := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	var free atomic.Uint64
	f := func(string) (uint64, error) { return free.Load(), nil }
	s.freeBytes.Store(&f)
	s.noteFull(errs.E(errs.InsufficientStorage, "the server's disk is full"))
	for _, n := range []uint64{0, resumeFreeBytes - 1} {
		free.Store(n)
		s.probeOnce(ctx)
		if h := s.Health(); h.Writable {
			t.Fatalf("%d bytes free: the store says it is writable (%+v)", n, h)
		}
		_, err := svc.CreateExperiment(ctx, "/Shared/refused", "", nil)
		if errs.CodeOf(err) != errs.InsufficientStorage || !strings.Contains(errs.MessageOf(err), "disk is full") {
			t.Fatalf("%d bytes free: a write that fits: %v (code %s), want InsufficientStorage saying the disk is full", n, err, errs.CodeOf(err))
		}
		if _, err := svc.GetExperimentByName(ctx, "/Shared/refused"); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("%d bytes free: a refused experiment: %v, want NotFound", n, err)
		}
	}
	free.Store(resumeFreeBytes)
	if _, err := svc.CreateExperiment(ctx, "/Shared/space-returned", "", nil); err != nil {
		t.Fatalf("space returned: a write before the next probe: %v", err)
	}
	s.probeOnce(ctx)
	if h := s.Health(); !h.Writable {
		t.Fatalf("space returned: the store is still read-only (%+v)", h)
	}
}

// TestOpenReadOnlyOnAFullDisk: a store opened on a file system with less
// than resumeFreeBytes free is read-only from Open on, saying so, even
// though its probe write would fit into what is left; writes that would
// fit are refused; reads work; once space is freed, writes succeed and a
// probe makes it writable. Before, Open's probe succeeded here and the
// store called itself writable until some later write did not fit: after
// a kill -9 on a full disk, how long that took depended on timing (the
// e2e test's restarted server still said OK after 20 s under load).
func TestOpenReadOnlyOnAFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "8m")
	ctx := t.Context()
	path := filepath.Join(dir, "sextant.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateExperiment(ctx, "/Shared/before", "", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Leave a quarter of the threshold free: room for the probe's row and
	// the shared-memory file, far from the space the store waits for.
	reserve := filepath.Join(dir, "reserve")
	if err := os.WriteFile(reserve, make([]byte, resumeFreeBytes/4), 0o600); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(dir, "filler"))
	if err := os.Remove(reserve); err != nil {
		t.Fatal(err)
	}
	if n, err := freeBytes(dir); err != nil || n >= resumeFreeBytes || n < resumeFreeBytes/4 {
		t.Fatalf("free space under the filled tmpfs: %d, %v; want [%d, %d)", n, err, resumeFreeBytes/4, resumeFreeBytes)
	}

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer s.Close(context.Background())
	if h := s.Health(); h.Writable || !strings.Contains(h.Reason, "disk is full") || !strings.Contains(h.Reason, "free disk space") {
		t.Fatalf("health right after opening on a full disk: %+v, want read-only saying the disk is full", h)
	}
	svc = tracking.NewService(s.Tracking(), tracking.Options{})
	if _, err := svc.CreateExperiment(ctx, "/Shared/refused", "", nil); errs.CodeOf(err) != errs.InsufficientStorage {
		t.Fatalf("a small write on the full disk: %v (code %s), want InsufficientStorage", err, errs.CodeOf(err))
	}
	if _, err := svc.GetExperimentByName(ctx, "/Shared/before"); err != nil {
		t.Fatalf("a read on the full disk: %v", err)
	}

	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateExperiment(ctx, "/Shared/after", "", nil); err != nil {
		t.Fatalf("a write once space was freed: %v", err)
	}
	s.probeOnce(ctx)
	if h := s.Health(); !h.Writable {
		t.Fatalf("space freed and probed: still read-only (%+v)", h)
	}
}
