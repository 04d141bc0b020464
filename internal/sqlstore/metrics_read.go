package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// SeriesChunks implements tracking.MetricReader.
func (s *Store) SeriesChunks(ctx context.Context, runID, key string, fromStep, toStep int64) ([]tracking.ChunkInfo, error) {
	var seriesID int64
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE((SELECT m.series_id FROM metric_series m WHERE m.run_pk = r.run_pk AND m.key = ?), 0)
		FROM runs r WHERE r.run_id = ?`, key, runID).Scan(&seriesID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFoundRun(runID)
	}
	if err != nil {
		return nil, sqlError(err, "read metric series")
	}
	if seriesID == 0 {
		return nil, nil
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT chunk_id, min_step, max_step, min_ts, max_ts, count, model_id, dataset_name, dataset_digest, summary
		FROM metric_chunks WHERE series_id = ? AND min_step <= ? AND max_step >= ?
		ORDER BY min_step, chunk_id`, seriesID, toStep, fromStep)
	if err != nil {
		return nil, sqlError(err, "read metric chunks")
	}
	defer rows.Close()
	var out []tracking.ChunkInfo
	var sum []byte
	for rows.Next() {
		var c tracking.ChunkInfo
		var model, dsName, dsDigest sql.NullString
		if err := rows.Scan(&c.ID, &c.MinStep, &c.MaxStep, &c.MinTimestampMs, &c.MaxTimestampMs, &c.Count, &model, &dsName, &dsDigest, &sum); err != nil {
			return nil, sqlError(err, "scan metric chunk")
		}
		if err := decodeSummary(sum, &c.Summary); err != nil {
			return nil, errs.Wrap(errs.Internal, fmt.Errorf("chunk %d: %w", c.ID, err), "stored metric data is corrupt")
		}
		c.Context = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
		out = append(out, c)
	}
	return out, sqlError(rows.Err(), "read metric chunks")
}

// readBatch is the number of chunks fetched per query by ReadChunks.
const readBatch = 256

// ReadChunks implements tracking.MetricReader.
func (s *Store) ReadChunks(ctx context.Context, chunks []tracking.ChunkInfo, dst []tracking.HistoryPoint) ([]tracking.HistoryPoint, error) {
	if len(chunks) == 0 {
		return dst, nil
	}
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return nil, sqlError(err, "read metric chunks")
	}
	defer conn.Close()
	// One read transaction, so every chunk comes from the same snapshot
	// even while compaction replaces chunks.
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, sqlError(err, "read metric chunks")
	}
	defer tx.Rollback()
	var pts []metrics.Point
	for start := 0; start < len(chunks); start += readBatch {
		batch := chunks[start:min(start+readBatch, len(chunks))]
		args := make([]any, len(batch))
		pos := make(map[int64]int, len(batch))
		for i, c := range batch {
			args[i] = c.ID
			pos[c.ID] = i
		}
		data := make([][]byte, len(batch))
		rows, err := tx.QueryContext(ctx, `SELECT chunk_id, data FROM metric_chunks WHERE chunk_id IN (`+placeholders(len(args))+`)`, args...)
		if err != nil {
			return nil, sqlError(err, "read metric chunks")
		}
		for rows.Next() {
			var id int64
			var b []byte
			if err := rows.Scan(&id, &b); err != nil {
				rows.Close()
				return nil, sqlError(err, "read metric chunk")
			}
			data[pos[id]] = b
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, sqlError(err, "read metric chunks")
		}
		rows.Close()
		for i := range batch {
			c := &batch[i]
			if data[i] == nil {
				// Compaction replaced the chunk after the caller listed it:
				// the caller's listing is stale, ask it to retry.
				return nil, errs.E(errs.Unavailable, "metric data changed while reading, retry")
			}
			pts, err = metrics.DecodeChunk(pts[:0], data[i])
			if err != nil {
				return nil, errs.Wrap(errs.Internal, fmt.Errorf("chunk %d: %w", c.ID, err), "stored metric data is corrupt")
			}
			var cp *tracking.MetricContext
			if !c.Context.IsZero() {
				cp = &c.Context
			}
			dst = slicesGrow(dst, len(pts))
			for _, p := range pts {
				dst = append(dst, tracking.HistoryPoint{Point: p, Context: cp})
			}
		}
	}
	return dst, nil
}

func slicesGrow(s []tracking.HistoryPoint, n int) []tracking.HistoryPoint {
	if cap(s)-len(s) >= n {
		return s
	}
	ns := make([]tracking.HistoryPoint, len(s), 2*cap(s)+n)
	copy(ns, s)
	return ns
}
