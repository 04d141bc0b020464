// Package sqlstore implements Sextant's stores on SQLite (the embedded
// default) and on PostgreSQL (several replicas sharing one database), with
// one SQL for both (see dialect.go). It is the only package that imports a
// SQL driver.
//
// Writes go through one writer goroutine that commits many requests in one
// transaction (group commit), each request inside its own savepoint so that
// a failing request rolls back alone. Reads use a separate pool of
// connections, which SQLite's WAL mode lets run beside the writer. On
// PostgreSQL each replica has its own writer; operations lock the rows
// they change (forUpdate), so replicas never interleave on one run.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/sqlstore/runsearch"
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
	// CompactAfter is the least number of small chunks of a series that
	// triggers its compaction (see compactDue); 0 means 16.
	CompactAfter int
	// OverviewChunks is the number of chunks an overview of a series
	// summarises (overview.go); 0 means 64.
	OverviewChunks int
	// MaxBatchOps caps the requests committed in one transaction; 0 means 512.
	MaxBatchOps int
	// PatientWait is how long the writer holds a group made only of
	// patient writes (tracking.Patient) for more writes to join it before
	// it commits; any other write ends the wait at once. 0 means 200 ms;
	// negative, no wait.
	PatientWait time.Duration
	// ReadConns is the size of the read pool; 0 means 4 x GOMAXPROCS
	// (SQLite) or 16 (PostgreSQL).
	ReadConns int
	// SearchIndexBytes is the memory, in bytes, that the runs search
	// index (runsearch/index.go) may hold, over all experiments: an estimate
	// of the runs' data and sorted orders it keeps. The least recently
	// searched experiments are dropped to stay under it, and an experiment
	// that alone would exceed it is searched with SQL. 0 means
	// DefaultSearchIndexBytes (256 MiB); a negative value turns the index
	// off. SQLite only: on PostgreSQL every search uses SQL.
	SearchIndexBytes int64
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// Metrics receives the store's Prometheus metrics (write queue, commit
	// latency, points and log lines stored, database size, active runs,
	// GPU nodes); nil registers none.
	Metrics prometheus.Registerer
}

// DefaultOptions returns the options Sextant ships with.
func DefaultOptions() Options {
	return Options{
		Limits:         tracking.DefaultLimits(),
		Synchronous:    "FULL",
		ChunkPoints:    4096,
		CompactAfter:   16,
		OverviewChunks: 64,
		MaxBatchOps:    512,
		PatientWait:    200 * time.Millisecond,
	}
}

// Store is the SQL database: its connections, the writer, compaction,
// migrations and health. What it stores is reached through one store per
// domain, each the implementation of that domain's storage interface:
// Tracking (tracking.Store), Workspace (workspace.Store), Volumes
// (volumes.Store), and OpenLogs, OpenGPU and OpenEvents for run logs, GPU
// samples and run events. They share the connections (db); the rules of
// each domain (limits, immutability, the texts of its errors) are its
// package's, and the stores only keep what they are given.
type Store struct {
	*db
	tracking  *TrackingStore
	workspace *WorkspaceStore
	volumes   *VolumeStore
}

// TrackingStore is tracking.Store: experiments, runs, metrics, logged
// models and the model registry.
type TrackingStore struct{ *db }

// WorkspaceStore is workspace.Store: users, tokens, sessions, groups,
// folders, grants, comments and the audit log.
type WorkspaceStore struct{ *db }

// VolumeStore is volumes.Store: catalogs, schemas, volumes, upload claims
// and server instances.
type VolumeStore struct{ *db }

// Tracking returns the store of experiments, runs, metrics and models.
func (s *Store) Tracking() *TrackingStore { return s.tracking }

// Workspace returns the store of users, folders, grants and comments.
func (s *Store) Workspace() *WorkspaceStore { return s.workspace }

// Volumes returns the store of catalogs, schemas, volumes and uploads.
func (s *Store) Volumes() *VolumeStore { return s.volumes }

