package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// A runs search is one SQL query: the filter becomes EXISTS subqueries on
// the side tables, each order key becomes one to three non-NULL sort terms
// (so that "missing sorts last, NaN after values" holds in both
// directions), and pagination is keyset pagination on the full list of
// sort terms ending with the unique run_id. Keyset tokens stay correct
// while runs are added, unlike offsets, and cost the same at any depth.

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
}

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

func runClause(c search.Comparison) (string, []any, error) {
	switch c.Entity {
	case search.Metric:
		w, a, err := numberCompare("m.value", c)
		if err != nil {
			return "", nil, err
		}
		return "EXISTS (SELECT 1 FROM metric_series m WHERE m.run_pk = r.run_pk AND m.key = ? AND " + w + ")", append([]any{c.Key}, a...), nil
	case search.Param:
		return existsCompare("SELECT 1 FROM params p WHERE p.run_pk = r.run_pk AND p.key = ?", "p.value", c)
	case search.Tag:
		return existsCompare("SELECT 1 FROM tags t WHERE t.run_pk = r.run_pk AND t.key = ?", "t.value", c)
	case search.Attribute:
		col, kind, ok := runAttrColumn(c.Key)
		if !ok {
			break
		}
		if kind == termInt {
			return numberCompare(col, c)
		}
		return stringCompare(col, c)
	case search.Dataset:
		switch c.Key {
		case search.DatasetName, search.DatasetDigest:
			w, a, err := stringCompare("d."+c.Key, c)
			if err != nil {
				return "", nil, err
			}
			return "EXISTS (SELECT 1 FROM run_inputs i JOIN datasets d ON d.dataset_pk = i.dataset_pk WHERE i.run_pk = r.run_pk AND " + w + ")", a, nil
		case search.DatasetContext:
			w, a, err := stringCompare("it.value", c)
			if err != nil {
				return "", nil, err
			}
			return "EXISTS (SELECT 1 FROM input_tags it WHERE it.run_pk = r.run_pk AND it.key = '" + tracking.TagDataContext + "' AND " + w + ")", a, nil
		}
	}
	return "", nil, errs.Errorf(errs.Invalid, "Invalid search key '%s.%s' for runs", c.Entity, c.Key)
}

