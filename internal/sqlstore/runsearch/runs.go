package runsearch

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// A runs search of one experiment is answered from the search index
// (index.go, SQLite only) when it can be, else with SQL; a search
// of several experiments (up to 16) merges one such search of each
// (merge.go). With SQL, a search is one query per phase (metricPhases: up to three when the first order key is a
// metric), started from the runs of an indexed clause when the planner
// (plan.go) finds that cheaper. Each filter clause is a correlated
// scalar subquery on its side table (SideCompare; EXISTS only for
// datasets), rendered from its operator's description (ops.go),
// as the index's tests are. Each order key becomes one to three non-NULL
// sort terms (so that "missing sorts last, NaN after values" holds in both
// directions), and pagination is keyset pagination on the full list of
// sort terms ending with the unique run_id, the same on every path. Keyset
// tokens stay correct while runs are added, unlike offsets, and cost the
// same at any depth.

type termKind int

const (
	termInt termKind = iota
	termFloat
	termString
)

// sortTerm is one ORDER BY expression.
type sortTerm struct {
	expr string
	desc bool
	kind termKind
	// src is what the expression reads, for the search index, which
	// computes the same values in memory (searchIndex).
	src termSource
}

// termSource says what a sort term reads of a run: the value of a
// metric's latest point, a param, a tag or an attribute, or one of the
// flags that order runs without a value (or with a NaN) after the others.
type termSource struct {
	entity search.Entity
	key    string
	part   termPart
}

// termPart is the part of an order key a sort term holds.
type termPart uint8

const (
	// partValue is the value; 0 or "" when missing (and for NaN).
	partValue termPart = iota
	// partMissing is 1 when the run lacks the value, else 0.
	partMissing
	// partNaN is 1 when the metric's latest value is NaN, else 0.
	partNaN
)

const statusExpr = `(CASE r.status WHEN 1 THEN 'RUNNING' WHEN 2 THEN 'SCHEDULED' WHEN 3 THEN 'FINISHED' WHEN 4 THEN 'FAILED' WHEN 5 THEN 'KILLED' ELSE 'UNKNOWN' END)`

// runAttrColumn maps a canonical run attribute to its SQL expression.
func runAttrColumn(key string) (string, termKind, bool) {
	switch key {
	case search.AttrRunID:
		return "r.run_id", termString, true
	case search.AttrRunName:
		return "r.name", termString, true
	case search.AttrUserID:
		return "r.user_id", termString, true
	case search.AttrStatus:
		return statusExpr, termString, true
	case search.AttrArtifactURI:
		return "r.artifact_uri", termString, true
	case search.AttrLifecycleStage:
		return "r.lifecycle_stage", termString, true
	case search.AttrStartTime:
		return "r.start_time", termInt, true
	case search.AttrEndTime:
		return "r.end_time", termInt, true
	}
	return "", 0, false
}

// runKey stands for the run_pk of the run a filter clause tests, in the
// clause's SQL. build replaces it with the phase's column: the candidate
// the phase starts from, so that the database tests a candidate before it
// joins the candidate's run row.
const runKey = "{run_pk}"

func runClause(c search.Comparison) (string, []any, error) {
	if err := search.CheckRunClause(c); err != nil {
		return "", nil, err
	}
	switch c.Entity {
	case search.Metric:
		// The latest value; NULL when the run lacks the metric or its
		// latest value is NaN, so every comparison is then false.
		w, a, err := NumberCompare("(SELECT m.value FROM metric_series m WHERE m.run_pk = "+runKey+" AND m.key = ?)", c)
		if err != nil {
			return "", nil, err
		}
		return w, append([]any{c.Key}, a...), nil
	case search.Param:
		return SideCompare("SELECT p.value FROM params p WHERE p.run_pk = "+runKey+" AND p.key = ?", c)
	case search.Tag:
		return SideCompare("SELECT t.value FROM tags t WHERE t.run_pk = "+runKey+" AND t.key = ?", c)
	case search.Attribute:
		col, kind, ok := runAttrColumn(c.Key)
		if !ok {
			break
		}
		if kind == termInt {
			return intCompare(col, c)
		}
		return StringCompare(col, c)
	case search.Dataset:
		switch c.Key {
		case search.DatasetName, search.DatasetDigest:
			w, a, err := StringCompare("d."+c.Key, c)
			if err != nil {
				return "", nil, err
			}
			return "EXISTS (SELECT 1 FROM run_inputs i JOIN datasets d ON d.dataset_pk = i.dataset_pk WHERE i.run_pk = " + runKey + " AND " + w + ")", a, nil
		case search.DatasetContext:
			w, a, err := StringCompare("it.value", c)
			if err != nil {
				return "", nil, err
			}
			return "EXISTS (SELECT 1 FROM input_tags it WHERE it.run_pk = " + runKey + " AND it.key = '" + tracking.TagDataContext + "' AND " + w + ")", a, nil
		}
	}
	return "", nil, fmt.Errorf("search runs: no SQL for %s", c)
}