// db is what every domain store shares: the connections and the writer.
type db struct {
	rdb *sql.DB
	wdb *sql.DB
	cdb *sql.DB // SQLite only: checkpoints
	pg  bool
	// path is the SQLite database file; empty on PostgreSQL.
	path string
	// instance names this process among the replicas (background job
	// leases).
	instance string
	w        *writer
	c        *compactor
	limits   tracking.Limits
	opts     Options
	log      *slog.Logger
	// search answers runs searches (runsearch), from its index in memory
	// on SQLite.
	search  *runsearch.Searcher
	metrics *storeMetrics

	ckptQuit, ckptDone chan struct{}

	health healthState
	// freeBytes replaces the free space reading of a read-only SQLite
	// database's file system, for tests; nil means freeBytes.
	freeBytes   atomic.Pointer[func(dir string) (uint64, error)]
	probeCancel context.CancelFunc
	probeWG     sync.WaitGroup
}

var _ tracking.Store = (*TrackingStore)(nil)

// Open opens the store at target: a SQLite database file (created if
// needed) or a PostgreSQL URL (postgres://...). It applies pending
// migrations and starts the writer. A database that is up to date but
// cannot be written for lack of space opens read-only (see Health): reads
// work, writes answer errs.InsufficientStorage until space is freed.
func Open(ctx context.Context, target string, opts Options) (*Store, error) {
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
	if opts.OverviewChunks <= 1 {
		opts.OverviewChunks = d.OverviewChunks
	}
	if opts.MaxBatchOps <= 0 {
		opts.MaxBatchOps = d.MaxBatchOps
	}
	if opts.PatientWait == 0 {
		opts.PatientWait = d.PatientWait
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	core := &db{limits: opts.Limits.WithDefaults(), log: log.With("component", "sqlstore"), instance: newInstanceID()}
	s := &Store{db: core, tracking: &TrackingStore{core}, workspace: &WorkspaceStore{core}, volumes: &VolumeStore{core}}
	s.health.h = Health{Writable: true, SinceMs: time.Now().UnixMilli()}
	var err error
	if isPostgresURL(target) {
		s.pg = true
		err = s.openPostgres(ctx, target, &opts)
	} else {
		s.path = target
		err = s.openSQLite(ctx, target, &opts)
	}
	if err != nil {
		return nil, err
	}
	s.opts = opts
	if s.search, err = runsearch.New(s.searchDB(target), opts.SearchIndexBytes); err != nil {
		return nil, errors.Join(err, s.rdb.Close(), s.cdb.Close(), s.wdb.Close())
	}
	s.metrics = newStoreMetrics(s.db, opts.Metrics)
	s.w = newWriter(s.wdb, opts.MaxBatchOps, s.log)
	s.w.m = s.metrics
	s.w.retryable = retryable
	s.w.pg = s.pg
	s.w.full = s.noteFull
	s.w.refuse = s.refuseWrite
	s.w.patientWait = max(opts.PatientWait, 0)
	s.c = newCompactor(s.db, s.log)
	s.w.committed = s.c.request
	s.w.start()
	s.c.start()
	s.ckptQuit, s.ckptDone = make(chan struct{}), make(chan struct{})
	if s.pg {
		close(s.ckptDone)
	} else {
		go s.checkpointLoop()
	}
	// Find out now whether the database can be written, so that the log
	// and /health say so from the start (noteFull logs it). On a full
	// disk the probe alone cannot tell: after a kill -9 its row may fit
	// into WAL space a failed write left allocated, or not, and the first
	// write that does not fit may come seconds later. So a file system
	// without the space a read-only store waits for to resume is full at
	// start too, whatever the probe would say.
	if err := s.noSpace(); err != nil {
		s.noteFull(err)
	} else if err := s.probe(ctx); err != nil && errs.CodeOf(err) != errs.InsufficientStorage {
		return nil, errors.Join(fmt.Errorf("write to the database: %w", err), s.Close(context.WithoutCancel(ctx)))
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.probeCancel = cancel
	s.probeWG.Add(1)
	go s.probeLoop(pctx)
	return s, nil
}

func (s *db) openSQLite(ctx context.Context, path string, opts *Options) error {
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4 * runtime.GOMAXPROCS(0)
	}
	if err := createSQLite(path); err != nil {
		return err
	}
	var err error
	s.wdb, err = sql.Open(writerDriver, writerDSN(path, opts.Synchronous))
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	// One writer connection: SQLite serialises writers anyway, and the
	// group-commit goroutine is its only user.
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if err := s.migrate(ctx); err != nil {
		s.wdb.Close()
		return err
	}
	// Checkpoints get their own connection, so that copying the WAL into
	// the database runs beside the writer instead of inside its commits.
	s.cdb, err = sql.Open("sqlite3", writerDSN(path, opts.Synchronous))
	if err != nil {
		s.wdb.Close()
		return fmt.Errorf("open %s for checkpoints: %w", path, err)
	}
	s.cdb.SetMaxOpenConns(1)
	s.rdb, err = sql.Open("sqlite3", readerDSN(path))
	if err != nil {
		s.wdb.Close()
		s.cdb.Close()
		return fmt.Errorf("open %s for reading: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(opts.ReadConns)
	s.rdb.SetMaxIdleConns(opts.ReadConns)
	s.rdb.SetConnMaxIdleTime(0)
	return nil
}

// sqliteCacheKiB is the page cache of each connection, in KiB.
const sqliteCacheKiB = 65536

// sqliteParams are the connection settings every connection shares. None
// of them writes to the database when a connection opens: the driver runs
// each as a PRAGMA on every open, and a PRAGMA that writes (auto_vacuum
// does, even when the value is unchanged) fails on a full disk, so that
// no connection could open at all (see createSQLite).
func sqliteParams() url.Values {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	// MLflow's LIKE is case-sensitive; ILIKE lowers both sides.
	q.Set("_cslike", "1")
	q.Set("_cache_size", strconv.Itoa(-sqliteCacheKiB)) // 64 MiB page cache per connection
	// Each connection keeps its recently used statements prepared: a
	// sampled read of 100 runs makes about 400 small queries, and SQLite
	// spent a sixth of it preparing the same few texts again.
	q.Set("_stmt_cache_size", strconv.Itoa(sqliteStmtCache))
	return q
}

// sqliteStmtCache is the number of prepared statements each connection keeps.
const sqliteStmtCache = 64

// writerDSN is the write (and checkpoint) connections' DSN. Setting WAL on
// a database that is in WAL mode already writes nothing.
func writerDSN(path, synchronous string) string {
	q := sqliteParams()
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", synchronous)
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// readerDSN is the read pool's DSN: opened read-only (mode=ro), so that
// SQLite itself refuses any write from a read connection, and query_only
// besides. The database is in WAL mode already (the writer opened it
// first), which a read-only connection reads without changing the file.
func readerDSN(path string) string {
	q := sqliteParams()
	q.Set("mode", "ro")
	q.Set("_query_only", "1")
	q.Set("_txlock", "deferred")
	return "file:" + path + "?" + q.Encode()
}

// createSQLite creates a new database file with incremental auto-vacuum
// and WAL mode, and does nothing to an existing one. Compaction frees the
// pages of the small chunks it merges; incremental auto-vacuum lets the
// checkpoint loop give them back to the file system. auto_vacuum can only
// be chosen before the first page is written, which switching to WAL
// does, so one connection sets both, in that order (the driver runs
// auto_vacuum first), once, at creation.
func createSQLite(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("open %s: %w", path, err)
	}
	// Created here, 0600, rather than by SQLite (0644 less the umask): it
	// holds password and token hashes, and SQLite gives the -wal and -shm
	// files the mode of the database file.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("_auto_vacuum", "incremental")
	q.Set("_journal_mode", "WAL")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	// Opening the connection runs both PRAGMAs.
	if err := db.Ping(); err != nil {
		return errors.Join(fmt.Errorf("create %s: %w", path, sqlError(err, "create the database")), db.Close())
	}
	return db.Close()
}

func (s *db) openPostgres(ctx context.Context, dsn string, opts *Options) error {
	if opts.ReadConns <= 0 {
		opts.ReadConns = 16
	}
	var err error
	if s.wdb, err = openPostgres(dsn); err != nil {
		return fmt.Errorf("open PostgreSQL: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	if s.rdb, err = openPostgres(dsn); err != nil {
		s.wdb.Close()
		return fmt.Errorf("open PostgreSQL: %w", err)
	}
	s.rdb.SetMaxOpenConns(opts.ReadConns)
	s.rdb.SetMaxIdleConns(opts.ReadConns)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.rdb.PingContext(pctx); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		return errs.Wrap(errs.Unavailable, err, "cannot reach PostgreSQL at "+redactURL(dsn))
	}
	if err := s.migrate(ctx); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		return err
	}
	return nil
}

// redactURL hides the password of a database URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "****")
	}
	return u.String()
}

