package runsearch

import (
	"container/list"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/tracking"
)

// The search index answers runs searches of one experiment from memory, on
// SQLite (index_query.go has the search itself, index_load.go
// the reads from SQL). A page of 1,000 runs read through SQL costs some
// 8,000 rows through database/sql and cgo whatever the plan; from memory
// it costs the filter's tests of the runs walked and a copy of the page's
// run structs.
//
// The index holds, per experiment, what a search filters, orders and
// returns of each run: its row, params, tags and latest metric values, and
// whether it has inputs or outputs (those are read with SQL for the page's
// runs that have some). An experiment's index is built on its first
// search, in the background (that search and those until it is ready use
// SQL), and then kept exactly consistent with the database:
//
//   - Triggers (migration reads 7) give every change of a run's row,
//     params or tags the next number of a counter and record it in
//     run_changes, one row per run. Latest metric values change with the
//     run's row: LogBatch updates the run's metric counters in the same
//     transaction.
//   - Before each search, in one read transaction (one snapshot), the
//     index reads the counter, the runs of its experiment changed since
//     the number it last applied, and those runs, and applies them. A
//     write acknowledged before a search began is in that snapshot, so a
//     search never answers from an index older than the writes before it.
//     SQLite has one writer, so numbers come in commit order: a snapshot
//     holds every change up to its counter and none after.
//   - Between searches, the index applies the changes of recently searched
//     experiments every second (follow), so that a search finds little to
//     apply however much was written since the last one.
//   - A runIndex is always the experiment's runs exactly as of its applied
//     number: changes are applied under the write lock, and a catch-up in
//     the background builds a new runIndex and swaps it in whole.
//
// A search that finds more than inlineMax changed runs leaves them to the
// background (the changes, or a full build when more than half the runs
// changed) and uses SQL until that is done. Memory is bounded by
// Options.SearchIndexBytes, an estimate of the bytes held, over every
// experiment: the least recently searched experiments are dropped first,
// and an experiment too large for the whole budget is searched with SQL
// (and tried again after searchIndexRetry).

// DefaultSearchIndexBytes is the default of Options.SearchIndexBytes.
const DefaultSearchIndexBytes = 256 << 20

// searchIndexRetry is how long an experiment found too large for the
// budget is searched with SQL before the index tries it again.
const searchIndexRetry = 10 * time.Minute

// memoShare is the share of the index's budget (1/memoShare) that the
// JSON kept of one experiment's runs may take: they are a cache, and must
// not make the budget drop an experiment whose runs fit.
const memoShare = 8

// inlineMax is the number of changed runs a search applies itself, some
// 20 ms of reads; more are applied in the background
// (searchIndex.inlineMax).
const inlineMax = 2048

// followEvery is how often the index applies the changes of the
// experiments searched in the last followFor.
const (
	followEvery = time.Second
	followFor   = 10 * time.Minute
)

// errTooLarge stops a build that went over the budget.
var errTooLarge = errors.New("experiment too large for the search index budget")

// searchIndex is the search index of a store (one per store, nil on
// PostgreSQL or when Options.SearchIndexBytes is negative).
type searchIndex struct {
	s      *Searcher
	budget int64
	log    *slog.Logger
	// rdb are the index's own read connections, with a small page cache:
	// the index reads every run of an experiment once and every changed
	// run again, pages a search's connections need not keep (their cache
	// is 64 MiB each).
	rdb *sql.DB

	mu    sync.Mutex
	exps  map[int64]*expIndex
	lru   list.List // of *expIndex, the most recently searched first
	bytes int64     // accounted bytes of the experiments in exps
	skip  map[int64]time.Time
	// wait makes a search whose experiment's index is being built or
	// caught up wait for it instead of using SQL (tests).
	wait bool
	// inlineMax is inlineMax, lowered by tests.
	inlineMax int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// memory and sql count the searches answered each way; loads the
	// background loads started, builds the full builds among them.
	memory, sql, loads, builds atomic.Int64
	// plans counts the index's searches by the plan that found their page.
	plans [3]atomic.Int64
	// checkPlans makes every search also find its page with each other
	// plan it could take, counted in checked, and count in planMismatches
	// those whose page differs (tests).
	checkPlans     bool
	checked        [3]atomic.Int64
	planMismatches atomic.Int64
}

// expIndex is the index of one experiment.
type expIndex struct {
	id    int64
	expID string // id, formatted as runs carry it

	// Guarded by searchIndex.mu.
	elem      *list.Element // in lru; nil once dropped
	loading   chan struct{} // closed when the load under way ends; nil when none is
	accounted int64         // the bytes counted in searchIndex.bytes

	// bytes is the estimate of what cur holds.
	bytes atomic.Int64
	// searched is when e was last searched (Unix nanoseconds).
	searched atomic.Int64

	// mu guards cur: searches hold it for reading, a refresh applies
	// changes to cur, or replaces it, holding it for writing.
	mu  sync.RWMutex
	cur *runIndex // nil until built
}

