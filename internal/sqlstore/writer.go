package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// writer owns the single write connection. Requests queue as ops; the loop
// takes every op that is waiting, runs them in one transaction, each inside
// a savepoint, commits once and then answers them all. While one commit is
// in flight the next group gathers, so throughput grows with load instead
// of every request paying for its own fsync.
type writer struct {
	db   *sql.DB
	max  int
	log  *slog.Logger
	ops  chan *writeOp
	quit chan struct{}
	done chan struct{}

	// committed receives the series that ops asked to compact, after their
	// transaction committed.
	committed func(seriesIDs []int64)
	// retryable reports errors after which an op is run again in the next
	// group: collisions with another replica's writes.
	retryable func(error) bool
	// pg says the database is PostgreSQL (see dialect.go).
	pg bool
	// m counts queued writes and times commits.
	m *storeMetrics
	// full, when set, receives the errors of ops and commits that failed
	// for lack of space (errs.InsufficientStorage).
	full func(error)
	// refuse, when set, is asked before each group: an error refuses the
	// group's ops without running them (a read-only store on a full disk).
	refuse func() error

	// txStmts are the statements of the current transaction; only the
	// loop goroutine touches them, stmts and promote.
	txStmts map[string]*sql.Stmt
	// stmts are statements prepared on the connection, kept from one
	// transaction to the next: preparing every statement again in each
	// group cost 3% of the server's CPU under the ingestion benchmark. A
	// statement first met in a transaction is prepared there and queued
	// in promote, then prepared on the connection once the transaction is
	// over (the connection is the transaction's until then).
	stmts   map[string]*sql.Stmt
	promote []string

	// patientWait is how long a group of patient ops only waits for
	// more ops to join it (Options.PatientWait).
	patientWait time.Duration

	// groups counts the transactions the loop has run, for the
	// checkpoint loop to tell a busy writer from an idle one.
	groups atomic.Int64
	// lingering is true while linger holds a group of patient ops (what
	// the tests wait for instead of a time).
	lingering atomic.Bool

	// scratch is what the loop's statements reuse (writer_scratch.go).
	scratch writeScratch
}

type writeOp struct {
	fn    func(tx *wtx) error
	raw   func() error // runs alone, outside any transaction
	done  chan error
	tries int
	// patient ops may wait for others to share their commit
	// (tracking.Patient); queued is when such an op was submitted.
	patient bool
	queued  time.Time
}

// maxTries bounds how often an op that collided with another replica's
// writes is run again.
const maxTries = 8

// wtx is the transaction handed to an op. Besides the SQL transaction it
// collects follow-up work that only happens if the op commits, and it runs
// statements through the writer's prepared-statement cache.
type wtx struct {
	*sql.Tx
	ctx     context.Context
	w       *writer
	compact []int64
}

// maxStmts bounds the statements kept prepared on the writer's connection
// (multi-row statements differ by their number of rows).
const maxStmts = 256

// prepared returns statement q for this transaction: the connection's
// prepared statement when there is one, else one prepared in the
// transaction, reused by every request in it (parsing SQL for each
// request would cost more than the writes) and queued to be kept.
func (t *wtx) prepared(q string) (*sql.Stmt, error) {
	w := t.w
	if st := w.txStmts[q]; st != nil {
		return st, nil
	}
	var st *sql.Stmt
	if kept := w.stmts[q]; kept != nil {
		st = t.Tx.StmtContext(t.ctx, kept)
	} else {
		var err error
		if st, err = t.Tx.PrepareContext(t.ctx, q); err != nil {
			return nil, sqlError(err, "prepare")
		}
		if len(w.stmts)+len(w.promote) < maxStmts {
			w.promote = append(w.promote, q)
		}
	}
	w.txStmts[q] = st
	return st, nil
}

// keepStmts prepares on the connection the statements the transaction
// just over met first. It runs between transactions, when the writer's
// one connection is free. A statement that fails to prepare is prepared
// in each transaction again, as before.
func (w *writer) keepStmts() {
	for _, q := range w.promote {
		if w.stmts[q] != nil {
			continue
		}
		if st, err := w.db.PrepareContext(context.Background(), q); err == nil {
			w.stmts[q] = st
		}
	}
	w.promote = w.promote[:0]
}

