package sqlstore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
)

// slice is the points of one (key, context) of one request, sorted and
// free of duplicates, with its encoding prepared before the writer sees
// it so that the single writer goroutine only does SQL.
type slice struct {
	key  string
	ctx  tracking.MetricContext
	pts  []metrics.Point
	sum  metrics.Summary
	data []byte
	// sketch is the encoding of metrics.Sketch of pts, for chunks of at
	// least a quarter of Options.ChunkPoints points; nil for smaller ones,
	// which a sampled read decodes whole.
	sketch []byte
	// sent is the greatest point the client sent, kept even when every
	// point was already stored: log_model re-sends stored points with a
	// model id to link them to the model.
	sent metrics.Point
}

// prepareSlices groups a request's metrics by (key, context), sorts and
// dedups each group and encodes it, with a sketch when it has sketchMin
// points or more. The groups' points share one array, cut to each group's
// count (counted first): growing a slice per group cost a tenth of the
// request's allocations. A batch lists a key's points together, so a point
// is compared with the previous point's group before the groups are
// searched. Everything is built in sc, which the caller reuses once the
// slices are no longer needed.
func prepareSlices(sc *batchScratch, ms []tracking.Metric, sketchMin int) ([]*slice, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	sc.reset(len(ms))
	last := -1
	for i := range ms {
		m := &ms[i]
		g := last
		if g < 0 || m.Key != sc.out[g].key || m.MetricContext != sc.out[g].ctx {
			g = sc.find(m.Key, m.MetricContext)
			last = g
		}
		sc.group[i] = int32(g)
		sc.counts[g]++
	}
	off := 0
	for g, sl := range sc.out {
		sl.pts = sc.pts[off : off : off+sc.counts[g]]
		off += sc.counts[g]
	}
	for i := range ms {
		sl := sc.out[sc.group[i]]
		sl.pts = append(sl.pts, ms[i].Point)
	}
	for _, sl := range sc.out {
		if err := sl.encode(sketchMin); err != nil {
			return nil, err
		}
		sl.sent = sl.sum.Last
	}
	return sc.out, nil
}

// batchScratch is the memory prepareSlices builds a request's slices in:
// the slices (with their encodings' buffers), the points they share and
// the grouping. LogBatch takes one from a pool and gives it back when the
// writer has answered, after which nothing holds any of it; fresh ones for
// each of a thousand ranks' progress requests were a fifth of the server's
// allocations under go run ./bench progress.
type batchScratch struct {
	out    []*slice
	spare  []*slice // slices of earlier requests, for reuse
	pts    []metrics.Point
	group  []int32
	counts []int
	// idx finds a group by (key, context) once there are more than
	// scanGroups of them; fewer are found by a scan of out, which a
	// request's few keys (a rank's three) make cheaper than a map.
	idx map[groupKey]int
}

type groupKey struct {
	key string
	ctx tracking.MetricContext
}

const scanGroups = 8

var batchScratches = sync.Pool{New: func() any { return new(batchScratch) }}

// reset readies sc for a request of n metrics.
func (sc *batchScratch) reset(n int) {
	sc.spare = append(sc.spare, sc.out...)
	clear(sc.out)
	sc.out = sc.out[:0]
	sc.pts = slices.Grow(sc.pts[:0], n)[:n]
	sc.group = slices.Grow(sc.group[:0], n)[:n]
	sc.counts = sc.counts[:0]
	clear(sc.idx)
}

// find returns the group of (key, ctx), adding it when it is new.
func (sc *batchScratch) find(key string, ctx tracking.MetricContext) int {
	if len(sc.out) <= scanGroups {
		for g, sl := range sc.out {
			if sl.key == key && sl.ctx == ctx {
				return g
			}
		}
	} else {
		if sc.idx == nil || len(sc.idx) == 0 {
			if sc.idx == nil {
				sc.idx = make(map[groupKey]int, 2*scanGroups)
			}
			for g, sl := range sc.out {
				sc.idx[groupKey{sl.key, sl.ctx}] = g
			}
		}
		if g, ok := sc.idx[groupKey{key, ctx}]; ok {
			return g
		}
	}
	var sl *slice
	if n := len(sc.spare); n > 0 {
		sl, sc.spare = sc.spare[n-1], sc.spare[:n-1]
		*sl = slice{data: sl.data[:0]} // the encoding's buffer is kept
	} else {
		sl = new(slice)
	}
	sl.key, sl.ctx = key, ctx
	g := len(sc.out)
	sc.out = append(sc.out, sl)
	sc.counts = append(sc.counts, 0)
	if len(sc.idx) > 0 {
		sc.idx[groupKey{key, ctx}] = g
	}
	return g
}

