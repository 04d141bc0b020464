package runsearch

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
)

// The search index's reads from SQL (index.go says how they keep
// it consistent): a whole experiment, in four parts read at once, and the
// runs changed since a change number, in one snapshot.

// Estimates of the memory the index holds, beyond the bytes of strings.
const (
	expOverhead   = 4096
	runOverhead   = int64(unsafe.Sizeof(idxRun{})) + 64 // and its map entry
	paramOverhead = int64(unsafe.Sizeof(tracking.Param{}))
	tagOverhead   = int64(unsafe.Sizeof(tracking.Tag{}))
	metOverhead   = int64(unsafe.Sizeof(tracking.Metric{}))
)

// loadExperiment builds the index of e's experiment: its four parts at
// once, each in a snapshot of its own, then the runs changed after the
// oldest of those snapshots, in one snapshot that comes after them all.
// The runs that changed in between are read again whole at that last
// snapshot, the others were the same in every snapshot: the result is
// the experiment's runs exactly as of that last snapshot.
func (ix *searchIndex) loadExperiment(ctx context.Context, e *expIndex) (*runIndex, error) {
	ix.builds.Add(1)
	for try := 0; ; try++ {
		runs, seq, err := ix.loadParts(ctx, e)
		if err != nil {
			return nil, err
		}
		// Runs written while the parts were read are read again; when
		// they are many (the experiment is being filled), read it all
		// again instead, a few times.
		limit := math.MaxInt32
		if try < 3 {
			limit = max(len(runs)/8, inlineMax)
		}
		ch, err := ix.changesSince(ctx, e, seq, limit)
		if err != nil {
			return nil, err
		}
		if ch == nil {
			continue
		}
		ri := &runIndex{runs: make(map[int64]*idxRun, len(runs)), applied: max(ch.seq, seq), memo: tracking.NewMemoBytes(ix.budget / memoShare)}
		for _, r := range runs {
			ri.runs[r.pk] = r
		}
		for _, pk := range ch.pks {
			delete(ri.runs, pk)
			if r := ch.runs[pk]; r != nil {
				ri.runs[pk] = r
			}
		}
		for _, r := range ri.runs {
			ri.runBytes += r.bytes
		}
		ri.number()
		if ri.runBytes > ix.budget {
			return nil, errTooLarge
		}
		return ri, nil
	}
}

// loadParts reads the four parts of e's runs at once, each in a snapshot
// of its own, and returns the runs and the oldest snapshot's change number.
func (ix *searchIndex) loadParts(ctx context.Context, e *expIndex) ([]*idxRun, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rs runSet
	var used atomic.Int64
	seqs := make([]int64, len(runParts))
	errc := make(chan error, len(runParts))
	for i, p := range runParts {
		go func() {
			err := func() error {
				tx, err := ix.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
				if err != nil {
					return ix.s.sqlError(err, "build the search index")
				}
				defer tx.Rollback() //nolint:errcheck // read-only
				if err := tx.QueryRowContext(ctx, `SELECT seq FROM run_change_seq WHERE id = 1`).Scan(&seqs[i]); err != nil {
					return ix.s.sqlError(err, "build the search index")
				}
				return p(ix.s, ctx, tx, experimentRuns(e.id), &rs, &budgetUse{used: &used, limit: ix.budget})
			}()
			if err != nil {
				cancel()
			}
			errc <- err
		}()
	}
	var err error
	for range runParts {
		if e := <-errc; e != nil && (err == nil || errors.Is(e, errTooLarge)) {
			err = e
		}
	}
	if err != nil {
		return nil, 0, err
	}
	return rs.assemble(e.expID), slices.Min(seqs), nil
}

// runSet collects the parts of runs as they are read; each part fills its
// own field, so the parts may be read at once.
type runSet struct {
	rows    []*idxRun
	params  map[int64][]tracking.Param
	tags    map[int64][]tracking.Tag
	metrics map[int64][]tracking.Metric
}

// budgetUse counts the bytes a build reads against the budget.
type budgetUse struct {
	used  *atomic.Int64
	limit int64
}

func (b *budgetUse) add(n int64) error {
	if b != nil && b.used.Add(n) > b.limit {
		return errTooLarge
	}
	return nil
}

// queryer is a transaction or a connection pool.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// runPart reads one part of the runs that where (a condition on runs r,
// with args) selects into rs.
type runPart func(s *Searcher, ctx context.Context, q queryer, sel runSelect, rs *runSet, b *budgetUse) error

// runSelect selects runs r: from is what the FROM clause starts with,
// where a condition on it, args the arguments of both.
type runSelect struct {
	from, where string
	args        []any
}

