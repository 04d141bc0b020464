package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// LogOptions configure the run-log part of the store.
type LogOptions struct {
	// Limits are the per-run log limits the store enforces; zero fields
	// take their defaults.
	Limits runlogs.Limits
	// CompactAfter is the number of small chunks of a run that makes
	// compaction merge them; 0 means 32.
	CompactAfter int
	// QuietAfter is how long a run's log must go without appends before
	// the sweep merges its last small chunks; 0 means 30 s.
	QuietAfter time.Duration
	// SweepEvery is the time between two sweeps for quiet runs; 0 means
	// 10 s. A negative value turns compaction off (tests call Compact).
	SweepEvery time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives compaction logs; nil means the store's logger.
	Logger *slog.Logger
}

// LogStore is the SQLite implementation of runlogs.Store. It shares the
// Store's writer (an append request is one op of a group commit) and read
// pool, and merges small chunks in its own goroutine.
//
// Fresh appends land as one or more chunks per request, encoded by the
// request's goroutine before the writer sees them: full chunks of
// runlogs.ChunkLines lines and a smaller last one. Compaction merges runs
// of small chunks into full ones off the writer, as metric compaction
// does, and swaps them in with one small writer op.
type LogStore struct {
	s      *Store
	opts   LogOptions
	limits runlogs.Limits
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex
	pending map[int64]struct{}
	wake    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var _ runlogs.Store = (*LogStore)(nil)

// OpenLogs returns the run-log part of s and starts its compaction loop.
// Close it before s.
func OpenLogs(ctx context.Context, s *Store, opts LogOptions) (*LogStore, error) {
	if err := s.createTrigger(ctx, "run log purge", purgeTrigger); err != nil {
		return nil, err
	}
	if opts.CompactAfter <= 1 {
		opts.CompactAfter = 32
	}
	if opts.QuietAfter <= 0 {
		opts.QuietAfter = 30 * time.Second
	}
	if opts.SweepEvery == 0 {
		opts.SweepEvery = 10 * time.Second
	}
	l := &LogStore{
		s: s, opts: opts, limits: opts.Limits.WithDefaults(), now: opts.Now, log: opts.Logger,
		pending: map[int64]struct{}{}, wake: make(chan struct{}, 1),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = s.log
	}
	l.log = l.log.With("component", "runlog-store")
	cctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if opts.SweepEvery > 0 {
		l.wg.Go(func() { l.compactLoop(cctx) })
	}
	return l, nil
}

// Close stops compaction.
func (l *LogStore) Close(ctx context.Context) error {
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop log compaction: %w", ctx.Err())
	}
}

// encodeChunks cuts lines into chunks and encodes them, several at once
// for a large batch. FirstLine is left 0: the writer numbers them.
func encodeChunks(lines []runlogs.Line) []runlogs.Chunk {
	parts := runlogs.CutChunks(lines)
	out := make([]runlogs.Chunk, len(parts))
	if len(parts) == 1 {
		out[0] = runlogs.ChunkOf(parts[0], 0, runlogs.CompressFast)
		return out
	}
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { out[i] = runlogs.ChunkOf(p, 0, runlogs.CompressFast) })
	}
	wg.Wait()
	return out
}