// Close stops compaction, then the writer after the queued writes are
// committed, and closes the database.
func (s *Store) Close(ctx context.Context) error {
	if s.probeCancel != nil {
		s.probeCancel()
	}
	s.probeWG.Wait()
	ierr := s.search.Close()
	s.c.stop()
	close(s.ckptQuit)
	<-s.ckptDone
	// Give free pages back before leaving, within a bounded time.
	for deadline := time.Now().Add(2 * time.Second); !s.pg && time.Now().Before(deadline) && s.vacuumSome(ctx); {
	}
	if err := s.releaseLeases(ctx); err != nil {
		s.log.Warn("releasing background job leases", "err", err)
	}
	werr := s.w.stop(ctx)
	var cerr error
	if s.cdb != nil {
		cerr = s.cdb.Close()
	}
	return errors.Join(werr, ierr, s.rdb.Close(), cerr, s.wdb.Close())
}

// Checkpoint runs a WAL checkpoint (TRUNCATE), so that the main database
// file holds everything; used before measuring size on disk. A no-op on
// PostgreSQL.
func (s *Store) Checkpoint(ctx context.Context) error {
	if s.pg {
		return nil
	}
	return s.w.exclusive(ctx, func() error {
		_, err := s.wdb.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		return err
	})
}

// Compact merges every series' small chunks now, and builds the overviews
// of those series, instead of waiting for the background compaction;
// benchmarks and tests use it.
func (s *Store) Compact(ctx context.Context) error {
	ids, err := s.compactionCandidates(ctx)
	if err != nil {
		return err
	}
	return s.compactBatch(ctx, ids)
}

