package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// A series is read in two queries inside one read transaction, so that
// both see the same snapshot even while compaction swaps chunks: the
// listing (chunk metadata and summaries, through the index on (series_id,
// min_step, max_step)), then the encodings of the chunks the caller wants,
// in the listing's order, stopping when it has enough.

// chunkListCols are the columns of a chunk listing, for scanChunkInfo.
const chunkListCols = `chunk_id, min_step, max_step, min_ts, max_ts, count, model_id, dataset_name, dataset_digest, summary, sketch IS NOT NULL`

// chunkOrder is the order of listings and reads: both must use it.
const chunkOrder = `ORDER BY min_step, max_step, chunk_id`

// SeriesChunks implements tracking.MetricReader.
func (s *TrackingStore) SeriesChunks(ctx context.Context, runID, key string, fromStep, toStep int64) ([]tracking.ChunkInfo, error) {
	var out []tracking.ChunkInfo
	err := s.ReadSeries(ctx, runID, key, fromStep, toStep, func(ss tracking.SeriesSnapshot) error {
		out = ss.Chunks
		return nil
	})
	return out, err
}

// ReadSeries implements tracking.MetricReader.
func (s *TrackingStore) ReadSeries(ctx context.Context, runID, key string, fromStep, toStep int64, fn func(tracking.SeriesSnapshot) error) error {
	return s.readSeries(ctx, runID, key, func(tx *sql.Tx, seriesID int64) error {
		sn := seriesSnapshot{s: s.db, ctx: ctx, tx: tx, seriesID: seriesID}
		if seriesID != 0 {
			var err error
			if sn.chunks, err = s.listChunkInfo(ctx, tx, seriesID, fromStep, toStep, false); err != nil {
				return err
			}
			sn.segments = []int{0, len(sn.chunks)}
		}
		return fn(sn.snapshot())
	})
}

// ReadSeriesCoarse implements tracking.MetricReader: it lists the
// overviews wholly inside [fromStep, toStep], then the chunks in the range
// that no listed overview covers, one query for each gap between them.
// No chunk overlaps an overview's steps but its own (see overview.go), so
// every chunk of a gap starts inside it, but the first gap's, which may
// start before the range.
func (s *TrackingStore) ReadSeriesCoarse(ctx context.Context, runID, key string, fromStep, toStep int64, fn func([]tracking.Overview, tracking.SeriesSnapshot) error) error {
	return s.readSeries(ctx, runID, key, func(tx *sql.Tx, seriesID int64) error {
		sn := seriesSnapshot{s: s.db, ctx: ctx, tx: tx, seriesID: seriesID}
		if seriesID == 0 {
			return fn(nil, sn.snapshot())
		}
		ovs, err := listOverviews(ctx, tx, seriesID, fromStep, toStep)
		if err != nil {
			return err
		}
		gapLo := fromStep
		addGap := func(lo, hi int64, first bool) error {
			if lo > hi {
				return nil
			}
			cs, err := s.listChunkInfo(ctx, tx, seriesID, lo, hi, !first)
			if err != nil {
				return err
			}
			if len(cs) > 0 {
				sn.chunks = append(sn.chunks, cs...)
				sn.segments = append(sn.segments, len(sn.chunks)-len(cs), len(sn.chunks))
			}
			return nil
		}
		for i, o := range ovs {
			if o.MinStep > math.MinInt64 {
				if err := addGap(gapLo, o.MinStep-1, i == 0); err != nil {
					return err
				}
			}
			gapLo = o.MaxStep + 1
		}
		if len(ovs) == 0 || ovs[len(ovs)-1].MaxStep < toStep {
			if err := addGap(gapLo, toStep, len(ovs) == 0); err != nil {
				return err
			}
		}
		return fn(ovs, sn.snapshot())
	})
}