// runOrder turns order keys into joins and sort terms.
func runOrder(keys []search.OrderKey) (joins []string, joinArgs []any, terms []sortTerm, err error) {
	hasStart, hasID := false, false
	for i, k := range keys {
		if err := search.CheckRunOrderKey(k); err != nil {
			return nil, nil, nil, err
		}
		alias := fmt.Sprintf("o%d", i)
		switch k.Entity {
		case search.Metric:
			joins = append(joins, "LEFT JOIN metric_series "+alias+" ON "+alias+".run_pk = r.run_pk AND "+alias+".key = ?")
			joinArgs = append(joinArgs, k.Key)
			terms = append(terms,
				sortTerm{expr: "(CASE WHEN " + alias + ".series_id IS NULL THEN 1 ELSE 0 END)", kind: termInt, src: termSource{k.Entity, k.Key, partMissing}},
				sortTerm{expr: "COALESCE(" + alias + ".is_nan, 0)", kind: termInt, src: termSource{k.Entity, k.Key, partNaN}},
				sortTerm{expr: "COALESCE(" + alias + ".value, 0.0)", desc: k.Desc, kind: termFloat, src: termSource{k.Entity, k.Key, partValue}})
		case search.Param, search.Tag:
			table := "params"
			if k.Entity == search.Tag {
				table = "tags"
			}
			joins = append(joins, "LEFT JOIN "+table+" "+alias+" ON "+alias+".run_pk = r.run_pk AND "+alias+".key = ?")
			joinArgs = append(joinArgs, k.Key)
			terms = append(terms,
				sortTerm{expr: "(CASE WHEN " + alias + ".value IS NULL THEN 1 ELSE 0 END)", kind: termInt, src: termSource{k.Entity, k.Key, partMissing}},
				sortTerm{expr: "COALESCE(" + alias + ".value, '')", desc: k.Desc, kind: termString, src: termSource{k.Entity, k.Key, partValue}})
		case search.Attribute:
			col, kind, ok := runAttrColumn(k.Key)
			if !ok {
				return nil, nil, nil, fmt.Errorf("search runs: no SQL to order by %s", k)
			}
			switch k.Key {
			case search.AttrStartTime:
				hasStart = true
			case search.AttrRunID:
				hasID = true
			case search.AttrEndTime:
				terms = append(terms, sortTerm{expr: "(CASE WHEN r.end_time IS NULL THEN 1 ELSE 0 END)", kind: termInt, src: termSource{k.Entity, k.Key, partMissing}})
				col = "COALESCE(r.end_time, 0)"
			}
			terms = append(terms, sortTerm{expr: col, desc: k.Desc, kind: kind, src: termSource{k.Entity, k.Key, partValue}})
		default:
			return nil, nil, nil, fmt.Errorf("search runs: no SQL to order by %s", k)
		}
	}
	if !hasStart {
		terms = append(terms, sortTerm{expr: "r.start_time", desc: true, kind: termInt, src: termSource{search.Attribute, search.AttrStartTime, partValue}})
	}
	if !hasID {
		terms = append(terms, sortTerm{expr: "r.run_id", kind: termString, src: termSource{search.Attribute, search.AttrRunID, partValue}})
	} else {
		// run_id is unique: nothing after it matters, but keysets need it
		// last, so move it there.
		for i, t := range terms {
			if t.expr == "r.run_id" {
				terms = append(append(terms[:i:i], terms[i+1:]...), t)
				break
			}
		}
	}
	return joins, joinArgs, terms, nil
}