// release clears sc's references to the request's strings and points,
// and gives it back to the pool unless it grew past what is worth keeping.
func (sc *batchScratch) release() {
	if cap(sc.pts) > scratchMaxPoints {
		return
	}
	for _, sl := range sc.out {
		*sl = slice{data: sl.data[:0]}
	}
	clear(sc.idx)
	batchScratches.Put(sc)
}

// scratchMaxPoints bounds the requests whose scratch is kept: a batch
// holds at most 1,000 metrics (tracking.Limits.BatchMetrics), and a store
// opened with larger limits leaves its rare larger ones to the collector.
const scratchMaxPoints = 4096

func (sl *slice) encode(sketchMin int) error {
	metrics.SortPoints(sl.pts)
	sl.pts = metrics.DedupSorted(sl.pts)
	sl.sum = metrics.Summarize(sl.pts)
	// A chunk without a sketch is small: compaction merges it and picks
	// the merged chunk's codec, so it is encoded the quick way.
	encode := metrics.AppendChunk
	if len(sl.pts) < sketchMin {
		encode = metrics.AppendChunkQuick
	}
	var err error
	sl.data, err = encode(sl.data[:0], sl.pts)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode metrics")
	}
	return sl.encodeSketch(sketchMin)
}

// sketchBlocks is the number of blocks of a chunk's sketch (metrics.Sketch):
// at most 50 points, a few hundred bytes, against the tens of kilobytes of
// a full chunk.
const sketchBlocks = 16

// sketchMin is the least number of points of a chunk with a sketch: a
// quarter of a full chunk (1024 points by default, more than a request's
// 1000), so that sketches are made by compaction, off the write path, and
// a chunk without one is cheap to decode.
func (s *db) sketchMin() int { return max(4*sketchBlocks, s.opts.ChunkPoints/4) }

// encodeSketch sets sl.sketch from sl.pts when it has sketchMin points or
// more.
func (sl *slice) encodeSketch(sketchMin int) error {
	sl.sketch = nil
	if len(sl.pts) < sketchMin {
		return nil
	}
	sketch, err := metrics.AppendChunk(nil, metrics.Sketch(nil, sl.pts, sketchBlocks))
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode metrics sketch")
	}
	sl.sketch = sketch
	return nil
}

// seriesRow is the stored state of one (run, key) series.
type seriesRow struct {
	id          int64
	latest      metrics.Point
	latestCtx   tracking.MetricContext
	maxStep     int64
	pointCount  int64
	smallChunks int64
	// lastSmall is the points of the small chunk this request wrote, 0
	// if none.
	lastSmall int64
	isNew     bool
	dirty     bool
}

// LogBatch implements tracking.RunStore.
func (s *TrackingStore) LogBatch(ctx context.Context, runID string, b tracking.Batch) error {
	sc := batchScratches.Get().(*batchScratch)
	// The writer answers (s.w.do returns) only after it has run the write
	// or when it never took it; either way nothing holds sc after.
	defer sc.release()
	slices, err := prepareSlices(sc, b.Metrics, s.sketchMin())
	if err != nil {
		return err
	}
	var stored int64
	err = s.w.do(ctx, func(tx *wtx) error {
		stored = 0
		st, err := activeRun(tx, runID)
		if err != nil {
			return err
		}
		if err := s.logParams(tx, &st, runID, b.Params); err != nil {
			return err
		}
		for _, t := range b.Tags {
			if err := setRunTag(tx, &st, t, s.limits); err != nil {
				return err
			}
		}
		if len(slices) == 0 {
			return nil
		}
		before := st.points
		if err := s.logMetrics(tx, &st, slices); err != nil {
			return err
		}
		stored = st.points - before
		return recordModelMetrics(tx, runID, slices)
	})
	if err == nil {
		s.metrics.points.Add(float64(stored))
	}
	return err
}

