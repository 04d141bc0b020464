package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// A series is read in two queries inside one read transaction, so that
// both see the same snapshot even while compaction swaps chunks: the
// listing (chunk metadata and summaries, through the index on (series_id,
// min_step, max_step)), then the encodings of the chunks the caller wants,
// in the listing's order, stopping when it has enough.

// chunkListCols are the columns of a chunk listing, for scanChunkInfo.
const chunkListCols = `chunk_id, min_step, max_step, min_ts, max_ts, count, model_id, dataset_name, dataset_digest, summary`

// chunkOrder is the order of listings and reads: both must use it.
const chunkOrder = `ORDER BY min_step, max_step, chunk_id`

// SeriesChunks implements tracking.MetricReader.
func (s *Store) SeriesChunks(ctx context.Context, runID, key string, fromStep, toStep int64) ([]tracking.ChunkInfo, error) {
	var out []tracking.ChunkInfo
	err := s.ReadSeries(ctx, runID, key, fromStep, toStep, func(chunks []tracking.ChunkInfo, _ tracking.ChunkReadFunc) error {
		out = chunks
		return nil
	})
	return out, err
}

// ReadSeries implements tracking.MetricReader.
func (s *Store) ReadSeries(ctx context.Context, runID, key string, fromStep, toStep int64, fn func([]tracking.ChunkInfo, tracking.ChunkReadFunc) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return sqlError(err, "read metric series")
	}
	defer tx.Rollback()
	var seriesID int64
	err = tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT m.series_id FROM metric_series m WHERE m.run_pk = r.run_pk AND m.key = ?), 0)
		FROM runs r WHERE r.run_id = ?`, key, runID).Scan(&seriesID)
	if errors.Is(err, sql.ErrNoRows) {
		return notFoundRun(runID)
	}
	if err != nil {
		return sqlError(err, "read metric series")
	}
	if seriesID == 0 {
		return fn(nil, func(int, func(int, []byte) (bool, error)) error { return nil })
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+chunkListCols+` FROM metric_chunks`+s.indexedBy("metric_chunks_span")+`
		WHERE series_id = ? AND min_step <= ? AND max_step >= ? `+chunkOrder, seriesID, toStep, fromStep)
	if err != nil {
		return sqlError(err, "read metric chunks")
	}
	var chunks []tracking.ChunkInfo
	for rows.Next() {
		c, err := scanChunkInfo(rows)
		if err != nil {
			rows.Close()
			return err
		}
		chunks = append(chunks, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return sqlError(err, "read metric chunks")
	}
	read := func(first int, fn func(i int, data []byte) (bool, error)) error {
		if first >= len(chunks) {
			return nil
		}
		return s.readChunkData(ctx, tx, seriesID, chunks, first, fn)
	}
	return fn(chunks, read)
}

// scanChunkInfo scans one row of chunkListCols.
func scanChunkInfo(rows *sql.Rows) (tracking.ChunkInfo, error) {
	var c tracking.ChunkInfo
	var model, dsName, dsDigest sql.NullString
	var sum sql.RawBytes
	if err := rows.Scan(&c.ID, &c.MinStep, &c.MaxStep, &c.MinTimestampMs, &c.MaxTimestampMs, &c.Count, &model, &dsName, &dsDigest, &sum); err != nil {
		return c, sqlError(err, "scan metric chunk")
	}
	if err := decodeSummary(sum, &c.Summary); err != nil {
		return c, errs.Wrap(errs.Internal, fmt.Errorf("chunk %d: %w", c.ID, err), "stored metric data is corrupt")
	}
	c.Context = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
	return c, nil
}

// readChunkData calls fn with the data of chunks[first:], in order. The
// query returns every chunk from chunks[first]'s place in chunkOrder on;
// rows that are not in the listing (chunks whose steps end before the
// listing's range, which only overlapping chunks can interleave) are
// skipped.
func (s *Store) readChunkData(ctx context.Context, tx *sql.Tx, seriesID int64, chunks []tracking.ChunkInfo, first int, fn func(int, []byte) (bool, error)) error {
	c0 := chunks[first]
	rows, err := tx.QueryContext(ctx, `SELECT chunk_id, data FROM metric_chunks`+s.indexedBy("metric_chunks_span")+`
		WHERE series_id = ? AND min_step >= ? AND min_step <= ? `+chunkOrder,
		seriesID, c0.MinStep, chunks[len(chunks)-1].MinStep)
	if err != nil {
		return sqlError(err, "read metric chunks")
	}
	defer rows.Close()
	i := first
	for i < len(chunks) && rows.Next() {
		var id int64
		var data sql.RawBytes
		if err := rows.Scan(&id, &data); err != nil {
			return sqlError(err, "read metric chunk")
		}
		if id != chunks[i].ID {
			continue
		}
		more, err := fn(i, data)
		if err != nil {
			return err
		}
		i++
		if !more {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return sqlError(err, "read metric chunks")
	}
	if i < len(chunks) {
		// Impossible inside one snapshot; say so rather than return a
		// history with a hole.
		return errs.Errorf(errs.Internal, "metric chunk %d listed but not found", chunks[i].ID)
	}
	return nil
}
