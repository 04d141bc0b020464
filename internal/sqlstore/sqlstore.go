// Package sqlstore implements the tracking store on SQLite. It is the only
// package that imports a SQL driver.
//
// Writes go through one writer goroutine that commits many requests in one
// transaction (group commit), each request inside its own savepoint so that
// a failing request rolls back alone. Reads use a separate pool of
// connections, which SQLite's WAL mode lets run beside the writer.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// Options configure a Store.
type Options struct {
	// Limits are the per-run limits the store enforces; zero fields take
	// their defaults.
	Limits tracking.Limits
	// Synchronous is SQLite's synchronous setting: "FULL" (the default)
	// makes every acknowledged write survive a power cut; "NORMAL"
	// survives a process crash only.
	Synchronous string
	// ChunkPoints is the number of points compaction packs into one chunk;
	// 0 means 4096.
	ChunkPoints int
	// CompactAfter is the number of small chunks of a series that triggers
	// its compaction; 0 means 16.
	CompactAfter int
	// MaxBatchOps caps the requests committed in one transaction; 0 means 512.
	MaxBatchOps int
	// ReadConns is the size of the read pool; 0 means 4 x GOMAXPROCS.
	ReadConns int
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the options Sextant ships with.
func DefaultOptions() Options {
	return Options{
		Limits:       tracking.DefaultLimits(),
		Synchronous:  "FULL",
		ChunkPoints:  4096,
		CompactAfter: 16,
		MaxBatchOps:  512,
	}
}

// Store is the SQLite implementation of tracking.Store.
type Store struct {
	rdb    *sql.DB
	wdb    *sql.DB
	cdb    *sql.DB
	w      *writer
	c      *compactor
	limits tracking.Limits
	opts   Options
	log    *slog.Logger

	ckptQuit, ckptDone chan struct{}
}

var _ tracking.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database at path, applies
// pending migrations and starts the writer.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	d := DefaultOptions()
	if opts.Synchronous == "" {
		opts.Synchronous = d.Synchronous
	}
	opts.Synchronous = strings.ToUpper(opts.Synchronous)
	if opts.Synchronous != "FULL" && opts.Synchronous != "NORMAL" {
		return nil, fmt.Errorf("sqlstore: synchronous must be FULL or NORMAL, got %q", opts.Synchronous)
	}
	if opts.ChunkPoints <= 0 {
		opts.ChunkPoints = d.ChunkPoints
	}
	if opts.CompactAfter <= 1 {
		opts.CompactAfter = d.CompactAfter
	}
	if opts.MaxBatchOps <= 0 {
		opts.MaxBatchOps = d.MaxBatchOps
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4 * runtime.GOMAXPROCS(0)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{limits: opts.Limits.WithDefaults(), opts: opts, log: log.With("component", "sqlstore")}

	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", opts.Synchronous)
	q.Set("_busy_timeout", "10000")
	// MLflow's LIKE is case-sensitive; ILIKE lowers both sides.
	q.Set("_cslike", "1")
	q.Set("_txlock", "immediate")
	q.Set("_cache_size", "-65536") // 64 MiB page cache per connection
	// Compaction frees the pages of the small chunks it merges; incremental
	// auto-vacuum lets the checkpoint loop give them back to the file
	// system. It only takes effect when the database is created.
	q.Set("_auto_vacuum", "incremental")
	dsn := "file:" + path + "?" + q.Encode()

	var err error
	s.wdb, err = sql.Open(writerDriver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One writer connection: SQLite serialises writers anyway, and the
	// group-commit goroutine is its only user.
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if err := s.migrate(ctx); err != nil {
		s.wdb.Close()
		return nil, err
	}
	// Checkpoints get their own connection, so that copying the WAL into
	// the database runs beside the writer instead of inside its commits.
	s.cdb, err = sql.Open("sqlite3", dsn)
	if err != nil {
		s.wdb.Close()
		return nil, fmt.Errorf("open %s for checkpoints: %w", path, err)
	}
	s.cdb.SetMaxOpenConns(1)
	q.Set("_query_only", "1")
	q.Set("_txlock", "deferred")
	s.rdb, err = sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		s.wdb.Close()
		s.cdb.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(opts.ReadConns)
	s.rdb.SetMaxIdleConns(opts.ReadConns)
	s.rdb.SetConnMaxIdleTime(0)
	s.w = newWriter(s.wdb, opts.MaxBatchOps, s.log)
	s.c = newCompactor(s, s.log)
	s.w.committed = s.c.request
	s.w.start()
	s.c.start()
	s.ckptQuit, s.ckptDone = make(chan struct{}), make(chan struct{})
	go s.checkpointLoop(path + "-wal")
	return s, nil
}

// Close stops compaction, then the writer after the queued writes are
// committed, and closes the database.
func (s *Store) Close(ctx context.Context) error {
	s.c.stop()
	close(s.ckptQuit)
	<-s.ckptDone
	// Give free pages back before leaving, within a bounded time.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && s.vacuumSome(ctx); {
	}
	werr := s.w.stop(ctx)
	return errors.Join(werr, s.rdb.Close(), s.cdb.Close(), s.wdb.Close())
}

// Checkpoint runs a WAL checkpoint (TRUNCATE), so that the main database
// file holds everything; used before measuring size on disk.
func (s *Store) Checkpoint(ctx context.Context) error {
	return s.w.exclusive(ctx, func() error {
		_, err := s.wdb.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		return err
	})
}

// Compact merges every series' small chunks now, instead of waiting for
// the background compaction; benchmarks and tests use it.
func (s *Store) Compact(ctx context.Context) error {
	ids, err := s.compactionCandidatesN(ctx, -1)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.compactSeries(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// The writer connection does not checkpoint on its own (wal_autocheckpoint
// is off): an automatic checkpoint runs inside the commit that crosses the
// threshold and stalls every request of that group.
const writerDriver = "sqlite3_sextant_writer"

func init() {
	sql.Register(writerDriver, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec("PRAGMA wal_autocheckpoint = 0", nil)
			return err
		},
	})
}

// walRestartBytes is the WAL size above which the writer pauses for a
// moment to restart the WAL from its beginning. Background checkpoints copy
// the frames but cannot rewind a WAL that is written to without pause.
const walRestartBytes = 64 << 20

// checkpointLoop copies the WAL into the database every half second on
// its own connection (PASSIVE: it never blocks the writer or readers), and
// restarts the WAL when it has grown past walRestartBytes.
func (s *Store) checkpointLoop(walPath string) {
	defer close(s.ckptDone)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	ctx := context.Background()
	for {
		select {
		case <-s.ckptQuit:
			return
		case <-t.C:
		}
		if _, err := s.cdb.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			s.log.Warn("checkpoint", "err", err)
			continue
		}
		for i := 0; i < 8 && s.vacuumSome(ctx); i++ {
		}
		if fi, err := os.Stat(walPath); err == nil && fi.Size() > walRestartBytes {
			err := s.w.exclusive(ctx, func() error {
				_, err := s.wdb.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
				return err
			})
			if err != nil {
				s.log.Warn("checkpoint (truncate)", "err", err)
			}
		}
	}
}