// experimentRuns selects the runs of an experiment.
func experimentRuns(exp int64) runSelect {
	return runSelect{from: `runs r`, where: `r.experiment_id = ?`, args: []any{exp}}
}

// changedRuns selects the runs of an experiment changed after base, from
// run_changes' index on (experiment_id, seq).
func changedRuns(exp, base int64) runSelect {
	return runSelect{
		from:  `run_changes c CROSS JOIN runs r ON r.run_pk = c.run_pk`,
		where: `c.experiment_id = ? AND c.seq > ? AND r.experiment_id = ?`,
		args:  []any{exp, base, exp},
	}
}

// runParts are the four parts of runs the index holds. The joins start
// from runs (CROSS JOIN keeps that order on SQLite), whose index on
// (experiment_id, ...) finds an experiment's runs, and look each run's
// rows up by its key.
var runParts = []runPart{(*Searcher).readRunRows, (*Searcher).readRunParams, (*Searcher).readRunTags, (*Searcher).readRunMetrics}

// eachRow runs a query and calls fn for each row.
func (s *Searcher) eachRow(ctx context.Context, q queryer, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return s.sqlError(err, "load runs for search")
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			if errors.Is(err, errTooLarge) {
				return err
			}
			return s.sqlError(err, "load runs for search")
		}
	}
	return s.sqlError(rows.Err(), "load runs for search")
}

func (s *Searcher) readRunRows(ctx context.Context, q queryer, sel runSelect, rs *runSet, b *budgetUse) error {
	strs := sqlrow.Interner{}
	var user, stage sql.RawBytes
	return s.eachRow(ctx, q, `SELECT r.run_pk, r.run_id, r.name, r.user_id, r.status, r.start_time, r.end_time, r.artifact_uri, r.lifecycle_stage, r.io_count
		FROM `+sel.from+` WHERE `+sel.where, sel.args, func(rows *sql.Rows) error {
		r := &idxRun{}
		i := &r.run.Info
		var status int32
		var end sql.NullInt64
		var io int64
		if err := rows.Scan(&r.pk, &i.RunID, &i.RunName, &user, &status, &i.StartTimeMs, &end, &i.ArtifactURI, &stage, &io); err != nil {
			return err
		}
		i.UserID = strs.Get(user)
		i.Status = tracking.RunStatus(status)
		i.EndTimeMs, r.endSet = end.Int64, end.Valid
		i.LifecycleStage = tracking.LifecycleStage(strs.Get(stage))
		r.status = statusName(status)
		r.io = io != 0
		r.bytes = runOverhead + int64(len(i.RunID)+len(i.RunName)+len(i.UserID)+len(i.ArtifactURI))
		rs.rows = append(rs.rows, r)
		return b.add(r.bytes)
	})
}

func (s *Searcher) readRunParams(ctx context.Context, q queryer, sel runSelect, rs *runSet, b *budgetUse) error {
	rs.params = map[int64][]tracking.Param{}
	return readRunKVs(s, ctx, q, sel, "params", "p", rs.params, paramOverhead, b)
}

func (s *Searcher) readRunTags(ctx context.Context, q queryer, sel runSelect, rs *runSet, b *budgetUse) error {
	rs.tags = map[int64][]tracking.Tag{}
	return readRunKVs(s, ctx, q, sel, "tags", "t", rs.tags, tagOverhead, b)
}

// readRunKVs reads the params or tags of the selected runs from table
// (as alias) into byRun, counting overhead bytes a row besides its key and
// value against b.
func readRunKVs[T tracking.Param | tracking.Tag](s *Searcher, ctx context.Context, q queryer, sel runSelect, table, alias string, byRun map[int64][]T, overhead int64, b *budgetUse) error {
	strs := sqlrow.Interner{}
	var key, value sql.RawBytes
	return s.eachRow(ctx, q, `SELECT `+alias+`.run_pk, `+alias+`.key, `+alias+`.value FROM `+sel.from+` CROSS JOIN `+table+` `+alias+` ON `+alias+`.run_pk = r.run_pk WHERE `+sel.where, sel.args, func(rows *sql.Rows) error {
		var pk int64
		if err := rows.Scan(&pk, &key, &value); err != nil {
			return err
		}
		byRun[pk] = append(byRun[pk], T(tracking.Tag{Key: strs.Get(key), Value: strs.Get(value)}))
		return b.add(overhead + int64(len(key)+len(value)))
	})
}

