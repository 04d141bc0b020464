package sqlstore

import (
	"context"
	"database/sql"
	"strings"
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
