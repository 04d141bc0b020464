package sqlstore

import (
	"context"
	"database/sql"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
)

// What the loaders of child rows share: a page of runs, experiments or
// models is read in one query per kind of child row (tags, params,
// metrics...), keyed by the parents' primary keys in an IN list, never
// one query per parent.

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
	strs := sqlrow.Interner{}
	var key, value sql.RawBytes
	return s.queryEach(ctx, `SELECT `+parent+`, key, value FROM `+table+` WHERE `+parent+` IN (`+in+`) ORDER BY `+parent+`, key`, args, func(rows *sql.Rows) error {
		var pk int64
		if err := rows.Scan(&pk, &key, &value); err != nil {
			return err
		}
		add(pk, strs.Get(key), strs.Get(value))
		return nil
	})
}