// runQueryFingerprint is what a runs search's page tokens carry of the
// query they belong to, on every path (SQL, the search index, a merge).
func runQueryFingerprint(q tracking.RunQuery) string {
	return QueryFingerprint(fmt.Sprint(q.ExperimentIDs, q.ViewType, q.Filter, q.OrderBy))
}

// runToken is the page token of runs/search: the sort-term values of the
// last run of the page, and a fingerprint of the query.
type runToken struct {
	Values []string `json:"v"`
	Query  string   `json:"q"`
}

func encodeTermValue(kind termKind, v any) string {
	switch kind {
	case termInt:
		return strconv.FormatInt(v.(int64), 10)
	case termFloat:
		return strconv.FormatUint(math.Float64bits(v.(float64)), 16)
	default:
		return v.(string)
	}
}

func decodeTermValue(kind termKind, s string) (any, error) {
	switch kind {
	case termInt:
		return strconv.ParseInt(s, 10, 64)
	case termFloat:
		b, err := strconv.ParseUint(s, 16, 64)
		return math.Float64frombits(b), err
	default:
		return s, nil
	}
}

// keysetWhere renders "the row sorts after vals" for the terms.
func keysetWhere(terms []sortTerm, vals []any) (string, []any) {
	var ors []string
	var args []any
	for i := range terms {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, terms[j].expr+" = ?")
			args = append(args, vals[j])
		}
		op := " > ?"
		if terms[i].desc {
			op = " < ?"
		}
		ands = append(ands, terms[i].expr+op)
		args = append(args, vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// runSearch is a planned runs search: its phases and what reading their
// rows needs.
type runSearch struct {
	rq          runQuery
	phases      []runPhase
	plan        searchPlan
	terms       []sortTerm
	cursor      []any
	fingerprint string
}

// prepareRunSearch parses the page token, renders the filter and the order
// and plans the search. A search of no experiment returns nil.
func (s *Searcher) prepareRunSearch(ctx context.Context, q tracking.RunQuery) (*runSearch, error) {
	var where []string
	var args []any
	exps := make([]any, 0, len(q.ExperimentIDs))
	for _, id := range q.ExperimentIDs {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			continue // no such experiment: matches nothing
		}
		exps = append(exps, n)
	}
	if len(exps) == 0 {
		return nil, nil
	}
	where = append(where, "r.experiment_id IN ("+sqlrow.Placeholders(len(exps))+")")
	args = append(args, exps...)
	switch q.ViewType {
	case tracking.ActiveOnly:
		where = append(where, "r.lifecycle_stage = 'active'")
	case tracking.DeletedOnly:
		where = append(where, "r.lifecycle_stage = 'deleted'")
	}
	clauseWhere := make([]string, len(q.Filter.Clauses))
	clauseArgs := make([][]any, len(q.Filter.Clauses))
	for i, c := range q.Filter.Clauses {
		w, a, err := runClause(c)
		if err != nil {
			return nil, err
		}
		clauseWhere[i], clauseArgs[i] = w, a
	}
	joins, joinArgs, terms, err := runOrder(q.OrderBy)
	if err != nil {
		return nil, err
	}
	plan, err := s.planSearch(ctx, exps, q.Filter.Clauses, q.MaxResults+1)
	if err != nil {
		return nil, err
	}
	// The clauses most likely to reject a run are tested first; the clause
	// the search starts from selects only runs that pass it.
	for _, i := range plan.clauseOrder(len(clauseWhere)) {
		if plan.drive == nil || plan.drive.clause != i {
			where = append(where, clauseWhere[i])
			args = append(args, clauseArgs[i]...)
		}
	}
	fingerprint := runQueryFingerprint(q)
	var cursor []any
	if q.PageToken != "" {
		if cursor, err = decodeRunToken(q.PageToken, fingerprint, terms); err != nil {
			return nil, err
		}
	}

	rq := runQuery{joins: joins, joinArgs: joinArgs, where: where, args: args, terms: terms, cursor: cursor, limit: q.MaxResults + 1}
	var phases []runPhase
	switch {
	case plan.drive != nil:
		phases = []runPhase{s.drivenPhase(plan.drive, joins, joinArgs, terms)}
	case len(q.OrderBy) > 0 && q.OrderBy[0].Entity == search.Metric:
		phases = metricPhases(q.OrderBy[0], s.joinInOrder(), exps)
	default:
		phases = []runPhase{{from: "runs r " + strings.Join(joins, " "), fromArgs: joinArgs, order: terms}}
	}
	return &runSearch{rq: rq, phases: phases, plan: plan, terms: terms, cursor: cursor, fingerprint: fingerprint}, nil
}

