package runsearch

import (
	"context"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// A search answered by the index (index.go) has exactly the SQL
// path's semantics: the same validation and errors (it renders the SQL of
// the clauses and the order, and decodes the page token, as the SQL path
// does, before anything else), the filter evaluated as SQLite evaluates
// the rendered SQL (NULL comparisons are false; LIKE as SQLite's, see
// sqliteLike; an integer column against a number as SQLite compares
// them), the order as the SQL path's sort terms (sortTerm.src says what
// each reads), and the same page tokens, so that a token from either path
// works in the other. What it cannot do the same way it leaves to SQL,
// decided per search: several experiments, datasets clauses, LIKE
// patterns longer than SQLite takes, tokens that hold a NaN.

// memQuery is a runs search compiled for the index.
type memQuery struct {
	exp         int64
	view        tracking.ViewType
	clauses     []func(*idxRun) bool
	comps       []search.Comparison // the clauses, as parsed
	drivers     []int               // the clauses a search may start from, by index
	terms       []sortTerm
	cursor      []any
	fingerprint string
	max         int
}

// likeMaxPattern is SQLite's longest LIKE pattern (SQLITE_MAX_LIKE_PATTERN_LENGTH):
// a longer one is an error, which the SQL path reports.
const likeMaxPattern = 50000

// compileMemQuery compiles q for the index. It returns an error where the
// SQL path would (the same error), and false where the index cannot answer
// q the SQL path's way.
func compileMemQuery(q tracking.RunQuery) (*memQuery, bool, error) {
	exp, nexp := int64(0), 0
	for _, id := range q.ExperimentIDs {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			continue // as prepareRunSearch: no such experiment
		}
		if nexp == 0 || n != exp {
			nexp++
		}
		exp = n
	}
	if nexp != 1 || q.MaxResults <= 0 {
		return nil, false, nil
	}
	mq := &memQuery{exp: exp, view: q.ViewType, max: q.MaxResults}
	ok := true
	for _, c := range q.Filter.Clauses {
		// The SQL path's rendering validates the clause.
		if _, _, err := runClause(c); err != nil {
			return nil, false, err
		}
		f, can := memClause(c)
		ok = ok && can
		mq.clauses = append(mq.clauses, f)
		mq.comps = append(mq.comps, c)
		if drives(c) {
			mq.drivers = append(mq.drivers, len(mq.comps)-1)
		}
	}
	_, _, terms, err := runOrder(q.OrderBy)
	if err != nil {
		return nil, false, err
	}
	mq.terms = terms
	mq.fingerprint = runQueryFingerprint(q)
	if q.PageToken != "" {
		if mq.cursor, err = decodeRunToken(q.PageToken, mq.fingerprint, terms); err != nil {
			return nil, false, err
		}
		for _, v := range mq.cursor {
			// SQLite binds NaN as NULL: the keyset comparison then differs
			// from any ordering of values.
			if f, isF := v.(float64); isF && math.IsNaN(f) {
				ok = false
			}
		}
	}
	return mq, ok, nil
}

// memClause compiles a clause that runClause accepted into the index's
// row test, from its operator's description (ops.go); false: the
// index cannot evaluate it (an operator without a row test for the
// clause's value, a datasets clause), and SQL answers the search.
func memClause(c search.Comparison) (func(*idxRun) bool, bool) {
	switch c.Entity {
	case search.Metric:
		test, ok := floatTest(c)
		if !ok {
			return nil, false
		}
		key := c.Key
		return func(r *idxRun) bool {
			m := r.metric(key)
			return m != nil && test(m.Value) // none: NULL
		}, true
	case search.Param, search.Tag:
		get := func(r *idxRun) (string, bool) { return r.param(c.Key) }
		if c.Entity == search.Tag {
			get = func(r *idxRun) (string, bool) { return r.tag(c.Key) }
		}
		if present := opDescs[c.Op].present; present != nil {
			return func(r *idxRun) bool { _, ok := get(r); return present(ok) }, true
		}
		test, ok := stringTest(c)
		if !ok {
			return nil, false
		}
		return func(r *idxRun) bool {
			v, ok := get(r)
			return ok && test(v)
		}, true
	case search.Attribute:
		switch c.Key {
		case search.AttrStartTime:
			test, ok := intTest(c)
			if !ok {
				return nil, false
			}
			return func(r *idxRun) bool { return test(r.run.Info.StartTimeMs) }, true
		case search.AttrEndTime:
			test, ok := intTest(c)
			if !ok {
				return nil, false
			}
			return func(r *idxRun) bool { return r.endSet && test(r.run.Info.EndTimeMs) }, true
		}
		test, ok := stringTest(c)
		if !ok {
			return nil, false
		}
		key := c.Key
		return func(r *idxRun) bool { return test(r.attr(key)) }, true
	}
	return nil, false
}

