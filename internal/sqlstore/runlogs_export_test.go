package sqlstore

import "context"

// LogChunkStats returns the number of chunks of a run's log and how many
// of them are small.
func (l *LogStore) LogChunkStats(ctx context.Context, runID string) (chunks, small int, err error) {
	err = l.s.rdb.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN is_full = 0 THEN 1 ELSE 0 END), 0) FROM run_log_chunks
		WHERE run_pk = (SELECT run_pk FROM runs WHERE run_id = ?)`, runID).Scan(&chunks, &small)
	return chunks, small, err
}