// AppendLines implements runlogs.Store.
func (l *LogStore) AppendLines(ctx context.Context, runID string, b runlogs.Batch) (runlogs.AppendResult, error) {
	var chunks []runlogs.Chunk
	var textBytes int64
	if len(b.Lines) > 0 {
		// Encode outside the writer, assuming no line is a duplicate (a
		// retry re-encodes the rest inside the op; that is rare).
		chunks = encodeChunks(b.Lines)
		for i := range chunks {
			textBytes += chunks[i].RawBytes
		}
	}
	var res runlogs.AppendResult
	var compact bool
	var runPK int64
	err := l.s.w.do(ctx, func(tx *wtx) error {
		res = runlogs.AppendResult{}
		var stage string
		err := tx.queryRow(`SELECT run_pk, lifecycle_stage FROM runs WHERE run_id = ?`, runID).Scan(&runPK, &stage)
		if errors.Is(err, sql.ErrNoRows) {
			return tracking.RunNotFound(runID)
		}
		if err != nil {
			return sqlError(err, "get run")
		}
		if err := tracking.CheckRunActive(runID, tracking.LifecycleStage(stage)); err != nil {
			return err
		}
		// The state row exists from the first append on, and is locked on
		// PostgreSQL so that replicas appending to one run take turns.
		if _, err := tx.exec(`INSERT INTO run_log_state (run_pk, next_line, bytes, small_chunks, last_append_ms) VALUES (?, 1, 0, 0, 0)
			ON CONFLICT (run_pk) DO NOTHING`, runPK); err != nil {
			return sqlError(err, "create log state")
		}
		var next, bytes, small int64
		if err := tx.queryRow(`SELECT next_line, bytes, small_chunks FROM run_log_state WHERE run_pk = ?`+tx.lock(), runPK).Scan(&next, &bytes, &small); err != nil {
			return sqlError(err, "read log state")
		}
		var seq int64
		err = tx.queryRow(`SELECT next_seq FROM run_log_sources WHERE run_pk = ? AND source = ?`, runPK, b.Source).Scan(&seq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return sqlError(err, "read log source")
		}
		n := int64(len(b.Lines))
		skip := min(max(seq-b.FirstSeq, 0), n)
		res.Duplicates = int(skip)
		res.NextSeq = max(seq, b.FirstSeq+n)
		if skip == n {
			return nil
		}
		cs, add := chunks, textBytes
		if skip > 0 {
			cs = encodeChunks(b.Lines[skip:])
			add = 0
			for i := range cs {
				add += cs[i].RawBytes
			}
		}
		stored := n - skip
		if err := l.limits.CheckRun(next-1, stored, bytes, add); err != nil {
			return err
		}
		res.FirstLine, res.Stored = next, int(stored)
		for i := range cs {
			c := &cs[i]
			full := runlogs.Full(c.Count, c.RawBytes)
			if _, err := tx.exec(`INSERT INTO run_log_chunks (run_pk, first_line, count, min_ts, max_ts, nodes, streams, raw_bytes, is_full, data)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				runPK, next, c.Count, c.MinTimestampMs, c.MaxTimestampMs, int64(c.Nodes), int64(c.Streams), c.RawBytes, full, c.Data); err != nil {
				return sqlError(err, "store log chunk")
			}
			if !full {
				small++
			}
			next += int64(c.Count)
		}
		if _, err := tx.exec(`UPDATE run_log_state SET next_line = ?, bytes = ?, small_chunks = ?, last_append_ms = ? WHERE run_pk = ?`,
			next, bytes+add, small, l.now().UnixMilli(), runPK); err != nil {
			return sqlError(err, "update log state")
		}
		if _, err := tx.exec(`INSERT INTO run_log_sources (run_pk, source, next_seq) VALUES (?, ?, ?)
			ON CONFLICT (run_pk, source) DO UPDATE SET next_seq = excluded.next_seq`, runPK, b.Source, res.NextSeq); err != nil {
			return sqlError(err, "update log source")
		}
		compact = small >= int64(l.opts.CompactAfter)
		return nil
	})
	if err != nil {
		return runlogs.AppendResult{}, err
	}
	l.s.metrics.logLines.Add(float64(res.Stored))
	if compact {
		l.request(runPK)
	}
	return res, nil
}

// readHead begins a read transaction and reads the head of a run's log,
// and the run's key, in it, so that what the caller reads next comes from
// the same snapshot. The caller rolls tx back when done.
func (l *LogStore) readHead(ctx context.Context, runID string) (*sql.Tx, runlogs.Head, int64, error) {
	tx, err := l.s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, runlogs.Head{}, 0, sqlError(err, "read log")
	}
	var head runlogs.Head
	var pk int64
	var status int32
	var stage string
	err = tx.QueryRowContext(ctx, `SELECT r.run_pk, r.status, r.lifecycle_stage, COALESCE(s.next_line, 1), COALESCE(s.bytes, 0)
		FROM runs r LEFT JOIN run_log_state s ON s.run_pk = r.run_pk WHERE r.run_id = ?`, runID).
		Scan(&pk, &status, &stage, &head.NextLine, &head.Bytes)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		err = tracking.RunNotFound(runID)
	case err != nil:
		err = sqlError(err, "read log")
	case tracking.LifecycleStage(stage) != tracking.Active:
		err = runlogs.RunDeleted(runID)
	}
	if err != nil {
		tx.Rollback()
		return nil, runlogs.Head{}, 0, err
	}
	head.RunStatus = tracking.RunStatus(status)
	return tx, head, pk, nil
}

// Spans implements runlogs.Store.
func (l *LogStore) Spans(ctx context.Context, runID string) (runlogs.Head, []runlogs.ChunkSpan, error) {
	tx, head, pk, err := l.readHead(ctx, runID)
	if err != nil {
		return runlogs.Head{}, nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT first_line, count, min_ts, max_ts FROM run_log_chunks WHERE run_pk = ? ORDER BY first_line`, pk)
	if err != nil {
		return runlogs.Head{}, nil, sqlError(err, "read log chunks")
	}
	defer rows.Close()
	var out []runlogs.ChunkSpan
	for rows.Next() {
		var c runlogs.ChunkSpan
		if err := rows.Scan(&c.FirstLine, &c.Count, &c.MinTimestampMs, &c.MaxTimestampMs); err != nil {
			return runlogs.Head{}, nil, sqlError(err, "scan log chunk")
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return runlogs.Head{}, nil, sqlError(err, "read log chunks")
	}
	return head, out, nil
}

// ReadChunks implements runlogs.Store.
func (l *LogStore) ReadChunks(ctx context.Context, runID string, q runlogs.ChunkQuery) (runlogs.Head, []runlogs.Chunk, error) {
	// One read transaction: the head and the chunks come from the same
	// snapshot, even while compaction swaps chunks.
	tx, head, pk, err := l.readHead(ctx, runID)
	if err != nil {
		return runlogs.Head{}, nil, err
	}
	defer tx.Rollback()
	from := max(q.FromLine, 1)
	if from >= head.NextLine {
		return head, nil, nil
	}
	query := `SELECT first_line, count, min_ts, max_ts, nodes, streams, raw_bytes, data FROM run_log_chunks
		WHERE run_pk = ? AND first_line >= (SELECT COALESCE(MAX(first_line), 1) FROM run_log_chunks WHERE run_pk = ? AND first_line <= ?)`
	args := []any{pk, pk, from}
	if q.Nodes != 0 {
		query += ` AND (nodes & ?) != 0`
		args = append(args, int64(q.Nodes))
	}
	if q.Streams != 0 {
		query += ` AND (streams & ?) != 0`
		args = append(args, int64(q.Streams))
	}
	if q.SinceMs > 0 {
		query += ` AND max_ts >= ?`
		args = append(args, q.SinceMs)
	}
	query += ` ORDER BY first_line LIMIT ?`
	args = append(args, max(q.MaxChunks, 1))
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return runlogs.Head{}, nil, sqlError(err, "read log chunks")
	}
	defer rows.Close()
	var out []runlogs.Chunk
	for rows.Next() {
		var c runlogs.Chunk
		var nodes, streams int64
		if err := rows.Scan(&c.FirstLine, &c.Count, &c.MinTimestampMs, &c.MaxTimestampMs, &nodes, &streams, &c.RawBytes, &c.Data); err != nil {
			return runlogs.Head{}, nil, sqlError(err, "scan log chunk")
		}
		c.Nodes, c.Streams = uint64(nodes), uint8(streams)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return runlogs.Head{}, nil, sqlError(err, "read log chunks")
	}
	return head, out, nil
}