// Search answers q as tracking.RunStore.SearchRuns does. On SQLite a search of one
// experiment is answered from the search index (index.go) when it
// can be; any other by SQL. The runs of a page answered from the index
// share their Data slices with it: callers must not change them.
func (s *Searcher) Search(ctx context.Context, q tracking.RunQuery) (tracking.RunPage, error) {
	if exps := distinct(q.ExperimentIDs); len(exps) > 1 && len(exps) <= mergeMaxExperiments && q.MaxResults > 0 {
		return s.searchMerged(ctx, q, exps)
	}
	return s.searchOne(ctx, q, nil)
}

// searchOne answers q from the search index when it can, else with SQL.
// When keys is not nil, it gets each run's sort-term values, in page order.
func (s *Searcher) searchOne(ctx context.Context, q tracking.RunQuery, keys *[][]termVal) (tracking.RunPage, error) {
	if s.index != nil {
		page, ok, err := s.index.search(ctx, q, keys)
		if ok || err != nil {
			return page, err
		}
	}
	return s.searchSQL(ctx, q, keys)
}

// searchSQL answers a runs search with SQL. When keys is not nil, it gets
// each run's sort-term values, in page order.
func (s *Searcher) searchSQL(ctx context.Context, q tracking.RunQuery, keys *[][]termVal) (tracking.RunPage, error) {
	rs, err := s.prepareRunSearch(ctx, q)
	if err != nil || rs == nil {
		return tracking.RunPage{}, err
	}
	rq, phases, terms, cursor, fingerprint := rs.rq, rs.phases, rs.terms, rs.cursor, rs.fingerprint
	var page tracking.RunPage
	var pks, ioPKs []int64
	var last []any
	emit := func(rows *sql.Rows) (full bool, err error) {
		for rows.Next() {
			dest, pk, io, r := runScanDest(terms)
			if err := rows.Scan(dest...); err != nil {
				return false, s.sqlError(err, "scan run")
			}
			if len(page.Runs) == q.MaxResults {
				// One more row exists: the page is full and has a successor.
				page.NextPageToken = encodeRunToken(fingerprint, terms, last)
				return true, nil
			}
			run, _ := r()
			page.Runs = append(page.Runs, run)
			pks = append(pks, *pk)
			if *io != 0 {
				ioPKs = append(ioPKs, *pk)
			}
			last = termValues(dest[len(dest)-len(terms):], terms)
			if keys != nil {
				kv := make([]termVal, len(terms))
				for i, t := range terms {
					kv[i] = valOf(t.kind, last[i])
				}
				*keys = append(*keys, kv)
			}
		}
		return false, s.sqlError(rows.Err(), "search runs")
	}
	for _, ph := range phases {
		if cursor != nil && ph.skip != nil && ph.skip(cursor) {
			continue
		}
		sqlText, all := rq.build(ph, cursor != nil && ph.cursorIn(cursor))
		rows, err := s.rdb.QueryContext(ctx, sqlText, all...)
		if err != nil {
			return tracking.RunPage{}, s.sqlError(err, "search runs")
		}
		full, err := emit(rows)
		rows.Close()
		if err != nil {
			return tracking.RunPage{}, err
		}
		if full {
			break
		}
		rq.limit = q.MaxResults + 1 - len(page.Runs)
	}
	if err := s.loadRunData(ctx, pks, page.Runs, ioPKs); err != nil {
		return tracking.RunPage{}, err
	}
	return page, nil
}