// closeStmts closes the kept statements when the loop ends.
func (w *writer) closeStmts() {
	for q, st := range w.stmts {
		st.Close()
		delete(w.stmts, q)
	}
}

// exec runs a prepared statement in the transaction.
func (t *wtx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.prepared(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

// queryRow runs a prepared single-row query in the transaction.
func (t *wtx) queryRow(q string, args ...any) *sql.Row {
	st, err := t.prepared(q)
	if err != nil {
		// Surface the prepare error through Scan.
		return t.Tx.QueryRowContext(t.ctx, q, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

// query runs a prepared query in the transaction.
func (t *wtx) query(q string, args ...any) (*sql.Rows, error) {
	st, err := t.prepared(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

// deleteOne runs query, a DELETE of a row that must exist (a tag), in
// the transaction: a failure is wrapped as what, and a DELETE that
// removed nothing returns notFound().
func (t *wtx) deleteOne(ctx context.Context, what string, notFound func() error, query string, args ...any) error {
	res, err := t.ExecContext(ctx, query, args...)
	if err != nil {
		return sqlError(err, what)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound()
	}
	return nil
}

// markCompaction asks for series compaction after this op commits.
func (t *wtx) markCompaction(seriesID int64) { t.compact = append(t.compact, seriesID) }

func newWriter(db *sql.DB, max int, log *slog.Logger) *writer {
	return &writer{
		db:      db,
		max:     max,
		log:     log,
		ops:     make(chan *writeOp, max),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		txStmts: map[string]*sql.Stmt{},
		stmts:   map[string]*sql.Stmt{},
	}
}

// begin starts a transaction for the loop.
func (w *writer) begin(ctx context.Context) (*wtx, error) {
	clear(w.txStmts)
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, sqlError(err, "begin transaction")
	}
	return &wtx{Tx: tx, ctx: ctx, w: w}, nil
}

func (w *writer) start() { go w.loop() }

// stop commits what is queued and stops the loop.
func (w *writer) stop(ctx context.Context) error {
	close(w.quit)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop writer: %w", ctx.Err())
	}
}

// do runs fn in the next group transaction and returns its error, or the
// commit's. Once queued, an op is always carried out and do waits for it,
// so a cancelled request never leaves its outcome unknown to the caller.
func (w *writer) do(ctx context.Context, fn func(tx *wtx) error) error {
	op := &writeOp{fn: fn, done: make(chan error, 1)}
	if tracking.IsPatient(ctx) {
		op.patient, op.queued = true, time.Now()
	}
	return w.submit(ctx, op)
}

// exclusive runs fn between transactions, alone on the write connection.
func (w *writer) exclusive(ctx context.Context, fn func() error) error {
	return w.submit(ctx, &writeOp{raw: fn, done: make(chan error, 1)})
}

func (w *writer) submit(ctx context.Context, op *writeOp) error {
	w.m.queued.Add(1)
	defer w.m.queued.Add(-1)
	select {
	case w.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return errs.E(errs.Unavailable, "the server is shutting down")
	}
	return <-op.done
}

func (w *writer) loop() {
	defer close(w.done)
	defer w.closeStmts()
	batch := make([]*writeOp, 0, w.max)
	for {
		select {
		case op := <-w.ops:
			batch = append(batch[:0], op)
		gather:
			for len(batch) < w.max {
				select {
				case op := <-w.ops:
					batch = append(batch, op)
				default:
					break gather
				}
			}
			batch = w.linger(batch)
			w.run(batch)
		case <-w.quit:
			// Drain what is queued, then stop.
			for {
				select {
				case op := <-w.ops:
					w.run([]*writeOp{op})
				default:
					return
				}
			}
		}
	}
}

// linger holds a group made only of patient ops until patientWait after
// the first of them was submitted, for more ops to join it, and returns
// the group. Under load, when ops waited in the queue that long already,
// it holds nothing: it never adds to a queue. A commit costs about
// the same for one request as for several (the pages of the run's row,
// the change log and the tables' tails are written once), so a thousand
// ranks' progress reports, which nobody waits on, share commits instead
// of each paying for one. Any other op ends the wait at once, and so does
// a full group or the writer stopping.
func (w *writer) linger(batch []*writeOp) []*writeOp {
	if w.patientWait <= 0 || len(batch) >= w.max {
		return batch
	}
	for _, op := range batch {
		if !op.patient {
			return batch
		}
	}
	wait := time.Until(batch[0].queued.Add(w.patientWait))
	if wait <= 0 {
		return batch
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	w.lingering.Store(true)
	defer w.lingering.Store(false)
	for len(batch) < w.max {
		select {
		case op := <-w.ops:
			batch = append(batch, op)
			if !op.patient {
				return batch
			}
		case <-t.C:
			return batch
		case <-w.quit:
			return batch
		}
	}
	return batch
}

// run executes a group: raw ops alone, the others in one transaction.
func (w *writer) run(batch []*writeOp) {
	var txOps []*writeOp
	for _, op := range batch {
		if op.raw != nil {
			op.done <- op.raw()
			continue
		}
		txOps = append(txOps, op)
	}
	if len(txOps) == 0 {
		return
	}
	if w.refuse != nil {
		if err := w.refuse(); err != nil {
			for _, op := range txOps {
				op.done <- err
			}
			return
		}
	}
	w.groups.Add(1)
	tx, err := w.begin(context.Background())
	if err != nil {
		w.noteFull(err)
		for _, op := range txOps {
			op.done <- err
		}
		return
	}
	results := make([]error, len(txOps))
	var follow []int64
	var again []*writeOp
	for i, op := range txOps {
		results[i] = w.runOne(tx, op, &follow)
		if results[i] != nil && op.tries < maxTries && w.retryable != nil && w.retryable(results[i]) {
			again = append(again, op)
		}
	}
	start := time.Now()
	err = tx.Commit()
	w.m.commitSeconds.Observe(time.Since(start).Seconds())
	w.keepStmts()
	w.m.groupRequests.Observe(float64(len(txOps)))
	if err != nil {
		if w.retryable != nil && w.retryable(err) {
			// Nothing of the group was written: run it all again.
			for _, op := range txOps {
				op.tries++
			}
			w.runAgain(txOps)
			return
		}
		err = sqlError(err, "commit")
		// SQLite may roll the whole transaction back when a statement
		// runs out of space; the commit then fails for want of a
		// transaction, and the full disk is the reason to report.
		for _, r := range results {
			if errs.CodeOf(r) == errs.InsufficientStorage && errs.CodeOf(err) != errs.InsufficientStorage {
				err = r
				break
			}
		}
		w.noteFull(err)
		for _, op := range txOps {
			op.done <- err
		}
		return
	}
	if len(follow) > 0 && w.committed != nil {
		w.committed(follow)
	}
	for _, err := range results {
		w.noteFull(err)
	}
	for i, op := range txOps {
		if results[i] != nil && slices.Contains(again, op) {
			continue
		}
		op.done <- results[i]
	}
	if len(again) > 0 {
		for _, op := range again {
			op.tries++
		}
		w.runAgain(again)
	}
}

// noteFull passes err to w.full when it says the disk is full.
func (w *writer) noteFull(err error) {
	if err != nil && w.full != nil && errs.CodeOf(err) == errs.InsufficientStorage {
		w.full(err)
	}
}

// runAgain runs ops that collided with another replica's writes once more,
// after a short pause that grows with their tries, in a group of their own.
func (w *writer) runAgain(ops []*writeOp) {
	time.Sleep(time.Duration(ops[0].tries*ops[0].tries) * time.Millisecond)
	w.run(ops)
}

// runOne runs one op inside a savepoint, so its failure undoes only its
// own writes.
func (w *writer) runOne(tx *wtx, op *writeOp, follow *[]int64) (err error) {
	if _, err := tx.exec("SAVEPOINT op"); err != nil {
		return sqlError(err, "savepoint")
	}
	tx.compact = tx.compact[:0]
	defer func() {
		// A panic in an op must not take the whole group down with it.
		if r := recover(); r != nil {
			err = errs.Wrap(errs.Internal, fmt.Errorf("panic: %v", r), "write failed")
		}
		if err != nil {
			_, rerr := tx.exec("ROLLBACK TO op")
			if rerr != nil {
				err = errors.Join(err, rerr)
			}
		} else {
			*follow = append(*follow, tx.compact...)
		}
		if _, rerr := tx.exec("RELEASE op"); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return op.fn(tx)
}
