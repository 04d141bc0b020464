package sqlstore

import (
	"context"
	"database/sql"
	"math"
	"strings"

	"github.com/sextant/sextant/internal/tracking"
)

// What the loaders of child rows share: a page of runs, experiments or
// models is read in one query per kind of child row (tags, params,
// metrics...), keyed by the parents' primary keys in an IN list, never
// one query per parent.

// placeholders returns n comma-separated "?" for an IN list.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// queryEach runs a read query and calls fn for each row.
func (s *db) queryEach(ctx context.Context, q string, args []any, fn func(*sql.Rows) error) error {
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return sqlError(err, "query")
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return sqlError(err, "scan")
		}
	}
	return sqlError(rows.Err(), "query")
}

// loadPairs loads the key/value rows (tags, params) of the parents whose
// keys are args (in, their placeholders): the rows (parent, key, value) of
// table, in key order within each parent, each handed to add.
func (s *db) loadPairs(ctx context.Context, table, parent, in string, args []any, add func(parent int64, key, value string)) error {
	strs := interner{}
	var key, value sql.RawBytes
	return s.queryEach(ctx, `SELECT `+parent+`, key, value FROM `+table+` WHERE `+parent+` IN (`+in+`) ORDER BY `+parent+`, key`, args, func(rows *sql.Rows) error {
		var pk int64
		if err := rows.Scan(&pk, &key, &value); err != nil {
			return err
		}
		add(pk, strs.get(key), strs.get(value))
		return nil
	})
}

// interner returns one string for equal byte strings, so that the keys and
// repeated values of a page of runs cost an allocation each, not one per
// run. It stops remembering after internLimit strings.
type interner map[string]string

const internLimit = 4096

func (in interner) get(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in) < internLimit {
		in[s] = s
	}
	return s
}

// scanLatestMetric reads a row of metric_series' run_pk, key, step,
// timestamp, value, is_nan, model_id, dataset_name and dataset_digest, in
// that order, into its run's key and a metric; key is the caller's buffer
// for the raw key, strs its interner.
func scanLatestMetric(rows *sql.Rows, strs interner, key *sql.RawBytes) (int64, tracking.Metric, error) {
	var pk int64
	var m tracking.Metric
	var v sql.NullFloat64
	var isNaN bool
	var model, dsName, dsDigest sql.NullString
	if err := rows.Scan(&pk, key, &m.Step, &m.TimestampMs, &v, &isNaN, &model, &dsName, &dsDigest); err != nil {
		return 0, m, err
	}
	m.Key = strs.get(*key)
	m.Value = v.Float64
	if isNaN {
		m.Value = math.NaN()
	}
	m.ModelID, m.DatasetName, m.DatasetDigest = model.String, dsName.String, dsDigest.String
	return pk, m, nil
}