// The writer connection does not checkpoint on its own (wal_autocheckpoint
// is off): an automatic checkpoint runs inside the commit that crosses the
// threshold and stalls every request of that group.
const writerDriver = "sqlite3_sextant_writer"

func init() {
	sql.Register(writerDriver, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec("PRAGMA wal_autocheckpoint = 0", nil)
			if err == nil {
				// Every op of a group runs in a savepoint (writer.runOne),
				// whose journal holds the pages the op changes as they
				// were before it: the hot pages every op touches (index
				// leaves, series and run rows). Past 64 KiB SQLite spills
				// that journal to a temporary file: under the ingest
				// benchmark some 5,800 writes a second to /var/tmp, and a
				// tenth of its throughput. In memory it is a copy of the
				// pages an op changes; the writer's ops are small.
				_, err = c.Exec("PRAGMA temp_store = MEMORY", nil)
			}
			if err == nil {
				// A restarted WAL is cut back to this size at the next
				// commit (see checkpointLoop), not to nothing.
				_, err = c.Exec("PRAGMA journal_size_limit = "+strconv.Itoa(walRestartBytes), nil)
			}
			return err
		},
	})
}

// walRestartBytes is the WAL length above which the writer pauses for a
// moment to restart the WAL from its beginning. Background checkpoints copy
// the frames but cannot rewind a WAL that is written to without pause. A
// variable only so that a test can make it small.
var walRestartBytes = 64 << 20

// walPageBytes is the database's page size (SQLite's default, which the
// store keeps), to turn a WAL's frames into bytes.
const walPageBytes = 4096

// checkpointLoop copies the WAL into the database every half second on
// its own connection (PASSIVE: it never blocks the writer or readers), and
// restarts the WAL when it has grown past walRestartBytes.
func (s *db) checkpointLoop() {
	defer close(s.ckptDone)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	ctx := context.Background()
	failing := false // logged once per spell of failures (a full disk fails every tick)
	var lastGroups int64
	for {
		select {
		case <-s.ckptQuit:
			return
		case <-t.C:
		}
		var busy, frames, copied int64
		if err := s.cdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
			if !failing {
				s.log.Warn("checkpoint failed; retrying every half second, logged again once it works", "err", err)
				failing = true
			}
			continue
		}
		if failing {
			s.log.Info("checkpoints work again")
			failing = false
		}
		// Give free pages back while the writer is idle; while it is busy,
		// one bounded step a tick: writes reuse free pages anyway, and each
		// step holds them up.
		steps := 8
		if g := s.w.groups.Load(); g != lastGroups {
			steps, lastGroups = 1, g
		}
		for i := 0; i < steps && s.vacuumSome(ctx); i++ {
		}
		// frames is how far the WAL runs, not the file's size: a restarted
		// WAL is written again from its start over the same file. The pause
		// is a RESTART: it copies what the checkpoints before it left (what
		// was written while catchUp's last pass ran), and the writer starts
		// over at the WAL's head. TRUNCATE would also cut the file, 64 MB
		// of the page cache to free while every request waits (pauses of
		// 45-130 ms under the ingest benchmark, 20-50 ms without);
		// journal_size_limit cuts it back to walRestartBytes at the next
		// commit when it has grown further.
		if frames*walPageBytes > int64(walRestartBytes) {
			s.catchUp(ctx, frames)
			err := s.w.exclusive(ctx, func() error {
				_, err := s.wdb.ExecContext(ctx, `PRAGMA wal_checkpoint(RESTART)`)
				return err
			})
			if err != nil {
				s.log.Warn("checkpoint (restart)", "err", err)
			}
		}
	}
}