// runIndex is an experiment's runs exactly as of a change number.
type runIndex struct {
	applied  int64
	runs     map[int64]*idxRun
	runBytes int64
	// orders are the sorted orders kept, the most recently used first.
	// Searches (holding expIndex.mu for reading) add one under ordersMu;
	// apply updates them (expIndex.mu held for writing).
	ordersMu sync.Mutex
	orders   []*sortedRuns
	// stages are the runs' lifecycle stages by ordinal (idxRun.ord); cols
	// the columns kept (index_columns.go), under colsMu as orders.
	stages []uint8
	colsMu sync.Mutex
	cols   []*column
	// memo counts the bytes the runs' memos keep (tracking.Memo): each
	// run's JSON once a search returned it, up to memoShare of the budget.
	memo *tracking.MemoBytes
}

// idxRun is a run as the index holds it. It is never changed: a change of
// the run replaces it, so a page may keep it after the lock is released.
type idxRun struct {
	pk int64
	// ord is the run's ordinal in its runIndex, set before the runIndex
	// holds it: the index of its values in the columns.
	ord int32
	// run has the run's Info and Data; Inputs and Outputs are left empty.
	// Data's slices are sorted by key and clipped, so that appending to a
	// copy never writes into them.
	run    tracking.Run
	status string // the status as searches compare it (statusExpr)
	endSet bool   // end_time is not NULL
	io     bool   // the run has inputs or outputs (io_count > 0)
	bytes  int64  // estimated memory
}

// indexConns is the number of the index's read connections: a build
// reads its four parts at once.
const indexConns = 4

// indexCacheKiB is the page cache of each of the index's connections.
const indexCacheKiB = 4096

// newSearchIndex returns the index of s's SQLite database, read through
// the connections open returns, with a budget of budget bytes (0: the
// default), and starts following changes.
func newSearchIndex(s *Searcher, open func(conns, cacheKiB int) (*sql.DB, error), budget int64) (*searchIndex, error) {
	if budget == 0 {
		budget = DefaultSearchIndexBytes
	}
	rdb, err := open(indexConns, indexCacheKiB)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ix := &searchIndex{
		s: s, rdb: rdb, budget: budget, log: s.log, inlineMax: inlineMax,
		exps: map[int64]*expIndex{}, skip: map[int64]time.Time{},
		ctx: ctx, cancel: cancel,
	}
	ix.wg.Add(1)
	go ix.follow()
	return ix, nil
}

// close stops following and the loads under way, waits for them and
// closes the index's connections.
func (ix *searchIndex) close() error {
	ix.cancel()
	ix.wg.Wait()
	return ix.rdb.Close()
}

// follow applies the changes of recently searched experiments every
// followEvery, until the index is closed.
func (ix *searchIndex) follow() {
	defer ix.wg.Done()
	t := time.NewTicker(followEvery)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-ix.ctx.Done():
			return
		case <-t.C:
		}
		ix.mu.Lock()
		var es []*expIndex
		since := time.Now().Add(-followFor).UnixNano()
		for _, e := range ix.exps {
			if e.loading == nil && e.searched.Load() > since {
				es = append(es, e)
			}
		}
		ix.mu.Unlock()
		if len(es) == 0 {
			continue
		}
		var seq int64
		if err := ix.rdb.QueryRowContext(ix.ctx, `SELECT seq FROM run_change_seq WHERE id = 1`).Scan(&seq); err != nil || seq == last {
			continue
		}
		last = seq
		for _, e := range es {
			e.mu.RLock()
			n := 0
			if e.cur != nil {
				n = len(e.cur.runs)
			}
			e.mu.RUnlock()
			ok, err := ix.refresh(ix.ctx, e, ix.bigLimit(n))
			if err != nil {
				if ix.ctx.Err() == nil {
					ix.log.Warn("runs search index: refresh failed", "experiment_id", e.id, "err", err)
				}
				continue
			}
			if !ok {
				ix.mu.Lock()
				if e.elem != nil {
					ix.startLoadLocked(e)
				}
				ix.mu.Unlock()
			}
		}
	}
}