// readSeries calls fn inside a read transaction with the id of the series
// (runID, key), 0 when the run has no such metric.
func (s *db) readSeries(ctx context.Context, runID, key string, fn func(tx *sql.Tx, seriesID int64) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return sqlError(err, "read metric series")
	}
	defer tx.Rollback()
	var seriesID int64
	err = tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT m.series_id FROM metric_series m WHERE m.run_pk = r.run_pk AND m.key = ?), 0)
		FROM runs r WHERE r.run_id = ?`, key, runID).Scan(&seriesID)
	if errors.Is(err, sql.ErrNoRows) {
		return tracking.RunNotFound(runID)
	}
	if err != nil {
		return sqlError(err, "read metric series")
	}
	return fn(tx, seriesID)
}

// listChunkInfo lists the chunks of a series with steps in [lo, hi], or,
// with startInside, those that start in it.
func (s *db) listChunkInfo(ctx context.Context, tx *sql.Tx, seriesID, lo, hi int64, startInside bool) ([]tracking.ChunkInfo, error) {
	where := `min_step <= ? AND max_step >= ?`
	args := []any{seriesID, hi, lo}
	if startInside {
		where = `min_step >= ? AND min_step <= ?`
		args = []any{seriesID, lo, hi}
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+chunkListCols+` FROM metric_chunks`+s.indexedBy("metric_chunks_span")+`
		WHERE series_id = ? AND `+where+` `+chunkOrder, args...)
	if err != nil {
		return nil, sqlError(err, "read metric chunks")
	}
	var chunks []tracking.ChunkInfo
	for rows.Next() {
		c, err := scanChunkInfo(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		chunks = append(chunks, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, sqlError(err, "read metric chunks")
	}
	return chunks, nil
}

// seriesSnapshot is a listing of chunks inside a read transaction. The
// listing is made of segments, each one query's rows (ReadSeries makes
// one; ReadSeriesCoarse one per gap between overviews); a read of
// encodings queries each segment on its own, so as not to step over the
// rows of the chunks between them.
type seriesSnapshot struct {
	s        *db
	ctx      context.Context
	tx       *sql.Tx
	seriesID int64
	chunks   []tracking.ChunkInfo
	segments []int // start, end pairs of indexes into chunks
}

func (sn *seriesSnapshot) snapshot() tracking.SeriesSnapshot {
	return tracking.SeriesSnapshot{Chunks: sn.chunks, Read: sn.read, Sketches: sn.sketches}
}

// read implements SeriesSnapshot.Read.
func (sn *seriesSnapshot) read(first int, fn func(i int, data []byte) (bool, error)) error {
	for k := 0; k < len(sn.segments); k += 2 {
		lo, hi := max(first, sn.segments[k]), sn.segments[k+1]
		if lo >= hi {
			continue
		}
		stop := false
		err := sn.s.readChunkData(sn.ctx, sn.tx, sn.seriesID, sn.chunks, lo, hi, "data", func(i int, data []byte) (bool, error) {
			more, err := fn(i, data)
			stop = !more
			return more, err
		})
		if err != nil || stop {
			return err
		}
	}
	return nil
}

// sketches implements SeriesSnapshot.Sketches.
func (sn *seriesSnapshot) sketches(fn func(i int, sketch []byte) error) error {
	has := func(c tracking.ChunkInfo) bool { return c.HasSketch }
	for k := 0; k < len(sn.segments); k += 2 {
		seg := sn.chunks[sn.segments[k]:sn.segments[k+1]]
		lo, hi := slices.IndexFunc(seg, has), lastIndexFunc(seg, has)
		if lo < 0 {
			continue
		}
		base := sn.segments[k]
		err := sn.s.readChunkData(sn.ctx, sn.tx, sn.seriesID, sn.chunks, base+lo, base+hi+1, "sketch", func(i int, b []byte) (bool, error) {
			if !sn.chunks[i].HasSketch {
				return true, nil
			}
			return true, fn(i, b)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func lastIndexFunc[T any](s []T, f func(T) bool) int {
	for i := len(s) - 1; i >= 0; i-- {
		if f(s[i]) {
			return i
		}
	}
	return -1
}

// scanChunkInfo scans one row of chunkListCols.
func scanChunkInfo(rows *sql.Rows) (tracking.ChunkInfo, error) {
	var c tracking.ChunkInfo
	var model, dsName, dsDigest sql.NullString
	var sum sql.RawBytes
	if err := rows.Scan(&c.ID, &c.MinStep, &c.MaxStep, &c.MinTimestampMs, &c.MaxTimestampMs, &c.Count, &model, &dsName, &dsDigest, &sum, &c.HasSketch); err != nil {
		return c, sqlError(err, "scan metric chunk")
	}
	if err := decodeSummary(sum, &c.Summary); err != nil {
		return c, errs.Wrap(errs.Internal, fmt.Errorf("chunk %d: %w", c.ID, err), "stored metric data is corrupt")
	}
	c.Context = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
	return c, nil
}

// readChunkData calls fn with column (data or sketch) of chunks[first:end],
// in order, until fn returns false. The query returns every chunk from
// chunks[first]'s place in chunkOrder to chunks[end-1]'s; rows that are
// not in the listing (chunks whose steps end before the listing's range,
// which only overlapping chunks can interleave) are skipped.
func (s *db) readChunkData(ctx context.Context, tx *sql.Tx, seriesID int64, chunks []tracking.ChunkInfo, first, end int, column string, fn func(int, []byte) (bool, error)) error {
	rows, err := tx.QueryContext(ctx, `SELECT chunk_id, `+column+` FROM metric_chunks`+s.indexedBy("metric_chunks_span")+`
		WHERE series_id = ? AND min_step >= ? AND min_step <= ? `+chunkOrder,
		seriesID, chunks[first].MinStep, chunks[end-1].MinStep)
	if err != nil {
		return sqlError(err, "read metric chunks")
	}
	defer rows.Close()
	i := first
	for i < end && rows.Next() {
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
	if i < end {
		// Impossible inside one snapshot; say so rather than return a
		// history with a hole.
		return errs.Errorf(errs.Internal, "metric chunk %d listed but not found", chunks[i].ID)
	}
	return nil
}