// metric returns the run's latest value of key, or nil.
// metric, param and tag search by hand: slices.BinarySearchFunc with a
// comparison closure took twice as long per lookup (35 against 17 ns),
// and a search evaluates them for every candidate run.
func (r *idxRun) metric(key string) *tracking.Metric {
	ms := r.run.Data.Metrics
	lo, hi := 0, len(ms)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if ms[h].Key < key {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(ms) && ms[lo].Key == key {
		return &ms[lo]
	}
	return nil
}

// param returns the run's value of param key.
func (r *idxRun) param(key string) (string, bool) {
	ps := r.run.Data.Params
	lo, hi := 0, len(ps)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if ps[h].Key < key {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(ps) && ps[lo].Key == key {
		return ps[lo].Value, true
	}
	return "", false
}

// tag returns the run's value of tag key.
func (r *idxRun) tag(key string) (string, bool) {
	ts := r.run.Data.Tags
	lo, hi := 0, len(ts)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if ts[h].Key < key {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(ts) && ts[lo].Key == key {
		return ts[lo].Value, true
	}
	return "", false
}

// attr returns a string attribute as runAttrColumn's expression reads it.
func (r *idxRun) attr(key string) string {
	i := &r.run.Info
	switch key {
	case search.AttrRunID:
		return i.RunID
	case search.AttrRunName:
		return i.RunName
	case search.AttrUserID:
		return i.UserID
	case search.AttrStatus:
		return r.status
	case search.AttrArtifactURI:
		return i.ArtifactURI
	case search.AttrLifecycleStage:
		return string(i.LifecycleStage)
	}
	return ""
}

// termVal is the value of a sort term for a run; the field of the term's
// kind is set.
type termVal struct {
	i int64
	f float64
	s string
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// term computes what the sort term src selects of r, as the SQL path's
// expression for it does.
func (r *idxRun) term(src termSource) termVal {
	switch src.entity {
	case search.Metric:
		m := r.metric(src.key)
		switch src.part {
		case partMissing:
			return termVal{i: b2i(m == nil)}
		case partNaN:
			return termVal{i: b2i(m != nil && math.IsNaN(m.Value))}
		}
		if m == nil || math.IsNaN(m.Value) {
			return termVal{}
		}
		return termVal{f: m.Value}
	case search.Param, search.Tag:
		var v string
		var ok bool
		if src.entity == search.Param {
			v, ok = r.param(src.key)
		} else {
			v, ok = r.tag(src.key)
		}
		if src.part == partMissing {
			return termVal{i: b2i(!ok)}
		}
		return termVal{s: v}
	}
	switch src.key {
	case search.AttrStartTime:
		return termVal{i: r.run.Info.StartTimeMs}
	case search.AttrEndTime:
		if src.part == partMissing {
			return termVal{i: b2i(!r.endSet)}
		}
		if !r.endSet {
			return termVal{}
		}
		return termVal{i: r.run.Info.EndTimeMs}
	}
	return termVal{s: r.attr(src.key)}
}

// compareTerm orders two values of a term of kind k, ascending.
func compareTerm(k termKind, a, b termVal) int {
	switch k {
	case termInt:
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
	case termFloat:
		switch {
		case a.f < b.f:
			return -1
		case a.f > b.f:
			return 1
		}
	default:
		return strings.Compare(a.s, b.s)
	}
	return 0
}

// valOf converts a cursor value (as decodeRunToken returns it) to a termVal.
func valOf(k termKind, v any) termVal {
	switch k {
	case termInt:
		return termVal{i: v.(int64)}
	case termFloat:
		return termVal{f: v.(float64)}
	}
	return termVal{s: v.(string)}
}

// anyOf converts a termVal to the value encodeTermValue takes.
func anyOf(k termKind, v termVal) any {
	switch k {
	case termInt:
		return v.i
	case termFloat:
		return v.f
	}
	return v.s
}

// compareRuns orders a and b by terms from the first term on.
func compareRuns(terms []sortTerm, from int, a, b *idxRun) int {
	for _, t := range terms[from:] {
		c := compareTerm(t.kind, a.term(t.src), b.term(t.src))
		if t.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// compareCursor orders r against a page token's cursor.
func compareCursor(terms []sortTerm, r *idxRun, cursor []any) int {
	for i, t := range terms {
		c := compareTerm(t.kind, r.term(t.src), valOf(t.kind, cursor[i]))
		if t.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// sortedRuns is an experiment's runs in the order of one list of sort
// terms, kept so that a search walks it from its cursor and stops at a
// full page. Each entry carries the run's values of the first order key
// (the terms up to the first value term: its flags, packed into rank, and
// its value), so that sorting rarely evaluates a term.
type sortedRuns struct {
	sig   string
	terms []sortTerm
	g0    int // the number of terms in the first order key
	// lead, when not 0, is the number of leading terms that are a param's
	// or a tag's (index_led.go): the order was sorted, and is
	// sorted again, by taking the runs of the order of the other terms in
	// turn.
	lead    int
	entries []orderEntry
}

type orderEntry struct {
	r    *idxRun
	rank uint8
	ord  int32 // r.ord, here so that a walk reads no run it skips
	v    termVal
}

// orderSig identifies a list of sort terms by what they compute.
func orderSig(terms []sortTerm) string {
	b := make([]byte, 0, 32*len(terms))
	for _, t := range terms {
		b = strconv.AppendInt(b, int64(t.src.entity), 10)
		b = strconv.AppendQuote(append(b, ' '), t.src.key)
		b = strconv.AppendInt(append(b, ' '), int64(t.src.part), 10)
		b = strconv.AppendInt(append(b, ' '), int64(t.kind), 10)
		b = append(strconv.AppendBool(append(b, ' '), t.desc), ';')
	}
	return string(b)
}

// newOrder returns an empty order of terms.
func newOrder(terms []sortTerm) *sortedRuns {
	o := &sortedRuns{sig: orderSig(terms), terms: terms, g0: len(terms)}
	for i, t := range terms {
		if t.src.part == partValue {
			o.g0 = i + 1
			break
		}
	}
	return o
}

func newSortedRuns(terms []sortTerm, runs map[int64]*idxRun) *sortedRuns {
	o := newOrder(terms)
	o.entries = make([]orderEntry, 0, len(runs))
	for _, r := range runs {
		o.entries = append(o.entries, o.entry(r))
	}
	slices.SortFunc(o.entries, o.compare)
	return o
}

func (o *sortedRuns) entry(r *idxRun) orderEntry {
	e := orderEntry{r: r, ord: r.ord}
	for _, t := range o.terms[:o.g0-1] {
		e.rank = e.rank<<1 | uint8(r.term(t.src).i)
	}
	e.v = r.term(o.terms[o.g0-1].src)
	return e
}

func (o *sortedRuns) compare(a, b orderEntry) int {
	if a.rank != b.rank {
		if a.rank < b.rank {
			return -1
		}
		return 1
	}
	t := &o.terms[o.g0-1]
	c := compareTerm(t.kind, a.v, b.v)
	if t.desc {
		c = -c
	}
	if c != 0 {
		return c
	}
	return compareRuns(o.terms, o.g0, a.r, b.r)
}

// runChange is a run's state before and after a change; nil: absent.
type runChange struct{ old, new *idxRun }

// update applies changes to the order. A run whose values of the order's
// terms did not change (a tag set, when the order reads no tags) keeps its
// place: its entry takes the new state, found by binary search. The others
// are removed (each found by binary search) and inserted in one merge.
func (o *sortedRuns) update(changes []runChange) {
	n0 := len(o.entries)
	find := func(r *idxRun, en orderEntry) int {
		i := sort.Search(n0, func(i int) bool { return o.compare(o.entries[i], en) >= 0 })
		if i == n0 || o.entries[i].r != r {
			// Not where it sorts: cannot happen; look for it.
			i = slices.IndexFunc(o.entries, func(x orderEntry) bool { return x.r == r })
		}
		return i
	}
	var drop []int
	var add []orderEntry
	for _, c := range changes {
		var oldEn, newEn orderEntry
		if c.old != nil {
			oldEn = o.entry(c.old)
		}
		if c.new != nil {
			newEn = o.entry(c.new)
		}
		if c.old != nil && c.new != nil && o.compare(oldEn, newEn) == 0 {
			if i := find(c.old, oldEn); i >= 0 {
				o.entries[i] = newEn
				continue
			}
		}
		if c.old != nil {
			if i := find(c.old, oldEn); i >= 0 {
				drop = append(drop, i)
			}
		}
		if c.new != nil {
			add = append(add, newEn)
		}
	}
	if len(drop) == 0 && len(add) == 0 {
		return
	}
	slices.Sort(drop)
	kept := o.entries[:0]
	prev := 0
	for _, i := range drop {
		kept = append(kept, o.entries[prev:i]...)
		prev = i + 1
	}
	kept = append(kept, o.entries[prev:]...)
	slices.SortFunc(add, o.compare)
	n := len(kept) + len(add)
	if n > cap(o.entries) {
		out := make([]orderEntry, 0, n+n/8)
		i, j := 0, 0
		for i < len(kept) && j < len(add) {
			if o.compare(kept[i], add[j]) <= 0 {
				out = append(out, kept[i])
				i++
			} else {
				out = append(out, add[j])
				j++
			}
		}
		out = append(append(out, kept[i:]...), add[j:]...)
		o.entries = out
		return
	}
	// Merge from the back, in place: each added entry's place is found by
	// binary search, and the kept entries after it move in one copy.
	out := o.entries[:n]
	hi := len(kept)
	for j := len(add) - 1; j >= 0; j-- {
		lo := sort.Search(hi, func(i int) bool { return o.compare(kept[i], add[j]) > 0 })
		copy(out[lo+j+1:hi+j+1], kept[lo:hi])
		out[lo+j] = add[j]
		hi = lo
	}
	if n < n0 {
		clear(o.entries[n:n0])
	}
	o.entries = out
}

func (o *sortedRuns) size() int64 {
	return int64(cap(o.entries))*int64(unsafe.Sizeof(orderEntry{})) + 256
}

// maxOrders is the number of orders an experiment's index keeps sorted:
// those of searches and those of the clauses searches start from.
const maxOrders = 12

// order returns the runs sorted by terms: kept, or sorted now and kept.
// The caller holds expIndex.mu for reading, or owns ri.
func (ri *runIndex) order(terms []sortTerm) *sortedRuns {
	return ri.orderLed(terms, 0)
}

// kept returns the order of terms if it is kept, else nil.
func (ri *runIndex) kept(terms []sortTerm) *sortedRuns {
	sig := orderSig(terms)
	ri.ordersMu.Lock()
	defer ri.ordersMu.Unlock()
	for _, o := range ri.orders {
		if o.sig == sig {
			return o
		}
	}
	return nil
}

// orderLed is order, sorting terms whose first lead terms are a param's
// or tag's (missing, value) with newLedOrder.
func (ri *runIndex) orderLed(terms []sortTerm, lead int) *sortedRuns {
	sig := orderSig(terms)
	find := func() *sortedRuns {
		for i, o := range ri.orders {
			if o.sig == sig {
				copy(ri.orders[1:i+1], ri.orders[:i])
				ri.orders[0] = o
				return o
			}
		}
		return nil
	}
	ri.ordersMu.Lock()
	o := find()
	ri.ordersMu.Unlock()
	if o != nil {
		return o
	}
	if lead > 0 {
		o = ri.newLedOrder(terms, lead)
	} else {
		o = newSortedRuns(terms, ri.runs)
	}
	ri.ordersMu.Lock()
	defer ri.ordersMu.Unlock()
	if x := find(); x != nil {
		return x // sorted meanwhile by another search
	}
	ri.orders = append([]*sortedRuns{o}, ri.orders...)
	if len(ri.orders) > maxOrders {
		ri.orders[maxOrders] = nil
		ri.orders = ri.orders[:maxOrders]
	}
	return o
}

// A search finds its page one of two ways, as the SQL planner
// (plan.go) does: walk the runs in the search's order from the
// cursor, testing each, until the page is full (cheap when many runs pass),
// or start from the runs one clause selects (an equality on a param or a
// tag, a comparison of a metric's latest value), test those and sort what
// passes (cheap when few do). The runs a clause selects are a range of the
// runs sorted by its key, found by binary search, so their number is
// known exactly; the walk is estimated to read page/share runs, share
// being the product of the clauses' shares of the runs.

// drives reports whether a clause can drive a search of the index: one
// whose operator selects a range of a metric's latest values or of an
// integer attribute (driveOf), one value of a param, a tag or a string
// attribute, or several of a string attribute.
func drives(c search.Comparison) bool {
	k := driveOf(c)
	if c.Value.Kind == search.Number && math.IsNaN(c.Value.Num) {
		return false // no range of sorted values: selects none
	}
	switch c.Entity {
	case search.Param, search.Tag:
		// The led plan walks the one range of an equality.
		return k == driveValue
	case search.Metric:
		return k == driveRange
	case search.Attribute:
		// attributes.run_id = / IN, run_name =, status = 'RUNNING',
		// start_time > a day ago: lookups a user expects to be instant,
		// which walked every run of the experiment.
		_, kind, ok := runAttrColumn(c.Key)
		switch {
		case !ok:
			return false
		case kind == termInt:
			return k == driveRange
		}
		return k == driveValue || k == driveValues
	}
	return false
}

// driverOrder returns the runs sorted by c's key, ascending.
//
// A param's or a tag's has few values for many runs: sorting it compared
// the runs of one value by start time and run ID, reading both runs each
// time (300 ms at 100,000 runs with four values, the first search after a
// restart). It is the led order of the key over the runs in start-time
// order, which sorts by an integer nearly always.
func (ri *runIndex) driverOrder(c search.Comparison) *sortedRuns {
	_, _, terms, _ := runOrder([]search.OrderKey{{Entity: c.Entity, Key: c.Key}})
	switch c.Entity {
	case search.Metric:
		return ri.order(terms)
	case search.Attribute:
		switch c.Key {
		case search.AttrRunID:
			// runOrder puts run_id after start time; unique, it is the
			// whole order.
			return ri.order(terms[len(terms)-1:])
		case search.AttrStartTime, search.AttrEndTime:
			return ri.order(terms)
		}
		// A string with few values (status, user_id) or many: led, as a
		// param's, over the start-time order.
		return ri.orderLed(terms, 1)
	}
	return ri.orderLed(terms, 2)
}

// span is a range of an order's entries, [lo, hi).
type span struct{ lo, hi int }

// count returns the number of entries of spans.
func count(spans []span) int {
	n := 0
	for _, s := range spans {
		n += s.hi - s.lo
	}
	return n
}

// selects returns the ranges of o's entries that clause c, which drives
// (drives), selects: those with a value (rank 0: present, not NaN) that
// passes the comparison; one range but for a list of values (IN), a range
// per value.
func (o *sortedRuns) selects(c search.Comparison) []span {
	es := o.entries
	end := sort.Search(len(es), func(i int) bool { return es[i].rank > 0 })
	if c.Value.Kind == search.Number {
		x := c.Value.Num
		// The entries are sorted ascending: those at or above x, and
		// those above, are suffixes.
		ge := func(i int) bool { return es[i].v.f >= x }
		gt := func(i int) bool { return es[i].v.f > x }
		if o.terms[o.g0-1].kind == termInt {
			// An attribute's integer, compared as SQLite compares it.
			ge = func(i int) bool { return intFloatCompare(es[i].v.i, x) >= 0 }
			gt = func(i int) bool { return intFloatCompare(es[i].v.i, x) > 0 }
		}
		lower, upper := sort.Search(end, ge), sort.Search(end, gt)
		// The regions below, at and above x, and the ones the operator
		// selects.
		bounds := [4]int{0, lower, upper, end}
		first, last, _ := numRegions(opDescs[c.Op].holds)
		return []span{{bounds[first+1], bounds[last+2]}}
	}
	of := func(x string) span {
		return span{sort.Search(end, func(i int) bool { return es[i].v.s >= x }), sort.Search(end, func(i int) bool { return es[i].v.s > x })}
	}
	if driveOf(c) == driveValue {
		return []span{of(c.Value.Str)}
	}
	// Each value once: a value listed twice must not select its runs twice.
	vals := slices.Clone(c.Value.List)
	slices.Sort(vals)
	var out []span
	for _, x := range slices.Compact(vals) {
		if s := of(x); s.hi > s.lo {
			out = append(out, s)
		}
	}
	return out
}

// walkBlock is the number of runs a walk reads ahead (matcher's touch).
const walkBlock = 64

// entryCost is the cost of a run that passes a driven search, in tests
// of a run against a column: its sort values are read from the run (its
// struct and its metrics, params or tags, cache misses each in a large
// index) and it takes its share of the sort. With each run counted as one
// test, a metric + param search of 20,000 runs started from a param that
// 5,000 runs have and sorted the 2,500 that passed: 1.5 ms a search, 0.9
// ms walking 8,000 runs in order instead (reads benchmark).
const entryCost = 8

// plan is the way a search finds its page.
type plan int

const (
	planWalk  plan = iota // walk the runs in the search's order
	planDrive             // sort the runs a clause selects that pass
	planLed               // walk the runs an equality selects, in a led order
)

// walkCost is the number of runs a walk of n runs tests to fill a page
// of max+1 when a share of them passes.
func walkCost(n, max int, share float64) float64 {
	return min(float64(n), float64(max+1)/math.Max(share, 1e-12))
}

// choosePlan chooses between walking the n runs in order, starting from
// the driven runs a clause selects (the fewest; -1: no clause drives), and
// walking the led runs an equality on a param or a tag selects in its led
// order (index_led.go; -1: none), share being the estimated share of
// the runs that pass every clause. The walk tests about (max+1)/share
// runs; the driven search tests the driven runs and sorts those that pass
// (about share*n); the led walk tests the led runs' share of the walk's,
// and needs its order: kept, it is taken whenever it tests fewest runs; not
// kept, sorting it is worth it in place of a walk that tests at least
// twice as many runs (sorting the walk's order costs as much), not in
// place of a driven search, which sorts only what passes.
func choosePlan(n, max int, share float64, driven, led int, ledKept bool) plan {
	walk := walkCost(n, max, share)
	drive, ledc := math.Inf(1), math.Inf(1)
	if driven >= 0 {
		drive = float64(driven) + entryCost*share*float64(n)
	}
	if led == 0 {
		ledc = 0
	} else if led > 0 {
		ledc = walkCost(led, max, min(1, share*float64(n)/float64(led)))
	}
	switch {
	case ledKept && ledc < min(walk, drive):
		return planLed
	case drive < walk:
		return planDrive
	case 2*ledc < walk:
		return planLed
	}
	return planWalk
}

// planInputs is what each plan of a search would walk: the runs the
// fewest selecting clause drives (drive[lo:hi]; drive nil: none), and the
// led order of an equality on a param or a tag (led nil: none).
type planInputs struct {
	drive          *sortedRuns
	spans          []span
	led            []sortTerm // the led order's terms
	ledBy, ledLead int        // mq.comps' index of the equality; led's lead
}

// plan chooses the plan of mq and returns what the plans would walk;
// expIndex.mu is held for reading, as for page.
func (ri *runIndex) plan(mq *memQuery) (plan, planInputs) {
	n := len(ri.runs)
	in := planInputs{ledBy: -1}
	share := 1.0
	ledN := -1
	for _, i := range mq.drivers {
		c := mq.comps[i]
		o := ri.driverOrder(c)
		sp := o.selects(c)
		k := count(sp)
		share *= float64(k) / float64(max(n, 1))
		if in.drive == nil || k < count(in.spans) {
			in.drive, in.spans = o, sp
		}
		if (c.Entity == search.Param || c.Entity == search.Tag) && (ledN < 0 || k < ledN) {
			if ts, lead := ledTerms(c, mq.terms); ts != nil {
				in.led, in.ledBy, ledN, in.ledLead = ts, i, k, lead
			}
		}
	}
	driven := -1
	if in.drive != nil {
		driven = count(in.spans)
	}
	return choosePlan(n, mq.max, share, driven, ledN, in.led != nil && ri.kept(in.led) != nil), in
}

// page returns up to mq.max+1 runs of the page after mq's cursor found
// with plan p, which in makes possible.
func (ri *runIndex) page(mq *memQuery, p plan, in planInputs) []*idxRun {
	skip := -1
	if p == planLed {
		// The runs of a led range all pass the equality that selects them.
		skip = in.ledBy
	}
	match, touch := ri.matcher(mq, skip)
	switch p {
	case planDrive:
		// Sorted with the values of the first order key computed once.
		o := newOrder(mq.terms)
		for _, sp := range in.spans {
			for _, en := range in.drive.entries[sp.lo:sp.hi] {
				if match(en.ord, en.r) && (mq.cursor == nil || compareCursor(mq.terms, en.r, mq.cursor) > 0) {
					o.entries = append(o.entries, o.entry(en.r))
				}
			}
		}
		slices.SortFunc(o.entries, o.compare)
		out := make([]*idxRun, min(len(o.entries), mq.max+1))
		for i := range out {
			out[i] = o.entries[i].r
		}
		return out
	case planLed:
		o := ri.orderLed(in.led, in.ledLead)
		sp := o.selects(mq.comps[in.ledBy])[0] // an equality: one range
		return walkPage(o.entries[sp.lo:sp.hi], mq, match, touch)
	}
	return walkPage(ri.order(mq.terms).entries, mq, match, touch)
}

// checkOtherPlans finds mq's page with each plan other than p that in
// makes possible and counts those whose page differs from found.
func (ix *searchIndex) checkOtherPlans(ri *runIndex, mq *memQuery, p plan, in planInputs, found []*idxRun) {
	for q := range plan(len(ix.checked)) {
		if q == p || !in.possible(q) {
			continue
		}
		ix.checked[q].Add(1)
		if !slices.Equal(ri.page(mq, q, in), found) {
			ix.planMismatches.Add(1)
		}
	}
}

// possible reports whether in makes plan p possible.
func (in planInputs) possible(p plan) bool {
	switch p {
	case planDrive:
		return in.drive != nil
	case planLed:
		return in.led != nil
	}
	return true
}

// walkPage returns up to mq.max+1 runs of es, which are in mq's order,
// that are after mq's cursor and pass match.
func walkPage(es []orderEntry, mq *memQuery, match func(int32, *idxRun) bool, touch func([]orderEntry)) []*idxRun {
	if mq.cursor != nil {
		pos := sort.Search(len(es), func(i int) bool {
			return compareCursor(mq.terms, es[i].r, mq.cursor) > 0
		})
		es = es[pos:]
	}
	out := make([]*idxRun, 0, min(mq.max+1, 1024))
	for len(es) > 0 && len(out) <= mq.max {
		blk := es[:min(walkBlock, len(es))]
		es = es[len(blk):]
		touch(blk)
		for _, en := range blk {
			if !match(en.ord, en.r) {
				continue
			}
			out = append(out, en.r)
			if len(out) > mq.max {
				break
			}
		}
	}
	return out
}

// search answers q from the index; false: use SQL. When keys is not nil,
// it gets each run's sort-term values, in page order.
func (ix *searchIndex) search(ctx context.Context, q tracking.RunQuery, keys *[][]termVal) (tracking.RunPage, bool, error) {
	mq, ok, err := compileMemQuery(q)
	if err != nil {
		return tracking.RunPage{}, false, err
	}
	if !ok {
		ix.sql.Add(1)
		return tracking.RunPage{}, false, nil
	}
	var e *expIndex
	for try := 0; e == nil; try++ {
		if e = ix.acquire(mq.exp); e == nil {
			ix.sql.Add(1)
			return tracking.RunPage{}, false, nil
		}
		ok, err := ix.refresh(ctx, e, 0)
		if err != nil {
			return tracking.RunPage{}, false, err
		}
		if !ok {
			ix.mu.Lock()
			if e.elem != nil {
				ix.startLoadLocked(e)
			}
			ix.mu.Unlock()
			e = nil
			ix.mu.Lock()
			wait := ix.wait
			ix.mu.Unlock()
			if !wait || try == 3 {
				ix.sql.Add(1)
				return tracking.RunPage{}, false, nil
			}
		}
	}
	e.mu.RLock()
	p, in := e.cur.plan(mq)
	found := e.cur.page(mq, p, in)
	ix.plans[p].Add(1)
	if ix.checkPlans {
		ix.checkOtherPlans(e.cur, mq, p, in, found)
	}
	// Orders sorted for this search count too.
	e.bytes.Store(e.cur.size())
	e.mu.RUnlock()
	ix.account(e)
	ix.memory.Add(1)

	var page tracking.RunPage
	if len(found) > mq.max {
		last := found[mq.max-1]
		vals := make([]any, len(mq.terms))
		for i, t := range mq.terms {
			vals[i] = anyOf(t.kind, last.term(t.src))
		}
		page.NextPageToken = encodeRunToken(mq.fingerprint, mq.terms, vals)
		found = found[:mq.max]
	}
	if keys != nil {
		// One allocation for the page's values: every allocation brings
		// the next collection of the index's large heap closer.
		n := len(mq.terms)
		flat := make([]termVal, len(found)*n)
		*keys = slices.Grow(*keys, len(found))
		for j, r := range found {
			kv := flat[j*n : (j+1)*n : (j+1)*n]
			for i, t := range mq.terms {
				kv[i] = r.term(t.src)
			}
			*keys = append(*keys, kv)
		}
	}
	// The page points at the index's runs, which never change: copying
	// 1,000 runs was 300 KB a search, and every such allocation brings the
	// next collection of a heap of hundreds of megabytes closer. Only runs
	// with inputs or outputs are copied, to get them.
	page.Runs = make([]*tracking.Run, len(found))
	var ioArgs []any
	byPK := map[int64]*tracking.Run{}
	for i, r := range found {
		page.Runs[i] = &r.run
		if r.io {
			c := r.run
			c.Memo = nil // the JSON kept lacks the inputs and outputs
			page.Runs[i] = &c
			ioArgs = append(ioArgs, r.pk)
			byPK[r.pk] = &c
		}
	}
	if len(ioArgs) > 0 {
		if err := ix.s.loadRunIO(ctx, sqlrow.Placeholders(len(ioArgs)), ioArgs, byPK); err != nil {
			return tracking.RunPage{}, false, err
		}
	}
	return page, true, nil
}
