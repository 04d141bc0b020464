package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/sextant/sextant/internal/errs"
)

// A store whose database cannot be written for lack of space goes on
// serving reads. It is read-only from the first write that fails for lack
// of space (or from Open, see below) until a probe write succeeds: the
// probe runs every probeEvery while the store is read-only. Writes are
// still attempted meanwhile when there may be space for them (each
// answers errs.InsufficientStorage while there is none), so that they
// succeed as soon as space returns.
//
// On SQLite "space for them" is resumeFreeBytes free on the database's
// file system: the probe waits for it, and writes are refused without
// being tried until then (refuseWrite). A small write can fit into the
// pages a checkpoint freed in the WAL file, or into WAL space a failed
// write left allocated, while the next larger one does not; without the
// threshold the state would flap between read-only and writable on a disk
// that is still full, and which writes succeed would depend on timing.
// Open applies the same threshold, so that a store opened on a full disk
// is read-only from the start rather than from whichever later write
// first fails.

// Health is the store's state, for /health and the log.
type Health struct {
	// Writable is false while the database cannot be written for lack of
	// space.
	Writable bool
	// Reason says why the database is not writable, for operators (with
	// the fix); empty when it is writable.
	Reason string
	// SinceMs is when Writable last changed, or when the store opened, in
	// Unix milliseconds.
	SinceMs int64
}

// probeEvery is how often a read-only store tries a write.
const probeEvery = 2 * time.Second

// resumeFreeBytes is the free space the file system of a read-only SQLite
// database needs before the store tries writing again.
const resumeFreeBytes = 1 << 20

// freeBytes returns the space free to this process on the file system
// that holds path.
func freeBytes(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// errDiskFull is the error of a write that the SQLite database's file
// system has no space for; err says why.
func errDiskFull(err error) *errs.Error {
	return &errs.Error{Code: errs.InsufficientStorage, Msg: "the server's disk is full", Hint: "free disk space under the data directory", Err: err}
}

// noSpace returns errDiskFull when the SQLite database's file system has
// less than resumeFreeBytes free. It returns nil on PostgreSQL (its server
// says when it has space), and where the free space cannot be read (a
// quota, which statfs does not show, is left to the writes themselves).
func (s *db) noSpace() error {
	if s.path == "" {
		return nil
	}
	free := freeBytes
	if f := s.freeBytes.Load(); f != nil {
		free = *f
	}
	dir := filepath.Dir(s.path)
	n, err := free(dir)
	if err != nil || n >= resumeFreeBytes {
		return nil
	}
	return errDiskFull(fmt.Errorf("%d bytes free under %s, less than the %d bytes the database waits for to write again", n, dir, resumeFreeBytes))
}

// spaceToResume reports whether a read-only store may try a write (see
// noSpace).
func (s *db) spaceToResume() bool { return s.noSpace() == nil }

// refuseWrite is asked by the writer before each group of writes: while
// the store is read-only and its file system still lacks the space to
// resume, the group is refused without being tried. A small write could
// still fit into space the database's files already hold, and succeed
// where the next one fails: the answer to a write would depend on which
// came first, and contradict /health. Once there is space again, writes
// are tried before the next probe, so that they succeed as soon as they
// can.
func (s *db) refuseWrite() error {
	if s.state().Writable {
		return nil
	}
	return s.noSpace()
}

type healthState struct {
	mu sync.Mutex
	h  Health
}

// Health returns the store's state.
func (s *Store) Health() Health { return s.state() }

func (s *db) state() Health {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.h
}

// noteFull records a write that failed for lack of space: the store is
// read-only until a probe write succeeds.
func (s *db) noteFull(err error) {
	s.health.mu.Lock()
	was := s.health.h.Writable
	if was {
		s.health.h = Health{Writable: false, Reason: errs.MessageOf(err) + hintOf(err), SinceMs: time.Now().UnixMilli()}
	}
	h := s.health.h
	s.health.mu.Unlock()
	if was {
		s.log.Error("the database cannot be written: serving reads only; writes answer 507 until space is freed, and resume by themselves then",
			"reason", h.Reason, "err", err)
	}
}

// noteWritable records a successful probe write.
func (s *db) noteWritable() {
	s.health.mu.Lock()
	was := s.health.h.Writable
	if !was {
		s.health.h = Health{Writable: true, SinceMs: time.Now().UnixMilli()}
	}
	s.health.mu.Unlock()
	if !was {
		s.log.Info("the database is writable again: writes resumed")
	}
}

func hintOf(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Hint != "" {
		return " (" + e.Hint + ")"
	}
	return ""
}

// probe writes one row (settings.write_probe), which needs space in the
// database's journal. It returns the write's error.
func (s *db) probe(ctx context.Context) error {
	now := time.Now().UnixMilli()
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.exec(`INSERT INTO settings (key, value) VALUES ('write_probe', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, time.UnixMilli(now).UTC().Format(time.RFC3339Nano))
		return sqlError(err, "probe write")
	})
}

// probeLoop tries a write every probeEvery while the store is read-only,
// until ctx is done.
func (s *db) probeLoop(ctx context.Context) {
	defer s.probeWG.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.probeOnce(ctx)
	}
}

// probeOnce tries a write when the store is read-only and there may be
// space for it, and notes the store writable when it succeeds.
func (s *db) probeOnce(ctx context.Context) {
	if s.state().Writable || !s.spaceToResume() {
		return
	}
	if err := s.probe(ctx); err == nil {
		s.noteWritable()
	}
}

// diskFull reports whether err says that the database's file system is
// out of space or its user out of quota (SQLite's SQLITE_FULL, or an I/O
// error with ENOSPC or EDQUOT).
func diskFull(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		if se.Code == sqlite3.ErrFull {
			return true
		}
		if se.Code == sqlite3.ErrIoErr && (se.SystemErrno == syscall.ENOSPC || se.SystemErrno == syscall.EDQUOT) {
			return true
		}
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