// runQuery holds the parts of a runs search shared by its phases.
type runQuery struct {
	joins    []string
	joinArgs []any
	where    []string
	args     []any
	terms    []sortTerm
	cursor   []any
	limit    int
}

// runPhase is one query of a search. A search ordered by a metric runs up
// to three, one per part of the order: runs with a value, runs whose value
// is NaN, runs without the metric. The first is driven by the index on
// (key, value), so a page of the best runs out of 100,000 costs a few
// hundred lookups instead of a scan of every run.
type runPhase struct {
	// with, when set, is a WITH clause before the SELECT (with its
	// arguments): a driven search's candidates.
	with     string
	withArgs []any
	// runKey is the column the filter clauses take the run_pk from;
	// "" means r.run_pk.
	runKey   string
	from     string
	fromArgs []any
	where    []string
	args     []any
	// order lists the terms to ORDER BY; terms that are constant within
	// the phase are left out so that an index can provide the order.
	order []sortTerm
	// ownsO0 says the phase's FROM joins the first order key's table as
	// o0 itself (metric phases), so the shared join for it is left out;
	// orderFrom is then the first term to order by, and valueExpr, when
	// set, replaces that term's expression in ORDER BY (the bare column,
	// which the index provides in order).
	ownsO0    bool
	orderFrom int
	valueExpr string
	// skip reports whether the cursor lies beyond this phase; cursorIn
	// whether it lies inside it (nil: the only phase).
	skip     func(cursor []any) bool
	inPhase  func(cursor []any) bool
	seekExpr string // optional range predicate on the leading order term
}

func (p runPhase) cursorIn(cursor []any) bool {
	return p.inPhase == nil || p.inPhase(cursor)
}

// metricPhases returns the three phases of a search whose first order key
// is the metric k (aliased o0, whose terms are terms[0:3]). drive is the
// join that makes o0 drive: SQLite's CROSS JOIN keeps the written order;
// PostgreSQL has no such hint and picks the order itself.
func metricPhases(k search.OrderKey, drive string, exps []any) []runPhase {
	flag := func(c []any, i int) int64 { return c[i].(int64) }
	phase := func(c []any) int {
		switch {
		case flag(c, 0) == 1:
			return 2
		case flag(c, 1) == 1:
			return 1
		}
		return 0
	}
	seek := "o0.value >= ?"
	if k.Desc {
		seek = "o0.value <= ?"
	}
	// The other order keys' joins come after "runs r" in the FROM clause
	// (see build); o0 is joined here, first, so that it drives, through
	// the index on (experiment_id, key, value).
	inExps := "o0.experiment_id IN (" + sqlrow.Placeholders(len(exps)) + ")"
	keyArgs := append(append([]any{}, exps...), k.Key)
	return []runPhase{
		{
			from:      "metric_series o0 " + drive + " runs r ON r.run_pk = o0.run_pk",
			runKey:    "o0.run_pk",
			where:     []string{inExps, "o0.key = ?", "o0.value IS NOT NULL"},
			args:      keyArgs,
			ownsO0:    true,
			orderFrom: 2,
			valueExpr: "o0.value",
			skip:      func(c []any) bool { return phase(c) > 0 },
			inPhase:   func(c []any) bool { return phase(c) == 0 },
			seekExpr:  seek,
		},
		{
			from:      "metric_series o0 " + drive + " runs r ON r.run_pk = o0.run_pk",
			runKey:    "o0.run_pk",
			where:     []string{inExps, "o0.key = ?", "o0.is_nan = 1"},
			args:      keyArgs,
			ownsO0:    true,
			orderFrom: 3,
			skip:      func(c []any) bool { return phase(c) > 1 },
			inPhase:   func(c []any) bool { return phase(c) == 1 },
		},
		{
			from:      "runs r LEFT JOIN metric_series o0 ON o0.run_pk = r.run_pk AND o0.key = ?",
			fromArgs:  []any{k.Key},
			where:     []string{"o0.series_id IS NULL"},
			ownsO0:    true,
			orderFrom: 3,
			inPhase:   func(c []any) bool { return phase(c) == 2 },
		},
	}
}

