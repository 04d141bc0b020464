package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
)

// recentKeysPerQuery is how many keys one ReadRecent query names: an IN
// list well inside both databases' limits on bound parameters (SQLite
// 32,766, PostgreSQL 65,535); more keys take more queries in the same
// transaction.
const recentKeysPerQuery = 500

// ReadRecent implements tracking.MetricReader: one query per
// recentKeysPerQuery keys, inside one read transaction, joining each
// series' row (through its (run_pk, key) key) to its chunks through the
// span index, whose max_step drops the older chunks before their rows
// (and encodings) are read. The scan still visits every index entry of
// the series: no index orders chunks by their last step or time (one
// more per chunk cost ingest a page per series and commit, migration 8),
// and an entry is cheap beside a row; a compacted series has one per
// 4,096 points.
func (s *TrackingStore) ReadRecent(ctx context.Context, runID string, keys []string, lastSteps, sinceMs int64, fn func(tracking.RecentChunk) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return sqlError(err, "read recent metrics")
	}
	defer tx.Rollback()
	var runPK int64
	err = tx.QueryRowContext(ctx, `SELECT run_pk FROM runs WHERE run_id = ?`, runID).Scan(&runPK)
	if errors.Is(err, sql.ErrNoRows) {
		return tracking.RunNotFound(runID)
	}
	if err != nil {
		return sqlError(err, "read recent metrics")
	}
	args := make([]any, 0, min(len(keys), recentKeysPerQuery)+3)
	for len(keys) > 0 {
		n := min(len(keys), recentKeysPerQuery)
		args = append(args[:0], runPK)
		for _, k := range keys[:n] {
			args = append(args, k)
		}
		args = append(args, sinceMs, lastSteps)
		if err := s.readRecent(ctx, tx, n, args, fn); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// readRecent runs one query of ReadRecent over n keys.
func (s *TrackingStore) readRecent(ctx context.Context, tx *sql.Tx, n int, args []any, fn func(tracking.RecentChunk) error) error {
	rows, err := tx.QueryContext(ctx, `SELECT m.key, m.max_step, c.data
		FROM metric_series m JOIN metric_chunks c`+s.indexedBy("metric_chunks_span")+` ON c.series_id = m.series_id
		WHERE m.run_pk = ? AND m.key IN (`+sqlrow.Placeholders(n)+`) AND c.max_ts >= ? AND c.max_step > m.max_step - ?
		ORDER BY m.series_id, c.min_step, c.max_step, c.chunk_id`, args...)
	if err != nil {
		return sqlError(err, "read recent metrics")
	}
	defer rows.Close()
	var (
		key  sql.RawBytes
		rc   tracking.RecentChunk
		data sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&key, &rc.MaxStep, &data); err != nil {
			return sqlError(err, "read recent metrics")
		}
		if string(key) != rc.Key { // a series' chunks come together: a string per series, not per chunk
			rc.Key = string(key)
		}
		rc.Data = data
		if err := fn(rc); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return sqlError(err, "read recent metrics")
	}
	return nil
}