// acquire returns the index of experiment exp when it can answer, or nil
// when the search should use SQL: its first build or a catch-up is under
// way (the first search starts the build), or the experiment is too
// large.
func (ix *searchIndex) acquire(exp int64) *expIndex {
	ix.mu.Lock()
	e := ix.exps[exp]
	if e == nil {
		if until, ok := ix.skip[exp]; ok {
			if time.Now().Before(until) {
				ix.mu.Unlock()
				return nil
			}
			delete(ix.skip, exp)
		}
		e = &expIndex{id: exp, expID: strconv.FormatInt(exp, 10)}
		e.elem = ix.lru.PushFront(e)
		ix.exps[exp] = e
		ix.startLoadLocked(e)
	} else {
		ix.lru.MoveToFront(e.elem)
	}
	e.searched.Store(time.Now().UnixNano())
	loading, wait := e.loading, ix.wait
	ix.mu.Unlock()
	if loading == nil {
		return e
	}
	if !wait {
		return nil
	}
	<-loading
	ix.mu.Lock()
	ok := e.loading == nil && e.elem != nil
	ix.mu.Unlock()
	if ok {
		return e
	}
	return nil
}

// refresh applies the changes committed since e was last refreshed, so
// that e is at least as new as a snapshot taken now, when at most limit
// runs changed (0: searchIndex.inlineMax). It returns false when more did
// (or e has no runs yet). A search uses SQL then, while a catch-up in the
// background (startLoadLocked) applies them.
func (ix *searchIndex) refresh(ctx context.Context, e *expIndex, limit int) (bool, error) {
	if limit == 0 {
		ix.mu.Lock()
		limit = ix.inlineMax
		ix.mu.Unlock()
	}
	// A full build can replace e's runs meanwhile (see tryRefresh): then
	// read the changes again.
	for range 3 {
		done, ok, err := ix.tryRefresh(ctx, e, limit)
		if err != nil || done {
			return ok, err
		}
	}
	return false, nil
}

func (ix *searchIndex) tryRefresh(ctx context.Context, e *expIndex, limit int) (done, ok bool, err error) {
	e.mu.RLock()
	cur := e.cur
	var base int64
	if cur != nil {
		base = cur.applied
	}
	e.mu.RUnlock()
	if cur == nil {
		return true, false, nil // dropped before it was built
	}
	ch, err := ix.changesSince(ctx, e, base, limit)
	if err != nil || ch == nil {
		return true, false, err
	}
	if ch.seq <= base {
		return true, true, nil
	}
	e.mu.Lock()
	switch {
	case e.cur != cur:
		// Replaced by a full build: ch was read against the old runs.
		e.mu.Unlock()
		return false, false, nil
	case cur.applied < ch.seq:
		// ch holds every run changed after base, so after cur.applied
		// (which only grows) too.
		cur.apply(ch.pks, ch.runs)
		cur.applied = ch.seq
		e.bytes.Store(cur.size())
	}
	e.mu.Unlock()
	ix.account(e)
	return true, true, nil
}

// bigLimit is the number of changed runs, of n, that the background
// applies to them rather than building them anew: half, or inlineMax.
func (ix *searchIndex) bigLimit(n int) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return max(n/2, ix.inlineMax, 1)
}

// startLoadLocked starts bringing e up to date in the background: a full
// build (the first, or when more than half its runs changed), which then
// replaces its runs whole, or else the changes since it was last
// refreshed, applied as a search applies them. Searches use SQL
// meanwhile. ix.mu is held.
func (ix *searchIndex) startLoadLocked(e *expIndex) {
	if e.loading != nil {
		return
	}
	done := make(chan struct{})
	e.loading = done
	ix.loads.Add(1)
	ix.wg.Add(1)
	go func() {
		defer ix.wg.Done()
		defer close(done)
		t0 := time.Now()
		runs, err := ix.catchUp(ix.ctx, e)
		ix.mu.Lock()
		defer ix.mu.Unlock()
		e.loading = nil
		switch {
		case e.elem == nil:
			// Dropped meanwhile.
		case errors.Is(err, errTooLarge):
			ix.log.Info("runs search index: experiment too large for the budget; its searches use SQL",
				"experiment_id", e.id, "budget_bytes", ix.budget, "retry_in", searchIndexRetry)
			ix.skip[e.id] = time.Now().Add(searchIndexRetry)
			ix.dropLocked(e)
		case err != nil:
			if ix.ctx.Err() == nil {
				ix.log.Warn("runs search index: load failed; its searches use SQL until the next try", "experiment_id", e.id, "err", err)
			}
			ix.dropLocked(e)
		default:
			ix.log.Debug("runs search index: loaded", "experiment_id", e.id, "runs", runs, "bytes", e.bytes.Load(), "took", time.Since(t0))
			ix.accountLocked(e)
		}
	}()
}