// vacuumSome returns free pages to the file system once they make up more
// than a tenth of the file (and 4 MiB), a bounded number per call. It
// reports whether it did any work.
func (s *Store) vacuumSome(ctx context.Context) bool {
	var free, total int64
	if err := s.cdb.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return false
	}
	if err := s.cdb.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&total); err != nil {
		return false
	}
	if free < 1024 || free*10 < total {
		return false
	}
	err := s.w.exclusive(ctx, func() error {
		_, err := s.wdb.ExecContext(ctx, `PRAGMA incremental_vacuum(2048)`)
		return err
	})
	if err != nil {
		s.log.Warn("incremental vacuum", "err", err)
		return false
	}
	return true
}

// sqlError translates driver errors into domain errors. UNIQUE violations
// become AlreadyExists with msg; a full disk becomes Unavailable.
func sqlError(err error, msg string) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch {
		case se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey:
			return errs.Wrap(errs.AlreadyExists, err, msg)
		case se.Code == sqlite3.ErrFull:
			return &errs.Error{Code: errs.Unavailable, Msg: "the server's disk is full", Hint: "free disk space under the data directory", Err: err}
		case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
			return errs.Wrap(errs.Unavailable, err, "the database is busy, retry")
		}
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errs.Wrap(errs.Internal, err, msg)
}