// readRunMetrics reads the latest metric values as loadLatestMetrics does.
func (s *Searcher) readRunMetrics(ctx context.Context, q queryer, sel runSelect, rs *runSet, b *budgetUse) error {
	rs.metrics = map[int64][]tracking.Metric{}
	strs := sqlrow.Interner{}
	var key sql.RawBytes
	return s.eachRow(ctx, q, `SELECT m.run_pk, m.key, m.step, m.timestamp, m.value, m.is_nan, m.model_id, m.dataset_name, m.dataset_digest
		FROM `+sel.from+` CROSS JOIN metric_series m ON m.run_pk = r.run_pk WHERE `+sel.where, sel.args, func(rows *sql.Rows) error {
		pk, m, err := sqlrow.ScanLatestMetric(rows, strs, &key)
		if err != nil {
			return err
		}
		rs.metrics[pk] = append(rs.metrics[pk], m)
		return b.add(metOverhead + int64(len(key)+len(m.ModelID)+len(m.DatasetName)+len(m.DatasetDigest)))
	})
}

// assemble joins the parts into runs, each with its params, tags and
// metrics sorted by key (as the SQL path's loaders return them). Parts of
// runs that have no row are left out.
func (rs *runSet) assemble(expID string) []*idxRun {
	byKey := func(a, b string) int { return strings.Compare(a, b) }
	for _, r := range rs.rows {
		r.run.Info.ExperimentID = expID
		d := &r.run.Data
		if ps := rs.params[r.pk]; len(ps) > 0 {
			if !slices.IsSortedFunc(ps, func(a, b tracking.Param) int { return byKey(a.Key, b.Key) }) {
				slices.SortFunc(ps, func(a, b tracking.Param) int { return byKey(a.Key, b.Key) })
			}
			d.Params = slices.Clip(ps)
			for _, p := range ps {
				r.bytes += paramOverhead + int64(len(p.Key)+len(p.Value))
			}
		}
		if ts := rs.tags[r.pk]; len(ts) > 0 {
			if !slices.IsSortedFunc(ts, func(a, b tracking.Tag) int { return byKey(a.Key, b.Key) }) {
				slices.SortFunc(ts, func(a, b tracking.Tag) int { return byKey(a.Key, b.Key) })
			}
			d.Tags = slices.Clip(ts)
			for _, t := range ts {
				r.bytes += tagOverhead + int64(len(t.Key)+len(t.Value))
			}
		}
		if ms := rs.metrics[r.pk]; len(ms) > 0 {
			if !slices.IsSortedFunc(ms, func(a, b tracking.Metric) int { return byKey(a.Key, b.Key) }) {
				slices.SortFunc(ms, func(a, b tracking.Metric) int { return byKey(a.Key, b.Key) })
			}
			d.Metrics = slices.Clip(ms)
			for _, m := range ms {
				r.bytes += metOverhead + int64(len(m.Key)+len(m.ModelID)+len(m.DatasetName)+len(m.DatasetDigest))
			}
		}
	}
	return rs.rows
}

// statusName is the status as statusExpr renders it.
func statusName(status int32) string {
	switch status {
	case 1:
		return "RUNNING"
	case 2:
		return "SCHEDULED"
	case 3:
		return "FINISHED"
	case 4:
		return "FAILED"
	case 5:
		return "KILLED"
	}
	return "UNKNOWN"
}

// runChanges is what changed in an experiment after a change number: the
// runs changed, and their state at seq (absent: gone from the experiment).
type runChanges struct {
	seq  int64
	pks  []int64
	runs map[int64]*idxRun
}

// changesSince reads, in one snapshot, the change counter and the runs of
// e's experiment changed after base, and loads them. It returns nil when
// more than limit runs changed.
func (ix *searchIndex) changesSince(ctx context.Context, e *expIndex, base int64, limit int) (*runChanges, error) {
	tx, err := ix.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, ix.s.sqlError(err, "search runs")
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	ch := &runChanges{runs: map[int64]*idxRun{}}
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM run_change_seq WHERE id = 1`).Scan(&ch.seq); err != nil {
		return nil, ix.s.sqlError(err, "read run changes")
	}
	if ch.seq <= base {
		return ch, nil
	}
	err = ix.s.eachRow(ctx, tx, `SELECT run_pk FROM run_changes WHERE experiment_id = ? AND seq > ? LIMIT ?`, []any{e.id, base, limit + 1}, func(rows *sql.Rows) error {
		var pk int64
		if err := rows.Scan(&pk); err != nil {
			return err
		}
		ch.pks = append(ch.pks, pk)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ch.pks) > limit {
		return nil, nil
	}
	// The changed runs are read through run_changes, in the snapshot that
	// listed them.
	var rs runSet
	for _, p := range runParts {
		if err := p(ix.s, ctx, tx, changedRuns(e.id, base), &rs, nil); err != nil {
			return nil, err
		}
	}
	for _, r := range rs.assemble(e.expID) {
		ch.runs[r.pk] = r
	}
	return ch, nil
}