// catchUp brings e up to date (see startLoadLocked) and returns the
// number of its runs, counted under e.mu: searches apply changes to them.
func (ix *searchIndex) catchUp(ctx context.Context, e *expIndex) (int, error) {
	e.mu.RLock()
	cur := e.cur
	type kept struct {
		terms []sortTerm
		lead  int
	}
	var orders []kept
	n := 0 // cur's runs, counted under the lock: a search may apply changes to cur
	if cur != nil {
		n = len(cur.runs)
		cur.ordersMu.Lock()
		for _, o := range cur.orders {
			orders = append(orders, kept{o.terms, o.lead})
		}
		cur.ordersMu.Unlock()
	}
	e.mu.RUnlock()
	if cur != nil {
		ok, err := ix.refresh(ctx, e, ix.bigLimit(n))
		if err != nil {
			return 0, err
		}
		if ok {
			// Sort again the orders that applying dropped, so that
			// searches find them sorted.
			e.mu.RLock()
			for _, o := range orders {
				e.cur.orderLed(o.terms, o.lead)
			}
			e.bytes.Store(e.cur.size())
			n = len(e.cur.runs)
			e.mu.RUnlock()
			return n, nil
		}
	}
	next, err := ix.loadExperiment(ctx, e)
	if err != nil {
		return 0, err
	}
	for _, o := range orders {
		next.orderLed(o.terms, o.lead)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if b := next.size(); b > ix.budget {
			return 0, errTooLarge
		}
		e.mu.Lock()
		if e.cur == nil || e.cur.applied <= next.applied {
			e.cur = next
			e.bytes.Store(next.size())
			n = len(next.runs)
			e.mu.Unlock()
			return n, nil
		}
		e.mu.Unlock()
		// A search applied newer changes to the old runs meanwhile.
		ch, err := ix.changesSince(ctx, e, next.applied, math.MaxInt32)
		if err != nil {
			return 0, err
		}
		next.apply(ch.pks, ch.runs)
		next.applied = max(next.applied, ch.seq)
	}
}

// dropLocked removes e from the index; searches using it finish.
func (ix *searchIndex) dropLocked(e *expIndex) {
	if e.elem == nil {
		return
	}
	ix.lru.Remove(e.elem)
	e.elem = nil
	delete(ix.exps, e.id)
	ix.bytes -= e.accounted
	e.accounted = 0
}

// account brings e's size into the budget, dropping the least recently
// searched experiments while it is over.
func (ix *searchIndex) account(e *expIndex) {
	ix.mu.Lock()
	ix.accountLocked(e)
	ix.mu.Unlock()
}

func (ix *searchIndex) accountLocked(e *expIndex) {
	if e.elem == nil {
		return
	}
	n := e.bytes.Load()
	ix.bytes += n - e.accounted
	e.accounted = n
	for ix.bytes > ix.budget && ix.lru.Len() > 0 {
		victim := ix.lru.Back().Value.(*expIndex)
		if victim == e && ix.lru.Len() > 1 {
			// e was just searched: drop the next least recent first.
			victim = ix.lru.Back().Prev().Value.(*expIndex)
		}
		if victim == e {
			ix.log.Info("runs search index: experiment too large for the budget; its searches use SQL",
				"experiment_id", e.id, "budget_bytes", ix.budget, "retry_in", searchIndexRetry)
			ix.skip[e.id] = time.Now().Add(searchIndexRetry)
		}
		ix.dropLocked(victim)
	}
}

// usedBytes is the estimate of the memory the index holds.
func (ix *searchIndex) usedBytes() int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.bytes
}

// apply replaces the runs pks with their loaded state (absent: gone from
// the experiment) and updates the sorted orders, or drops those that
// sorting anew would cost less than updating. The caller holds
// expIndex.mu for writing, or owns ri.
func (ri *runIndex) apply(pks []int64, loaded map[int64]*idxRun) {
	changes := make([]runChange, 0, len(pks))
	for _, pk := range pks {
		c := runChange{old: ri.runs[pk], new: loaded[pk]}
		if c.old != nil {
			c.old.run.Memo.Retire()
			ri.runBytes -= c.old.bytes
			delete(ri.runs, pk)
		}
		if c.new != nil {
			ri.runs[pk] = c.new
			ri.runBytes += c.new.bytes
		}
		if c.old != nil || c.new != nil {
			changes = append(changes, c)
		}
	}
	ri.renumber(changes)
	kept := ri.orders[:0]
	for _, o := range ri.orders {
		if len(pks) > len(o.entries)/4+64 {
			continue
		}
		o.update(changes)
		kept = append(kept, o)
	}
	clear(ri.orders[len(kept):])
	ri.orders = kept
}

// size is the estimate of ri's bytes.
func (ri *runIndex) size() int64 {
	n := int64(expOverhead) + ri.runBytes + ri.memo.Used()
	ri.ordersMu.Lock()
	for _, o := range ri.orders {
		n += o.size()
	}
	ri.ordersMu.Unlock()
	n += int64(cap(ri.stages))
	ri.colsMu.Lock()
	for _, c := range ri.cols {
		n += c.size()
	}
	ri.colsMu.Unlock()
	return n
}
