// Package sqlrow holds the few row helpers that sqlstore and its runs
// search (runsearch) share: the IN-list placeholders, the string interner
// of the loaders, the run columns and the scan of a latest metric value.
// They are the shapes of sqlstore's tables that both read; a leaf, it
// imports only the standard library and tracking.
package sqlrow

import (
	"database/sql"
	"math"
	"strings"

	"github.com/sextant/sextant/internal/tracking"
)

// Placeholders returns n comma-separated "?" for an IN list.
func Placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// Interner returns one string for equal byte strings, so that the keys and
// repeated values of a page of runs cost an allocation each, not one per
// run. It stops remembering after internLimit strings.
type Interner map[string]string

const internLimit = 4096

// Get returns b as a string, the same string for equal bytes.
func (in Interner) Get(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in) < internLimit {
		in[s] = s
	}
	return s
}

// RunCols are the columns of a run's row (runs r), in the order the run
// scanners read them.
const RunCols = `r.run_pk, r.run_id, r.experiment_id, r.name, r.user_id, r.status, r.start_time, r.end_time, r.artifact_uri, r.lifecycle_stage`

// ScanLatestMetric reads a row of metric_series' run_pk, key, step,
// timestamp, value, is_nan, model_id, dataset_name and dataset_digest, in
// that order, into its run's key and a metric; key is the caller's buffer
// for the raw key, strs its interner.
func ScanLatestMetric(rows *sql.Rows, strs Interner, key *sql.RawBytes) (int64, tracking.Metric, error) {
	var pk int64
	var m tracking.Metric
	var v sql.NullFloat64
	var isNaN bool
	var model, dsName, dsDigest sql.NullString
	if err := rows.Scan(&pk, key, &m.Step, &m.TimestampMs, &v, &isNaN, &model, &dsName, &dsDigest); err != nil {
		return 0, m, err
	}
	m.Key = strs.Get(*key)
	m.Value = v.Float64
	if isNaN {
		m.Value = math.NaN()
	}
	m.ModelID, m.DatasetName, m.DatasetDigest = model.String, dsName.String, dsDigest.String
	return pk, m, nil
}