// catchUpPasses bounds the extra checkpoints before a WAL restart, and
// catchUpFrames is the number of frames written during one of them below
// which the restart may go ahead.
const (
	catchUpPasses = 4
	catchUpFrames = 1024
)

// catchUp runs PASSIVE checkpoints beside the writer until one finds
// fewer than catchUpFrames new frames, so that the RESTART, which the
// writer waits for, copies few frames and syncs few pages. frames is how
// far the WAL ran at the last checkpoint; it returns the number of passes.
// Under the ingest benchmark a restart right after the tick's checkpoint
// still had the 50 ms of writes made during it to copy, and syncing those
// scattered pages held every request up for 70-120 ms once a second;
// after catching up, 20-30 ms.
func (s *db) catchUp(ctx context.Context, frames int64) (passes int) {
	for passes < catchUpPasses {
		var busy, now, copied int64
		if err := s.cdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &now, &copied); err != nil {
			return passes // the restart reports the error
		}
		passes++
		if now-frames < catchUpFrames {
			return passes
		}
		frames = now
	}
	return passes
}

// vacuumPages is how many free pages one vacuum step gives back (4 MiB):
// the writer waits while it moves them.
const vacuumPages = 1024

// vacuumSome returns free pages to the file system once they make up more
// than a tenth of the file (and 4 MiB), up to vacuumPages per call. It
// reports whether it did any work.
func (s *db) vacuumSome(ctx context.Context) bool {
	if !s.state().Writable {
		return false // moving pages needs space in the WAL
	}
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
	moved := 0
	err := s.w.exclusive(ctx, func() error {
		// The pragma frees one page for each row it returns, so it has to
		// be read to its end: executed, it stops after the first page.
		rows, err := s.wdb.QueryContext(ctx, `PRAGMA incremental_vacuum(`+strconv.Itoa(vacuumPages)+`)`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			moved++
		}
		return rows.Err()
	})
	if err != nil {
		s.log.Warn("incremental vacuum", "err", err)
		return false
	}
	return moved > 0
}

// retryable reports whether a write failed only because it collided with
// another replica's (PostgreSQL deadlock or serialization failure), so
// that running it again will succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// sqlError translates driver errors into domain errors. UNIQUE violations
// become AlreadyExists with msg; a full disk becomes InsufficientStorage
// (see diskFull).
func sqlError(err error, msg string) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch {
		case se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey:
			return errs.Wrap(errs.AlreadyExists, err, msg)
		case diskFull(err):
			return errDiskFull(err)
		case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
			return errs.Wrap(errs.Unavailable, err, "the database is busy, retry")
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			return errs.Wrap(errs.AlreadyExists, err, msg)
		case pe.Code == "22021" || pe.Code == "22P05": // character_not_in_repertoire, untranslatable_character
			// PostgreSQL text cannot hold NUL characters (SQLite's can).
			return &errs.Error{Code: errs.Invalid, Msg: "text values must not contain NUL characters (\\u0000) with the PostgreSQL database", Err: err}
		case pe.Code == "40001" || pe.Code == "40P01": // serialization_failure, deadlock_detected
			return errs.Wrap(errs.Unavailable, err, "the database is busy, retry")
		case pe.Code == "53100": // disk_full
			return &errs.Error{Code: errs.InsufficientStorage, Msg: "the database server's disk is full", Hint: "free disk space on the PostgreSQL server", Err: err}
		case strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P03": // connection lost, admin shutdown, cannot connect now
			return errs.Wrap(errs.Unavailable, err, "the database is unavailable, retry")
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
