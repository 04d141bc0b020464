package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// Overviews (metric_overviews) are a stored coarse level of long series:
// one row for each run of Options.OverviewChunks consecutive chunks of one
// context, holding each chunk's first, lowest, highest and last point, so
// that a downsampled read of a 10,000,000-point series reads a few dozen
// overviews and the chunks after the last one, not 2,442 chunk rows.
//
// The invariant readers rely on: no chunk overlaps an overview's steps but
// the overview's own chunks. Compaction builds overviews after it merges
// (buildOverviews), from chunks that are settled (at least half full, not
// the series' last one, overlapping no other chunk); every write that puts
// a chunk among stored steps drops the overviews it overlaps
// (dropOverviews), and the next compaction builds them again. Writes, the
// compaction swap and the overview insert lock the run's row first on
// PostgreSQL, so that replicas take turns.

// overviewCols are the columns of an overview listing, for listOverviews.
const overviewCols = `min_step, max_step, min_ts, max_ts, count, chunks, model_id, dataset_name, dataset_digest, summary, data`

// listOverviews lists the overviews of a series wholly inside [lo, hi], in
// step order.
func listOverviews(ctx context.Context, tx *sql.Tx, seriesID, lo, hi int64) ([]tracking.Overview, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+overviewCols+` FROM metric_overviews
		WHERE series_id = ? AND min_step >= ? AND min_step <= ? AND max_step <= ? ORDER BY min_step`, seriesID, lo, hi, hi)
	if err != nil {
		return nil, sqlError(err, "read metric overviews")
	}
	var out []tracking.Overview
	for rows.Next() {
		var o tracking.Overview
		var model, dsName, dsDigest sql.NullString
		var sum []byte
		if err := rows.Scan(&o.MinStep, &o.MaxStep, &o.MinTimestampMs, &o.MaxTimestampMs, &o.Count, &o.Chunks, &model, &dsName, &dsDigest, &sum, &o.Data); err != nil {
			rows.Close()
			return nil, sqlError(err, "read metric overviews")
		}
		if err := decodeSummary(sum, &o.Summary); err != nil {
			rows.Close()
			return nil, errs.Wrap(errs.Internal, fmt.Errorf("series %d overview at step %d: %w", seriesID, o.MinStep, err), "stored metric data is corrupt")
		}
		o.Context = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
		out = append(out, o)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, sqlError(err, "read metric overviews")
	}
	return out, nil
}

// dropOverviews deletes the overviews of a series whose steps meet [lo,
// hi]: a chunk is being written there.
func dropOverviews(tx *wtx, seriesID, lo, hi int64) error {
	_, err := tx.exec(`DELETE FROM metric_overviews WHERE series_id = ? AND min_step <= ? AND max_step >= ?`, seriesID, hi, lo)
	return sqlError(err, "drop metric overviews")
}

// newOverview is an overview buildOverviews is about to insert.
type newOverview struct {
	ids []int64
	o   tracking.Overview
}

// buildOverviews adds the overviews a series lacks: it lists the chunks
// in the gaps between its overviews (after a first build, the chunks
// since the last one), finds runs of OverviewChunks settled chunks, and
// inserts an overview of each in a write that checks, under the run's
// lock, that the chunks in its steps are still exactly those.
func (s *db) buildOverviews(ctx context.Context, seriesID int64) error {
	news, err := s.findOverviews(ctx, seriesID)
	if err != nil || len(news) == 0 {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		if err := lockSeriesRun(tx, seriesID); err != nil {
			return err
		}
		for _, n := range news {
			ok, err := overviewStillHolds(tx, seriesID, n)
			if err != nil {
				return err
			}
			if !ok {
				continue // a write or a compaction came first
			}
			o := &n.o
			_, err = tx.exec(`INSERT INTO metric_overviews (series_id, `+overviewCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				seriesID, o.MinStep, o.MaxStep, o.MinTimestampMs, o.MaxTimestampMs, o.Count, o.Chunks,
				nullString(o.Context.ModelID), nullString(o.Context.DatasetName), nullString(o.Context.DatasetDigest),
				encodeSummary(o.Summary), o.Data)
			if err != nil {
				return sqlError(err, "store metric overview")
			}
		}
		return nil
	})
}