// runOrder turns order keys into joins and sort terms.
func runOrder(keys []search.OrderKey) (joins []string, joinArgs []any, terms []sortTerm, err error) {
	hasStart, hasID := false, false
	for i, k := range keys {
		alias := fmt.Sprintf("o%d", i)
		switch k.Entity {
		case search.Metric:
			joins = append(joins, "LEFT JOIN metric_series "+alias+" ON "+alias+".run_pk = r.run_pk AND "+alias+".key = ?")
			joinArgs = append(joinArgs, k.Key)
			terms = append(terms,
				sortTerm{expr: "(" + alias + ".series_id IS NULL)", kind: termInt},
				sortTerm{expr: "COALESCE(" + alias + ".is_nan, 0)", kind: termInt},
				sortTerm{expr: "COALESCE(" + alias + ".value, 0.0)", desc: k.Desc, kind: termFloat})
		case search.Param, search.Tag:
			table := "params"
			if k.Entity == search.Tag {
				table = "tags"
			}
			joins = append(joins, "LEFT JOIN "+table+" "+alias+" ON "+alias+".run_pk = r.run_pk AND "+alias+".key = ?")
			joinArgs = append(joinArgs, k.Key)
			terms = append(terms,
				sortTerm{expr: "(" + alias + ".value IS NULL)", kind: termInt},
				sortTerm{expr: "COALESCE(" + alias + ".value, '')", desc: k.Desc, kind: termString})
		case search.Attribute:
			col, kind, ok := runAttrColumn(k.Key)
			if !ok {
				return nil, nil, nil, errs.Errorf(errs.Invalid, "Invalid order_by key 'attributes.%s' for runs", k.Key)
			}
			switch k.Key {
			case search.AttrStartTime:
				hasStart = true
			case search.AttrRunID:
				hasID = true
			case search.AttrEndTime:
				terms = append(terms, sortTerm{expr: "(r.end_time IS NULL)", kind: termInt})
				col = "COALESCE(r.end_time, 0)"
			}
			terms = append(terms, sortTerm{expr: col, desc: k.Desc, kind: kind})
		default:
			return nil, nil, nil, errs.Errorf(errs.Invalid, "Invalid order_by key '%s.%s' for runs", k.Entity, k.Key)
		}
	}
	if !hasStart {
		terms = append(terms, sortTerm{expr: "r.start_time", desc: true, kind: termInt})
	}
	if !hasID {
		terms = append(terms, sortTerm{expr: "r.run_id", kind: termString})
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

// SearchRuns implements tracking.RunStore.
func (s *Store) SearchRuns(ctx context.Context, q tracking.RunQuery) (tracking.RunPage, error) {
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
		return tracking.RunPage{}, nil
	}
	where = append(where, "r.experiment_id IN ("+placeholders(len(exps))+")")
	args = append(args, exps...)
	switch q.ViewType {
	case tracking.ActiveOnly:
		where = append(where, "r.lifecycle_stage = 'active'")
	case tracking.DeletedOnly:
		where = append(where, "r.lifecycle_stage = 'deleted'")
	}
	for _, c := range q.Filter.Clauses {
		w, a, err := runClause(c)
		if err != nil {
			return tracking.RunPage{}, err
		}
		where = append(where, w)
		args = append(args, a...)
	}
	joins, joinArgs, terms, err := runOrder(q.OrderBy)
	if err != nil {
		return tracking.RunPage{}, err
	}
	fingerprint := queryFingerprint(fmt.Sprint(q.ExperimentIDs, q.ViewType, q.Filter, q.OrderBy))
	if q.PageToken != "" {
		vals, err := decodeRunToken(q.PageToken, fingerprint, terms)
		if err != nil {
			return tracking.RunPage{}, err
		}
		w, a := keysetWhere(terms, vals)
		where = append(where, w)
		args = append(args, a...)
	}
	var b strings.Builder
	b.WriteString("SELECT " + runCols)
	for _, t := range terms {
		b.WriteString(", " + t.expr)
	}
	b.WriteString(" FROM runs r ")
	b.WriteString(strings.Join(joins, " "))
	b.WriteString(" WHERE " + strings.Join(where, " AND "))
	b.WriteString(" ORDER BY ")
	for i, t := range terms {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.expr)
		if t.desc {
			b.WriteString(" DESC")
		}
	}
	b.WriteString(" LIMIT ?")
	all := append(append(joinArgs, args...), q.MaxResults+1)

	rows, err := s.rdb.QueryContext(ctx, b.String(), all...)
	if err != nil {
		return tracking.RunPage{}, sqlError(err, "search runs")
	}
	defer rows.Close()
	var page tracking.RunPage
	var pks []int64
	var last []any
	for rows.Next() {
		dest, pk, r := runScanDest(terms)
		if err := rows.Scan(dest...); err != nil {
			return tracking.RunPage{}, sqlError(err, "scan run")
		}
		run, err := r()
		if err != nil {
			return tracking.RunPage{}, sqlError(err, "scan run")
		}
		if len(page.Runs) == q.MaxResults {
			// One more row exists: the page is full and has a successor.
			tok := runToken{Query: fingerprint}
			for i, t := range terms {
				tok.Values = append(tok.Values, encodeTermValue(t.kind, last[i]))
			}
			raw, _ := json.Marshal(tok)
			page.NextPageToken = base64.RawURLEncoding.EncodeToString(raw)
			break
		}
		page.Runs = append(page.Runs, run)
		pks = append(pks, *pk)
		last = termValues(dest[len(dest)-len(terms):], terms)
	}
	if err := rows.Err(); err != nil {
		return tracking.RunPage{}, sqlError(err, "search runs")
	}
	rows.Close()
	if err := s.loadRunData(ctx, pks, page.Runs); err != nil {
		return tracking.RunPage{}, err
	}
	return page, nil
}

// runScanDest returns scan destinations for runCols plus the sort terms,
// the run_pk destination and a function that builds the run.
func runScanDest(terms []sortTerm) ([]any, *int64, func() (*tracking.Run, error)) {
	var pk, exp int64
	var status int32
	var end sql.NullInt64
	var stage string
	r := &tracking.Run{}
	i := &r.Info
	dest := []any{&pk, &i.RunID, &exp, &i.RunName, &i.UserID, &status, &i.StartTimeMs, &end, &i.ArtifactURI, &stage}
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
	return dest, &pk, func() (*tracking.Run, error) {
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

func decodeRunToken(tok, fingerprint string, terms []sortTerm) ([]any, error) {
	bad := errs.Errorf(errs.Invalid, "invalid page_token %q for runs/search: pass back the next_page_token of the previous page unchanged", truncate(tok, 40))
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, bad
	}
	var t runToken
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, bad
	}
	if t.Query != fingerprint {
		return nil, errs.E(errs.Invalid, "page_token belongs to a different search (experiment_ids, filter, order_by or run_view_type changed)")
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