func (s *db) logParams(tx *wtx, st *runState, runID string, params []tracking.Param) error {
	var fresh []tracking.Param
	for _, p := range params {
		var old string
		err := tx.queryRow(`SELECT value FROM params WHERE run_pk = ? AND key = ?`, st.pk, p.Key).Scan(&old)
		switch {
		case err == nil:
			if err := tracking.CheckParam(runID, p.Key, old, p.Value); err != nil {
				return err
			}
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return sqlError(err, "read param")
		}
		fresh = append(fresh, p)
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := s.limits.CheckRun(tracking.RunUsage{Params: st.params}, tracking.RunUsage{Params: int64(len(fresh))}); err != nil {
		return err
	}
	for _, p := range fresh {
		if _, err := tx.exec(`INSERT INTO params (run_pk, key, value) VALUES (?, ?, ?)`, st.pk, p.Key, p.Value); err != nil {
			return sqlError(err, "log param")
		}
	}
	st.params += int64(len(fresh))
	if _, err := tx.exec(`UPDATE runs SET param_count = ? WHERE run_pk = ?`, st.params, st.pk); err != nil {
		return sqlError(err, "log param")
	}
	return nil
}

// logMetrics stores the slices: it drops points already stored (client
// retries), enforces the per-run limits on what remains, then writes one
// chunk per slice and updates each series' latest value.
func (s *db) logMetrics(tx *wtx, st *runState, slices []*slice) error {
	state, err := loadSeriesRows(tx, st.pk, slices)
	if err != nil {
		return err
	}
	newKeys, newPoints := int64(0), int64(0)
	for _, r := range state {
		if r.isNew {
			newKeys++
		}
	}
	for _, sl := range slices {
		r := state[sl.key]
		if !r.isNew && sl.sum.MinStep <= r.maxStep {
			if err := s.dropStored(tx, r.id, sl); err != nil {
				return err
			}
			// The chunk lands among stored steps: the overviews it meets are
			// stale. It may overlap a chunk, which reads merge until the
			// next compaction (the count of small chunks triggers it as
			// usual: writers racing each other land most requests here).
			if len(sl.pts) > 0 {
				if err := dropOverviews(tx, r.id, sl.sum.MinStep, sl.sum.MaxStep); err != nil {
					return err
				}
			}
		}
		newPoints += int64(len(sl.pts))
	}
	if err := s.limits.CheckRun(tracking.RunUsage{MetricKeys: st.keys, MetricSteps: st.points}, tracking.RunUsage{MetricKeys: newKeys, MetricSteps: newPoints}); err != nil {
		return err
	}
	if newPoints == 0 {
		return nil // every point was already stored: a client retry
	}
	// New series first: their chunks need their ids.
	for _, sl := range slices {
		if r := state[sl.key]; r.isNew && len(sl.pts) > 0 {
			if err := insertSeries(tx, st, sl, r); err != nil {
				return err
			}
			r.latest, r.latestCtx = sl.sum.Last, sl.ctx
		}
	}
	var chunks []chunkRow
	for _, sl := range slices {
		if len(sl.pts) == 0 {
			continue
		}
		r := state[sl.key]
		chunks = append(chunks, chunkRow{seriesID: r.id, sl: sl})
		if metrics.Compare(sl.sum.Last, r.latest) > 0 {
			r.latest, r.latestCtx = sl.sum.Last, sl.ctx
		}
		r.maxStep = max(r.maxStep, sl.sum.MaxStep)
		// Compaction builds overviews; series written in full chunks,
		// which it never merges, get one every overview's worth of points.
		per := int64(s.opts.OverviewChunks * s.opts.ChunkPoints)
		if r.pointCount/per != (r.pointCount+int64(len(sl.pts)))/per {
			tx.markCompaction(r.id)
		}
		r.pointCount += int64(len(sl.pts))
		if len(sl.pts) < s.opts.ChunkPoints {
			r.smallChunks++
			r.lastSmall = int64(len(sl.pts))
		}
		r.dirty = true
	}
	if err := insertChunks(tx, chunks); err != nil {
		return err
	}
	var dirty []*seriesRow
	for _, r := range state {
		if r.dirty {
			dirty = append(dirty, r)
			if s.opts.compactDue(r.smallChunks, r.lastSmall) {
				tx.markCompaction(r.id)
			}
		}
	}
	if err := updateSeriesRows(tx, dirty); err != nil {
		return err
	}
	st.points += newPoints
	st.keys += newKeys
	// This update of the run's row is also what records, through its
	// trigger, that the run's latest metric values changed, for the
	// search index (runsearch/index.go): every write to metric_series' latest
	// values must come with it, in the same transaction.
	_, err = tx.exec(`UPDATE runs SET metric_points = ?, metric_keys = ? WHERE run_pk = ?`, st.points, st.keys, st.pk)
	return sqlError(err, "update run counters")
}

// maxRowsPerStatement bounds multi-row statements (SQLite allows 32766
// parameters; a chunk row has 12).
const maxRowsPerStatement = 256

// loadSeriesRows reads the series rows of the slices' keys in one query
// (a few, for very many keys). Keys without a row come back as new. The
// map and its rows are the writer's scratch (writeScratch), valid until
// the next call.
func loadSeriesRows(tx *wtx, runPK int64, slices []*slice) (map[string]*seriesRow, error) {
	sc := &tx.w.scratch
	if sc.state == nil {
		sc.state = map[string]*seriesRow{}
	}
	state := sc.state
	clear(state)
	// One array for the rows, sized first: the map points into it.
	sc.rows = slices0(sc.rows, len(slices))
	keys := sc.keys[:0]
	for _, sl := range slices {
		if state[sl.key] == nil {
			r := &sc.rows[len(keys)]
			*r = seriesRow{isNew: true, maxStep: math.MinInt64}
			state[sl.key] = r
			keys = append(keys, sl.key)
		}
	}
	sc.keys = keys
	defer clear(sc.keys) // the request's strings
	// The scan's destinations, for every row: declared in the loop, they
	// were allocated for each row (database/sql takes their addresses).
	var (
		key                     sql.RawBytes
		r                       seriesRow
		v                       sql.NullFloat64
		isNaN                   bool
		model, dsName, dsDigest sql.NullString
	)
	for start := 0; start < len(keys); start += maxRowsPerStatement {
		part := keys[start:min(start+maxRowsPerStatement, len(keys))]
		args := append(tx.args(1+len(part)), runPK)
		for _, k := range part {
			args = append(args, k)
		}
		q := tx.text(textLoadSeries, len(part), func() string {
			return `SELECT key, series_id, step, timestamp, value, is_nan, model_id, dataset_name, dataset_digest, max_step, point_count, small_chunks
			FROM metric_series WHERE run_pk = ? AND key IN (` + sqlrow.Placeholders(len(part)) + `)`
		})
		rows, err := tx.query(q, args...)
		tx.doneArgs(args)
		if err != nil {
			return nil, sqlError(err, "read metric series")
		}
		for rows.Next() {
			r = seriesRow{}
			if err := rows.Scan(&key, &r.id, &r.latest.Step, &r.latest.TimestampMs, &v, &isNaN, &model, &dsName, &dsDigest, &r.maxStep, &r.pointCount, &r.smallChunks); err != nil {
				rows.Close()
				return nil, sqlError(err, "read metric series")
			}
			r.latest.Value = v.Float64
			if isNaN {
				r.latest.Value = math.NaN()
			}
			r.latestCtx = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
			*state[string(key)] = r
		}
		if err := rows.Close(); err != nil {
			return nil, sqlError(err, "read metric series")
		}
		if err := rows.Err(); err != nil {
			return nil, sqlError(err, "read metric series")
		}
	}
	return state, nil
}

// slices0 returns s with length n, its elements zero.
func slices0[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

type chunkRow struct {
	seriesID int64
	sl       *slice
}

const chunkCols = `(series_id, min_step, max_step, min_ts, max_ts, count, model_id, dataset_name, dataset_digest, summary, data, sketch)`

// insertChunks inserts chunk rows with multi-row INSERTs.
func insertChunks(tx *wtx, chunks []chunkRow) error {
	sc := &tx.w.scratch
	for start := 0; start < len(chunks); start += maxRowsPerStatement {
		part := chunks[start:min(start+maxRowsPerStatement, len(chunks))]
		args := tx.args(12 * len(part))
		// The summaries share one buffer, which outlives the statement
		// only in the writer's scratch.
		sums := slices.Grow(sc.sums[:0], summarySize*len(part))
		for _, c := range part {
			sl := c.sl
			var sketch any
			if sl.sketch != nil {
				sketch = sl.sketch
			}
			at := len(sums)
			sums = appendSummary(sums, sl.sum)
			args = append(args, c.seriesID, sl.sum.MinStep, sl.sum.MaxStep, sl.sum.MinTimestampMs, sl.sum.MaxTimestampMs, sl.sum.Count,
				nullString(sl.ctx.ModelID), nullString(sl.ctx.DatasetName), nullString(sl.ctx.DatasetDigest),
				sums[at:len(sums):len(sums)], sl.data, sketch)
		}
		sc.sums = sums
		q := tx.text(textInsertChunks, len(part), func() string {
			return `INSERT INTO metric_chunks ` + chunkCols + ` VALUES ` + rowPlaceholders(len(part), 12)
		})
		_, err := tx.exec(q, args...)
		tx.doneArgs(args)
		if err != nil {
			return sqlError(err, "store metric chunks")
		}
	}
	return nil
}

// updateSeriesRows writes the new state of existing series rows, many
// rows per statement (UPDATE ... FROM VALUES).
func updateSeriesRows(tx *wtx, rows []*seriesRow) error {
	for start := 0; start < len(rows); start += maxRowsPerStatement {
		part := rows[start:min(start+maxRowsPerStatement, len(rows))]
		args := tx.args(11 * len(part))
		for _, r := range part {
			l := r.latest
			args = append(args, r.id, l.Step, l.TimestampMs, nanToNull(l.Value), math.IsNaN(l.Value),
				nullString(r.latestCtx.ModelID), nullString(r.latestCtx.DatasetName), nullString(r.latestCtx.DatasetDigest),
				r.maxStep, r.pointCount, r.smallChunks)
		}
		q := tx.text(textUpdateSeries, len(part), func() string {
			return `UPDATE metric_series SET step = v.column2, timestamp = v.column3, value = v.column4, is_nan = v.column5,
				model_id = v.column6, dataset_name = v.column7, dataset_digest = v.column8,
				max_step = v.column9, point_count = v.column10, small_chunks = v.column11
			FROM (VALUES ` + tx.typedRows(len(part), seriesUpdateTypes) + `) AS v WHERE metric_series.series_id = v.column1`
		})
		_, err := tx.exec(q, args...)
		tx.doneArgs(args)
		if err != nil {
			return sqlError(err, "update metric series")
		}
	}
	return nil
}

// seriesUpdateTypes are the SQL types of the VALUES columns of
// updateSeriesRows.
var seriesUpdateTypes = []string{"BIGINT", "BIGINT", "BIGINT", "DOUBLE PRECISION", "BIGINT", "TEXT", "TEXT", "TEXT", "BIGINT", "BIGINT", "BIGINT"}

// rowPlaceholders returns "(?,...,?),(...)" for n rows of k columns.
func rowPlaceholders(n, k int) string {
	row := "(" + sqlrow.Placeholders(k) + ")"
	return strings.Repeat(row+",", n-1) + row
}

func insertSeries(tx *wtx, st *runState, sl *slice, r *seriesRow) error {
	l := sl.sum.Last
	err := tx.queryRow(`INSERT INTO metric_series
		(run_pk, experiment_id, key, step, timestamp, value, is_nan, model_id, dataset_name, dataset_digest, max_step, point_count, small_chunks)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0) RETURNING series_id`,
		st.pk, st.experimentID, sl.key, l.Step, l.TimestampMs, nanToNull(l.Value), math.IsNaN(l.Value),
		nullString(sl.ctx.ModelID), nullString(sl.ctx.DatasetName), nullString(sl.ctx.DatasetDigest), sl.sum.MaxStep).Scan(&r.id)
	if err != nil {
		return sqlError(err, "create metric series")
	}
	r.isNew = false
	return nil
}

// dropStored removes from sl the points the series already holds, and
// re-encodes sl if any were dropped. Only chunks overlapping sl in both
// step and time are read: the common case (new steps beyond the stored
// ones) never reaches here.
//
// The chunks that meet sl's steps [a, b] are found in four parts, by where
// they start, each a range of an index: before a and reaching a; at a and
// going on past it; after a, up to b (span index); and chunks of step a
// alone, by time (metric_chunks_one_step). A series logged without steps
// (every point at step 0, as log_metric without a step does) has
// thousands of chunks at step 0, which the span index cannot tell apart;
// each request of such a series reads only the chunks of its moments.
// The first part scans the span index's entries of every chunk that
// starts before a (the table is read only for those that reach a): a
// request that lands among a stepped series' stored steps (a retry, or
// writers racing on one run) reads the series' index entries, 20 bytes
// a chunk.
func (s *db) dropStored(tx *wtx, seriesID int64, sl *slice) error {
	a, b, t0, t1 := sl.sum.MinStep, sl.sum.MaxStep, sl.sum.MinTimestampMs, sl.sum.MaxTimestampMs
	span, oneStep := s.indexedBy("metric_chunks_span"), s.indexedBy("metric_chunks_one_step")
	rows, err := tx.query(`SELECT data FROM metric_chunks`+span+` WHERE series_id = ? AND min_step < ? AND max_step >= ? AND max_ts >= ? AND min_ts <= ?
		UNION ALL SELECT data FROM metric_chunks`+span+` WHERE series_id = ? AND min_step = ? AND max_step > ? AND max_ts >= ? AND min_ts <= ?
		UNION ALL SELECT data FROM metric_chunks`+span+` WHERE series_id = ? AND min_step > ? AND min_step <= ? AND max_ts >= ? AND min_ts <= ?
		UNION ALL SELECT data FROM metric_chunks`+oneStep+` WHERE series_id = ? AND min_step = max_step AND min_step = ? AND max_ts >= ? AND min_ts <= ?`,
		seriesID, a, a, t0, t1,
		seriesID, a, a, t0, t1,
		seriesID, a, b, t0, t1,
		seriesID, a, t0, t1)
	if err != nil {
		return sqlError(err, "read metric chunks")
	}
	var stored []metrics.Point
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			rows.Close()
			return sqlError(err, "read metric chunk")
		}
		stored, err = metrics.DecodeChunk(stored, data)
		if err != nil {
			rows.Close()
			return errs.Wrap(errs.Internal, fmt.Errorf("series %d: %w", seriesID, err), "stored metric data is corrupt")
		}
	}
	if err := rows.Close(); err != nil {
		return sqlError(err, "read metric chunks")
	}
	if err := rows.Err(); err != nil {
		return sqlError(err, "read metric chunks")
	}
	if len(stored) == 0 {
		return nil
	}
	metrics.SortPoints(stored)
	kept := sl.pts[:0]
	j := 0
	for _, p := range sl.pts {
		for j < len(stored) && metrics.Compare(stored[j], p) < 0 {
			j++
		}
		if j < len(stored) && metrics.Equal(stored[j], p) {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == len(sl.pts) {
		return nil
	}
	sl.pts = kept
	if len(kept) == 0 {
		return nil
	}
	return sl.encode(s.sketchMin())
}

func nanToNull(v float64) any {
	if math.IsNaN(v) {
		return nil
	}
	return v
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Summary blobs hold four points (first, lowest, highest, last), each as
// step, timestamp and value bits: 96 bytes, big-endian.
const summarySize = 4 * 24

func encodeSummary(s metrics.Summary) []byte {
	return appendSummary(make([]byte, 0, summarySize), s)
}

// appendSummary appends the summary blob of s to b.
func appendSummary(b []byte, s metrics.Summary) []byte {
	for _, p := range [4]metrics.Point{s.First, s.Low, s.High, s.Last} {
		b = binary.BigEndian.AppendUint64(b, uint64(p.Step))
		b = binary.BigEndian.AppendUint64(b, uint64(p.TimestampMs))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.Value))
	}
	return b
}

func decodeSummary(b []byte, s *metrics.Summary) error {
	if len(b) != summarySize {
		return fmt.Errorf("summary has %d bytes, want %d", len(b), summarySize)
	}
	var pts [4]metrics.Point
	for i := range pts {
		o := i * 24
		pts[i] = metrics.Point{
			Step:        int64(binary.BigEndian.Uint64(b[o:])),
			TimestampMs: int64(binary.BigEndian.Uint64(b[o+8:])),
			Value:       math.Float64frombits(binary.BigEndian.Uint64(b[o+16:])),
		}
	}
	s.First, s.Low, s.High, s.Last = pts[0], pts[1], pts[2], pts[3]
	return nil
}