// overviewStillHolds says whether the chunks meeting n's steps are n's,
// and no overview meets them.
func overviewStillHolds(tx *wtx, seriesID int64, n newOverview) (bool, error) {
	rows, err := tx.query(`SELECT chunk_id FROM metric_chunks WHERE series_id = ? AND min_step <= ? AND max_step >= ?`, seriesID, n.o.MaxStep, n.o.MinStep)
	if err != nil {
		return false, sqlError(err, "check metric overview")
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return false, sqlError(err, "check metric overview")
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, sqlError(err, "check metric overview")
	}
	slices.Sort(ids)
	if !slices.Equal(ids, n.ids) {
		return false, nil
	}
	var others int
	err = tx.queryRow(`SELECT COUNT(*) FROM metric_overviews WHERE series_id = ? AND min_step <= ? AND max_step >= ?`, seriesID, n.o.MaxStep, n.o.MinStep).Scan(&others)
	return others == 0, sqlError(err, "check metric overview")
}

// findOverviews reads, from one snapshot, the overviews a series lacks.
func (s *db) findOverviews(ctx context.Context, seriesID int64) ([]newOverview, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return nil, sqlError(err, "overviews: begin read")
	}
	defer tx.Rollback()
	have, err := listOverviews(ctx, tx, seriesID, math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	// The gaps between the overviews; chunks there start inside them.
	type gap struct{ lo, hi int64 }
	var gaps []gap
	lo := int64(math.MinInt64)
	for _, o := range have {
		if o.MinStep > lo {
			gaps = append(gaps, gap{lo, o.MinStep - 1})
		}
		if o.MaxStep == math.MaxInt64 {
			lo = o.MaxStep
			break
		}
		lo = o.MaxStep + 1
	}
	if len(have) == 0 || have[len(have)-1].MaxStep < math.MaxInt64 {
		gaps = append(gaps, gap{lo, math.MaxInt64})
	}
	var out []newOverview
	for k, g := range gaps {
		cs, err := s.listChunkInfo(ctx, tx, seriesID, g.lo, g.hi, true)
		if err != nil {
			return nil, err
		}
		if k == len(gaps)-1 && len(cs) > 0 {
			cs = cs[:len(cs)-1] // the series' last chunk may still change
		}
		runs, err := s.overviewRuns(cs)
		if err != nil {
			return nil, err
		}
		out = append(out, runs...)
	}
	return out, nil
}

// overviewRuns cuts a gap's listing into runs of OverviewChunks settled
// chunks and makes an overview of each.
func (s *db) overviewRuns(cs []tracking.ChunkInfo) ([]newOverview, error) {
	k := s.opts.OverviewChunks
	var out []newOverview
	start := 0 // the current run is cs[start:i]
	reach := int64(math.MinInt64)
	for i := range cs {
		c := &cs[i]
		settled := 2*c.Count >= s.opts.ChunkPoints && c.MinStep > reach &&
			(i+1 == len(cs) || cs[i+1].MinStep > c.MaxStep)
		reach = max(reach, c.MaxStep)
		if !settled || (i > start && c.Context != cs[start].Context) {
			start = i
			if !settled {
				start = i + 1
			}
			continue
		}
		if i+1-start == k {
			n, err := makeOverview(cs[start : i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, n)
			start = i + 1
		}
	}
	return out, nil
}

// makeOverview summarises disjoint chunks of one context, in step order.
func makeOverview(cs []tracking.ChunkInfo) (newOverview, error) {
	n := newOverview{ids: make([]int64, len(cs))}
	pts := make([]metrics.Point, 0, 4*len(cs))
	o := &n.o
	o.Context, o.Chunks = cs[0].Context, len(cs)
	o.MinTimestampMs, o.MaxTimestampMs = math.MaxInt64, math.MinInt64
	count := 0
	for i, c := range cs {
		n.ids[i] = c.ID
		pts = append(pts, c.First, c.Low, c.High, c.Last)
		o.MinTimestampMs, o.MaxTimestampMs = min(o.MinTimestampMs, c.MinTimestampMs), max(o.MaxTimestampMs, c.MaxTimestampMs)
		count += c.Count
	}
	slices.Sort(n.ids)
	metrics.SortPoints(pts)
	pts = metrics.DedupSorted(pts)
	minTs, maxTs := o.MinTimestampMs, o.MaxTimestampMs
	o.Summary = metrics.Summarize(pts)
	o.MinTimestampMs, o.MaxTimestampMs, o.Count = minTs, maxTs, count
	o.MinStep, o.MaxStep = cs[0].MinStep, cs[len(cs)-1].MaxStep
	var err error
	if o.Data, err = metrics.AppendChunk(nil, pts); err != nil {
		return n, errs.Wrap(errs.Internal, err, "encode metric overview")
	}
	return n, nil
}
