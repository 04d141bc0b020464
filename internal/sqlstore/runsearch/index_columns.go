package runsearch

import (
	"math"
	"sync/atomic"

	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// A search that walks the runs in its order, or the runs a clause
// selects, tests thousands of them against its filter. Testing a run by
// reading it (the idxRun, then its metrics, params or tags array, each
// somewhere else in a heap of hundreds of megabytes) missed the CPU's
// caches a few times per run: at 100,000 runs the walk was half of a
// metric + param search. A column holds one key's values of every run in
// one array indexed by the run's ordinal in the runIndex (idxRun.ord,
// orderEntry.ord), so a test reads an array that stays in the cache; the
// lifecycle stage, which every search but ALL tests, is one always kept.
// Columns are made when a search first needs one and kept up to date by
// apply, like the sorted orders.

// maxColumns is the number of columns an experiment's index keeps.
const maxColumns = 16

// Lifecycle stages by ordinal (runIndex.stages).
const (
	stageGone uint8 = iota // no run has the ordinal now
	stageActive
	stageDeleted
	stageOther
)

func stageOf(r *idxRun) uint8 {
	switch r.run.Info.LifecycleStage {
	case tracking.Active:
		return stageActive
	case tracking.Deleted:
		return stageDeleted
	}
	return stageOther
}

type colKey struct {
	entity search.Entity // Metric, Param or Tag
	key    string
}

// column is one key's values of every run of a runIndex, by ordinal.
type column struct {
	key colKey
	// nums, of a metric: the latest value; NaN where the run has none or
	// its latest value is NaN (every comparison is false for both).
	nums []float64
	// ids, of a param or tag: 1 + the value's index in strs; 0: none.
	ids   []int32
	strs  []string
	index map[string]int32
}

// number gives ri's runs their ordinals; ri is not shared yet.
func (ri *runIndex) number() {
	ri.stages = make([]uint8, 0, len(ri.runs))
	for _, r := range ri.runs {
		r.run.Memo = tracking.NewMemo(ri.memo)
		r.ord = int32(len(ri.stages))
		ri.stages = append(ri.stages, stageOf(r))
	}
}

// renumber gives the runs of changes their ordinals: a changed run keeps
// its own, a new one takes the next. The caller holds expIndex.mu for
// writing, or owns ri.
func (ri *runIndex) renumber(changes []runChange) {
	for _, c := range changes {
		switch {
		case c.new != nil && c.old != nil:
			c.new.ord = c.old.ord
		case c.new != nil:
			c.new.ord = int32(len(ri.stages))
			ri.stages = append(ri.stages, stageGone)
		}
		if c.new != nil {
			c.new.run.Memo = tracking.NewMemo(ri.memo)
			ri.stages[c.new.ord] = stageOf(c.new)
		} else {
			ri.stages[c.old.ord] = stageGone
		}
	}
	kept := ri.cols[:0]
	for _, col := range ri.cols {
		col.grow(len(ri.stages))
		for _, c := range changes {
			if c.new != nil {
				col.set(c.new.ord, c.new)
			} else {
				col.set(c.old.ord, nil)
			}
		}
		// A tag whose values keep changing fills the dictionary with
		// values no run has any more: make the column again when needed.
		if len(col.strs) <= 2*len(ri.runs)+1024 {
			kept = append(kept, col)
		}
	}
	clear(ri.cols[len(kept):])
	ri.cols = kept
}

// column returns the column of k: kept, or made now and kept. The caller
// holds expIndex.mu for reading, or owns ri.
func (ri *runIndex) column(k colKey) *column {
	ri.colsMu.Lock()
	defer ri.colsMu.Unlock()
	for i, c := range ri.cols {
		if c.key == k {
			copy(ri.cols[1:i+1], ri.cols[:i])
			ri.cols[0] = c
			return c
		}
	}
	c := &column{key: k}
	if k.entity != search.Metric {
		c.index = map[string]int32{}
	}
	c.grow(len(ri.stages))
	for _, r := range ri.runs {
		c.set(r.ord, r)
	}
	ri.cols = append([]*column{c}, ri.cols...)
	if len(ri.cols) > maxColumns {
		ri.cols[maxColumns] = nil
		ri.cols = ri.cols[:maxColumns]
	}
	return c
}

// grow makes room for n ordinals.
func (c *column) grow(n int) {
	if c.key.entity == search.Metric {
		for len(c.nums) < n {
			c.nums = append(c.nums, math.NaN())
		}
		return
	}
	for len(c.ids) < n {
		c.ids = append(c.ids, 0)
	}
}

// set stores r's value (r nil: none) at ord.
func (c *column) set(ord int32, r *idxRun) {
	if c.key.entity == search.Metric {
		v := math.NaN()
		if r != nil {
			if m := r.metric(c.key.key); m != nil {
				v = m.Value
			}
		}
		c.nums[ord] = v
		return
	}
	var s string
	ok := false
	if r != nil {
		if c.key.entity == search.Param {
			s, ok = r.param(c.key.key)
		} else {
			s, ok = r.tag(c.key.key)
		}
	}
	if !ok {
		c.ids[ord] = 0
		return
	}
	id, found := c.index[s]
	if !found {
		c.strs = append(c.strs, s)
		id = int32(len(c.strs))
		c.index[s] = id
	}
	c.ids[ord] = id
}

func (c *column) size() int64 {
	n := int64(8*cap(c.nums)+4*cap(c.ids)) + 256
	for _, s := range c.strs {
		n += int64(len(s)) + 48 // the string, its header and its map entry
	}
	return n
}

// colTest is a clause's test on a run's ordinal.
type colTest func(ord int32) bool

// columnTest compiles c as memClause does, testing a column, from its
// operator's description (ops.go); nil when c is not a comparison
// of a metric, param or tag a column answers (the run is tested then).
func (ri *runIndex) columnTest(c search.Comparison) colTest {
	d := opDescs[c.Op]
	switch c.Entity {
	case search.Metric:
		x := c.Value.Num
		if d.nums == nil || c.Value.Kind != search.Number || math.IsNaN(x) {
			return nil
		}
		return d.nums(ri.column(colKey{search.Metric, c.Key}).nums, x)
	case search.Param, search.Tag:
	default:
		return nil
	}
	if d.present != nil {
		ids := ri.column(colKey{c.Entity, c.Key}).ids
		if d.present(true) {
			return func(o int32) bool { return ids[o] != 0 }
		}
		return func(o int32) bool { return ids[o] == 0 }
	}
	if driveOf(c) == driveValue {
		// The runs of one value: those with its id.
		col := ri.column(colKey{c.Entity, c.Key})
		want, ids := col.index[c.Value.Str], col.ids
		if want == 0 {
			return func(int32) bool { return false }
		}
		return func(o int32) bool { return ids[o] == want }
	}
	test, ok := stringTest(c)
	if !ok {
		return nil
	}
	col := ri.column(colKey{c.Entity, c.Key})
	ids, strs := col.ids, col.strs
	// Each distinct value is tested once, when a run first has it.
	memo := make([]uint8, len(strs)+1)
	return func(o int32) bool {
		id := ids[o]
		if id == 0 {
			return false
		}
		m := memo[id]
		if m == 0 {
			m = 2
			if test(strs[id-1]) {
				m = 1
			}
			memo[id] = m
		}
		return m == 1
	}
}

// matcher returns mq's filter and view type as a test of a run with its
// ordinal: the clauses a column answers first, the others on the run; the
// clause of index skip (-1: none) is left out, every run tested passing it.
// The caller holds expIndex.mu for reading, or owns ri; the test is valid
// while it does.
func (ri *runIndex) matcher(mq *memQuery, skip int) (match func(ord int32, r *idxRun) bool, touch func([]orderEntry)) {
	var cols []colTest
	var rest []func(*idxRun) bool
	var nums [][]float64
	var ids [][]int32
	for i, c := range mq.comps {
		if i == skip {
			continue
		}
		if t := ri.columnTest(c); t != nil {
			cols = append(cols, t)
			if col := ri.column(colKey{c.Entity, c.Key}); col.nums != nil {
				nums = append(nums, col.nums)
			} else {
				ids = append(ids, col.ids)
			}
		} else {
			rest = append(rest, mq.clauses[i])
		}
	}
	stages := ri.stages
	var want uint8 // 0: any stage
	switch mq.view {
	case tracking.ActiveOnly:
		want = stageActive
	case tracking.DeletedOnly:
		want = stageDeleted
	}
	// touch reads the columns' values of a block of runs before they are
	// tested: the reads depend on nothing but the ordinals, so the CPU
	// waits for their cache misses together, where testing run after run
	// (each test a branch on the last) waited for each in turn. A metric
	// + param search of 100,000 runs walks some 8,000, reading three values
	// of each from arrays of up to 800 KB, at random.
	touch = func(es []orderEntry) {
		var sum uint64
		for i := range es {
			o := es[i].ord
			sum += uint64(stages[o])
			for _, n := range nums {
				sum += math.Float64bits(n[o])
			}
			for _, d := range ids {
				sum += uint64(d[o])
			}
		}
		touchedCols.Store(sum)
	}
	match = func(ord int32, r *idxRun) bool {
		if want != 0 && stages[ord] != want {
			return false
		}
		for _, t := range cols {
			if !t(ord) {
				return false
			}
		}
		for _, f := range rest {
			if !f(r) {
				return false
			}
		}
		return true
	}
	return match, touch
}

// touchedCols keeps matcher's reads from being compiled away.
var touchedCols atomic.Uint64