// build renders a phase as SQL. withCursor adds the keyset condition (the
// cursor lies in this phase); phases after the cursor's need none.
func (q *runQuery) build(ph runPhase, withCursor bool) (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString(ph.with)
	args = append(args, ph.withArgs...)
	b.WriteString("SELECT " + sqlrow.RunCols + ", r.io_count")
	for _, t := range q.terms {
		b.WriteString(", " + t.expr)
	}
	b.WriteString(" FROM " + ph.from)
	args = append(args, ph.fromArgs...)
	order := ph.order
	if ph.ownsO0 {
		for i, j := range q.joins[1:] {
			b.WriteString(" " + j)
			args = append(args, q.joinArgs[i+1])
		}
		order = append([]sortTerm{}, q.terms[ph.orderFrom:]...)
		if ph.valueExpr != "" {
			order[0].expr = ph.valueExpr
		}
	}
	where := append(append([]string{}, ph.where...), q.where...)
	args = append(args, ph.args...)
	args = append(args, q.args...)
	if withCursor && q.cursor != nil {
		w, a := keysetWhere(q.terms, q.cursor)
		where = append(where, w)
		args = append(args, a...)
		if ph.seekExpr != "" {
			where = append(where, ph.seekExpr)
			args = append(args, q.cursor[2])
		}
	}
	key := ph.runKey
	if key == "" {
		key = "r.run_pk"
	}
	b.WriteString(" WHERE " + strings.ReplaceAll(strings.Join(where, " AND "), runKey, key))
	b.WriteString(" ORDER BY ")
	for i, t := range order {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.expr)
		if t.desc {
			b.WriteString(" DESC")
		}
	}
	b.WriteString(" LIMIT ?")
	args = append(args, q.limit)
	return b.String(), args
}

// runScanDest returns scan destinations for sqlrow.RunCols plus the sort terms,
// the run_pk destination and a function that builds the run.
func runScanDest(terms []sortTerm) ([]any, *int64, *int64, func() (*tracking.Run, error)) {
	var pk, exp, io int64
	var status int32
	var end sql.NullInt64
	var stage string
	r := &tracking.Run{}
	i := &r.Info
	dest := []any{&pk, &i.RunID, &exp, &i.RunName, &i.UserID, &status, &i.StartTimeMs, &end, &i.ArtifactURI, &stage, &io}
	for _, t := range terms {
		switch t.kind {
		case termInt:
			dest = append(dest, new(int64))
		case termFloat:
			dest = append(dest, new(float64))
		default:
			dest = append(dest, new(string))
		}
	}
	return dest, &pk, &io, func() (*tracking.Run, error) {
		i.ExperimentID = strconv.FormatInt(exp, 10)
		i.Status = tracking.RunStatus(status)
		i.EndTimeMs = end.Int64
		i.LifecycleStage = tracking.LifecycleStage(stage)
		return r, nil
	}
}

func termValues(dest []any, terms []sortTerm) []any {
	vals := make([]any, len(terms))
	for i, t := range terms {
		switch t.kind {
		case termInt:
			vals[i] = *dest[i].(*int64)
		case termFloat:
			vals[i] = *dest[i].(*float64)
		default:
			vals[i] = *dest[i].(*string)
		}
	}
	return vals
}

// encodeRunToken returns the page token of a page whose last run has the
// sort-term values vals.
func encodeRunToken(fingerprint string, terms []sortTerm, vals []any) string {
	tok := runToken{Query: fingerprint}
	for i, t := range terms {
		tok.Values = append(tok.Values, encodeTermValue(t.kind, vals[i]))
	}
	raw, _ := json.Marshal(tok)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeRunToken(tok, fingerprint string, terms []sortTerm) ([]any, error) {
	bad := tracking.BadPageToken(tok, "runs/search")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, bad
	}
	var t runToken
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, bad
	}
	if t.Query != fingerprint {
		return nil, tracking.PageTokenOfOtherSearch("experiment_ids, filter, order_by or run_view_type")
	}
	if len(t.Values) != len(terms) {
		return nil, bad
	}
	vals := make([]any, len(terms))
	for i, term := range terms {
		v, err := decodeTermValue(term.kind, t.Values[i])
		if err != nil {
			return nil, bad
		}
		vals[i] = v
	}
	return vals, nil
}
