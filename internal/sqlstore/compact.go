package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// compactSeries merges the small chunks of one series (those under
// ChunkPoints points), context by context, into as few chunks as possible.
// Fresh writes land as one small chunk per request; compaction turns them
// into large chunks that compress better and read faster.
func (s *Store) compactSeries(tx *wtx, seriesID int64) error {
	rows, err := tx.query(`SELECT chunk_id, model_id, dataset_name, dataset_digest, data FROM metric_chunks
		WHERE series_id = ? AND count < ? ORDER BY min_step, chunk_id`, seriesID, s.opts.ChunkPoints)
	if err != nil {
		return sqlError(err, "compaction: read chunks")
	}
	type group struct {
		ctx tracking.MetricContext
		ids []int64
		pts []metrics.Point
	}
	var groups []*group
	for rows.Next() {
		var id int64
		var model, dsName, dsDigest sql.NullString
		var data []byte
		if err := rows.Scan(&id, &model, &dsName, &dsDigest, &data); err != nil {
			rows.Close()
			return sqlError(err, "compaction: scan chunk")
		}
		ctx := tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
		var g *group
		for _, cand := range groups {
			if cand.ctx == ctx {
				g = cand
				break
			}
		}
		if g == nil {
			g = &group{ctx: ctx}
			groups = append(groups, g)
		}
		g.ids = append(g.ids, id)
		g.pts, err = metrics.DecodeChunk(g.pts, data)
		if err != nil {
			rows.Close()
			return errs.Wrap(errs.Internal, fmt.Errorf("series %d chunk %d: %w", seriesID, id, err), "stored metric data is corrupt")
		}
	}
	if err := rows.Close(); err != nil {
		return sqlError(err, "compaction: read chunks")
	}
	if err := rows.Err(); err != nil {
		return sqlError(err, "compaction: read chunks")
	}
	small := int64(0)
	for _, g := range groups {
		if len(g.ids) < 2 {
			small += int64(len(g.ids))
			continue
		}
		metrics.SortPoints(g.pts)
		g.pts = metrics.DedupSorted(g.pts)
		for _, id := range g.ids {
			if _, err := tx.exec(`DELETE FROM metric_chunks WHERE chunk_id = ?`, id); err != nil {
				return sqlError(err, "compaction: delete chunk")
			}
		}
		for start := 0; start < len(g.pts); start += s.opts.ChunkPoints {
			part := g.pts[start:min(start+s.opts.ChunkPoints, len(g.pts))]
			sl := &slice{ctx: g.ctx, pts: part}
			sl.sum = metrics.Summarize(part)
			sl.data, err = metrics.AppendChunk(nil, part)
			if err != nil {
				return errs.Wrap(errs.Internal, err, "compaction: encode")
			}
			if err := s.insertChunk(tx, seriesID, sl); err != nil {
				return err
			}
			if len(part) < s.opts.ChunkPoints {
				small++
			}
		}
	}
	_, err = tx.exec(`UPDATE metric_series SET small_chunks = ? WHERE series_id = ?`, small, seriesID)
	return sqlError(err, "compaction: update series")
}

// compactionCandidates lists up to 256 series with small chunks to merge.
func (s *Store) compactionCandidates(ctx context.Context) ([]int64, error) {
	return s.compactionCandidatesN(ctx, 256)
}

// compactionCandidatesN lists up to n series (all when n < 0) with at
// least two small chunks.
func (s *Store) compactionCandidatesN(ctx context.Context, n int) ([]int64, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT series_id FROM metric_series WHERE small_chunks >= 2 LIMIT ?`, n)
	if err != nil {
		return nil, sqlError(err, "list series to compact")
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, sqlError(err, "list series to compact")
		}
		ids = append(ids, id)
	}
	return ids, sqlError(rows.Err(), "list series to compact")
}
