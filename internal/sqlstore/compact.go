package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
)

// Compaction merges the small chunks of a series (fresh writes land as one
// small chunk per request) into chunks of up to ChunkPoints points, which
// compress better and read faster.
//
// It runs in its own goroutine so that its CPU work (decoding, merging,
// encoding) never holds up the writer: it reads the small chunks through
// the read pool, builds their replacement, and hands the writer one op
// that swaps the old chunks for the new ones, for every series it took up
// (compactBatch), inside the next group transaction. Only compaction
// deletes chunks, and one compactor runs per store, but Compact and other
// replicas compact too: each swap checks that the chunks it read are still
// there and leaves its series alone if they are not.
type compactor struct {
	s       *db
	log     *slog.Logger
	mu      sync.Mutex
	pending map[int64]struct{}
	// hold is held while the loop compacts; tests hold it to
	// keep background compaction away (HoldCompaction).
	hold sync.Mutex
	// swept is each series' count of small chunks at the last sweep.
	swept    map[int64]int64
	wake     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	interval time.Duration
}

func newCompactor(s *db, log *slog.Logger) *compactor {
	return &compactor{
		s:        s,
		log:      log,
		pending:  map[int64]struct{}{},
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		interval: 5 * time.Second,
	}
}

// request queues series for compaction; it never blocks.
func (c *compactor) request(ids []int64) {
	c.mu.Lock()
	for _, id := range ids {
		c.pending[id] = struct{}{}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// sweep queues the series with small chunks that wrote none since the
// last sweep: those still logging reach the threshold on their own, and
// merging them early would rewrite their last chunk once more.
func (c *compactor) sweep(ctx context.Context) error {
	rows, err := c.s.rdb.QueryContext(ctx, `SELECT series_id, small_chunks FROM metric_series WHERE small_chunks >= 2 LIMIT 65536`)
	if err != nil {
		return sqlError(err, "list series to compact")
	}
	defer rows.Close()
	seen := make(map[int64]int64, len(c.swept))
	var quiet []int64
	for rows.Next() {
		var id, small int64
		if err := rows.Scan(&id, &small); err != nil {
			return sqlError(err, "list series to compact")
		}
		seen[id] = small
		if before, ok := c.swept[id]; ok && before == small && len(quiet) < 256 {
			quiet = append(quiet, id)
		}
	}
	if err := rows.Err(); err != nil {
		return sqlError(err, "list series to compact")
	}
	c.swept = seen
	c.request(quiet)
	return nil
}

// take returns the series queued so far and empties the queue.
func (c *compactor) take() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	clear(c.pending)
	return ids
}

func (c *compactor) start() { go c.loop() }

func (c *compactor) stop() {
	close(c.quit)
	<-c.done
}

func (c *compactor) loop() {
	defer close(c.done)
	sweep := time.NewTicker(c.interval)
	defer sweep.Stop()
	ctx := context.Background()
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		case <-sweep.C:
			// Series that stopped logging before reaching the threshold;
			// with several replicas, one sweeps at a time.
			if !c.s.leader(ctx, "metric-compaction", c.interval) {
				continue
			}
			if err := c.sweep(ctx); err != nil {
				c.log.Error("compaction sweep", "err", err)
			}
		}
		for {
			select {
			case <-c.quit:
				return
			default:
			}
			ids := c.take()
			if len(ids) == 0 {
				break
			}
			c.hold.Lock()
			err := c.s.compactBatch(ctx, ids)
			c.hold.Unlock()
			if err != nil {
				c.log.Error("compaction failed", "series", len(ids), "err", err)
			}
		}
	}
}

// compactDue says whether a series' small chunks are worth merging now,
// given how many there are and the points of the one just written (0 when
// the request wrote none), taken as typical: at least CompactAfter chunks,
// holding about a full chunk's points, or sixteen times CompactAfter chunks
// whatever they hold. With no small chunk written (full chunks logged after
// small ones) the count alone decides.
//
// A merge rewrites the series' last, partly filled chunk together with the
// small ones, so merging a few points at a time rewrites that chunk over
// and over: a run logging one point a step, merged every 16 steps, had
// each point decoded and encoded again some 128 times before its chunk
// filled.
func (o Options) compactDue(smallChunks, lastSmall int64) bool {
	if smallChunks < int64(o.CompactAfter) {
		return false
	}
	return lastSmall == 0 || smallChunks*lastSmall >= int64(o.ChunkPoints) || smallChunks >= 16*int64(o.CompactAfter)
}

// errCompactionRace means the chunks compaction read have changed; the
// swap is abandoned and the series stays as it was (compactSeries reads
// it again).
var errCompactionRace = errors.New("compaction: chunks changed while compacting")

// compactGroup is chunks of one context of a series that compaction merges
// into one run of chunks, and their points.
type compactGroup struct {
	ctx tracking.MetricContext
	ids []int64
	// lo and hi are the group's steps: the chunks written in its place
	// lie within them, and so do the overviews they make stale.
	lo, hi int64
	// atEnd says no chunk of the context follows the group: its last
	// chunk may still grow and counts as small.
	atEnd bool
	pts   []metrics.Point
}

// compactSeries merges the small chunks of one series, context by context,
// together with every chunk they overlap, so that the chunks it writes
// overlap no other chunk of their context: reads of disjoint chunks decode
// them one after the other, while overlapping ones must be merged point by
// point. Points that arrive out of order (several writers, a retried
// request) make a small chunk that falls inside a full one. It then builds
// the series' missing overviews (overview.go).
//
// When another compaction (the background one, Compact, another replica)
// swapped some of the same chunks first, it reads the series again and
// merges what that one left, so that a series is compact when Compact
// returns; after a few lost races it leaves the rest to the next round.
func (s *db) compactSeries(ctx context.Context, seriesID int64) error {
	var uncovered int
	for attempt := 0; ; attempt++ {
		groups, smallSeen, unc, err := s.readCompactGroups(ctx, seriesID)
		if err != nil {
			return err
		}
		uncovered = unc
		err = s.swapCompacted(ctx, seriesID, groups, smallSeen)
		if err == nil {
			break
		}
		if !errors.Is(err, errCompactionRace) {
			return err
		}
		if attempt == 4 {
			s.log.Debug("compaction abandoned", "series", seriesID)
			return nil
		}
	}
	// Merging never adds chunks: with no more than an overview's worth
	// outside the overviews (the last one never joins), none can be built.
	if uncovered <= s.opts.OverviewChunks {
		return nil
	}
	return s.buildOverviews(ctx, seriesID)
}

// compactWavePoints bounds the points compactBatch reads for one swap, so
// that the group carrying it does not hold up the requests beside it for
// long.
const compactWavePoints = 256 << 10

// compactBatch compacts several series, swapping them in together: one
// write for as many series as make compactWavePoints. A request writes
// the chunks of its series side by side, so the small chunks of a run's
// series share table pages; swapped out in one transaction they free
// those pages whole, where one write per series rewrote each page once
// for every series on it. One write per wave, rather than one per series,
// also lets a single compactor keep up with the writer, which commits a
// group at a time. Series whose chunks another compaction swapped first
// are compacted again on their own (compactSeries).
func (s *db) compactBatch(ctx context.Context, ids []int64) error {
	// Series of one run were created together and have neighbouring
	// ids: in id order they fall into the same wave.
	slices.Sort(ids)
	for len(ids) > 0 {
		// One snapshot for the wave's reads: a read transaction starts
		// with a cold page cache after any write, and the series of a wave
		// share the upper pages of the chunk table and its index. The
		// encoding waits until it is closed, so as not to hold back the
		// checkpoints.
		tx, err := s.beginCompactRead(ctx)
		if err != nil {
			return err
		}
		type read struct {
			id        int64
			groups    []*compactGroup
			smallSeen int64
			uncovered int
		}
		var reads []read
		points := 0
		for len(ids) > 0 && points < compactWavePoints {
			r := read{id: ids[0]}
			ids = ids[1:]
			if r.groups, r.smallSeen, r.uncovered, err = s.readCompactGroupsTx(ctx, tx, r.id); err != nil {
				tx.Rollback()
				return err
			}
			for _, g := range r.groups {
				points += len(g.pts)
			}
			reads = append(reads, r)
		}
		tx.Rollback()
		var wave []*swapPlan
		for _, r := range reads {
			p, err := s.planSwap(r.id, r.groups, r.smallSeen)
			if err != nil {
				return err
			}
			if p == nil {
				if r.uncovered > s.opts.OverviewChunks {
					if err := s.buildOverviews(ctx, r.id); err != nil {
						return err
					}
				}
				continue
			}
			p.uncovered = r.uncovered
			wave = append(wave, p)
		}
		if len(wave) == 0 {
			continue
		}
		raced, err := s.swapWave(ctx, wave)
		if err != nil {
			return err
		}
		for _, p := range wave {
			if slices.Contains(raced, p.seriesID) {
				if err := s.compactSeries(ctx, p.seriesID); err != nil {
					return err
				}
				continue
			}
			// Merging never adds chunks: with no more than an
			// overview's worth outside the overviews (the last one
			// never joins), none can be built.
			if p.uncovered > s.opts.OverviewChunks {
				if err := s.buildOverviews(ctx, p.seriesID); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// swapWave applies the swaps of a wave in one write and returns the series
// it left alone because another compaction had swapped some of their
// chunks first.
func (s *db) swapWave(ctx context.Context, wave []*swapPlan) ([]int64, error) {
	var raced []int64
	err := s.w.do(ctx, func(tx *wtx) error {
		raced = raced[:0] // the op runs again after a collision
		for _, p := range wave {
			ok, err := applySwap(tx, p)
			if err != nil {
				return err
			}
			if !ok {
				raced = append(raced, p.seriesID)
			}
		}
		return nil
	})
	return raced, err
}

// swapPlan is one series' compaction, ready for the writer: the chunks
// that replace its groups' chunks, and what it takes off the series' count
// of small chunks.
type swapPlan struct {
	seriesID int64
	groups   []*compactGroup
	rows     []chunkRow
	removed  int64
	// uncovered is the number of chunks no overview covered when the
	// groups were read.
	uncovered int
}

// planSwap encodes each group's points in chunks of up to ChunkPoints. The
// swap lowers the series' count of small chunks by the smallSeen it had
// when they were listed, less the small chunks that can still grow. It
// returns nil when there is nothing to write.
func (s *db) planSwap(seriesID int64, groups []*compactGroup, smallSeen int64) (*swapPlan, error) {
	p := &swapPlan{seriesID: seriesID, groups: groups}
	var growing int64
	for _, g := range groups {
		metrics.SortPoints(g.pts)
		g.pts = metrics.DedupSorted(g.pts)
		for start := 0; start < len(g.pts); start += s.opts.ChunkPoints {
			part := g.pts[start:min(start+s.opts.ChunkPoints, len(g.pts))]
			sl := &slice{ctx: g.ctx, pts: part, sum: metrics.Summarize(part)}
			var err error
			if sl.data, err = metrics.AppendChunk(nil, part); err != nil {
				return nil, errs.Wrap(errs.Internal, err, "compaction: encode")
			}
			if err := sl.encodeSketch(s.sketchMin()); err != nil {
				return nil, err
			}
			p.rows = append(p.rows, chunkRow{seriesID: seriesID, sl: sl})
			if len(part) < s.opts.ChunkPoints && g.atEnd {
				growing++
			}
		}
	}
	if len(groups) == 0 {
		// Nothing to merge: the small chunks there are cannot be merged
		// (a lone one between full chunks, or each context's last one)
		// until more points come, which count again.
		growing = 0
		if smallSeen == 0 {
			return nil, nil
		}
	}
	p.removed = smallSeen - growing
	return p, nil
}

// swapCompacted writes a series' compacted groups in place of their
// chunks in a write of its own; errCompactionRace says the chunks changed.
func (s *db) swapCompacted(ctx context.Context, seriesID int64, groups []*compactGroup, smallSeen int64) error {
	p, err := s.planSwap(seriesID, groups, smallSeen)
	if err != nil || p == nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		ok, err := applySwap(tx, p)
		if err == nil && !ok {
			err = errCompactionRace
		}
		return err
	})
}

// applySwap replaces the chunks of p's groups with p's chunks. It writes
// nothing and returns false when any of those chunks is gone: another
// compaction swapped it first.
func applySwap(tx *wtx, p *swapPlan) (bool, error) {
	if err := lockSeriesRun(tx, p.seriesID); err != nil {
		return false, err
	}
	var ids []any
	for _, g := range p.groups {
		for _, id := range g.ids {
			ids = append(ids, id)
		}
	}
	for start := 0; start < len(ids); start += maxRowsPerStatement {
		part := ids[start:min(start+maxRowsPerStatement, len(ids))]
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM metric_chunks WHERE chunk_id IN (`+sqlrow.Placeholders(len(part))+`)`, part...).Scan(&n); err != nil {
			return false, sqlError(err, "compaction: check chunks")
		}
		if n != len(part) {
			return false, nil
		}
	}
	// The new chunks go in before the old ones are deleted. SQLite
	// numbers a new row one past the largest chunk_id left, so deleting
	// first could hand the new chunks the ids just deleted; a compaction
	// that had read those ids before would then find "its" chunks all
	// there and delete chunks holding points it never read
	// (TestCompactionRaceKeepsPoints). Inserted first, new chunks are
	// numbered past every chunk that exists.
	if err := insertChunks(tx, p.rows); err != nil {
		return false, err
	}
	for _, g := range p.groups {
		args := make([]any, len(g.ids))
		for i, id := range g.ids {
			args[i] = id
		}
		res, err := tx.exec(`DELETE FROM metric_chunks WHERE chunk_id IN (`+sqlrow.Placeholders(len(args))+`)`, args...)
		if err != nil {
			return false, sqlError(err, "compaction: delete chunks")
		}
		if n, _ := res.RowsAffected(); n != int64(len(g.ids)) {
			// Checked above under the same lock: cannot happen, and
			// fails the whole write if it does.
			return false, errCompactionRace
		}
		if err := dropOverviews(tx, p.seriesID, g.lo, g.hi); err != nil {
			return false, err
		}
	}
	// Chunks written since the listing counted themselves; the counter
	// never goes below 0 (it is a trigger, not an inventory).
	_, err := tx.exec(`UPDATE metric_series SET small_chunks = CASE WHEN small_chunks > ? THEN small_chunks - ? ELSE 0 END WHERE series_id = ?`, p.removed, p.removed, p.seriesID)
	return true, sqlError(err, "compaction: update series")
}

// listedChunk is a chunk of a listing made for compaction or overviews.
type listedChunk struct {
	id, minStep, maxStep, count int64
	ctx                         tracking.MetricContext
	// data is the chunk's encoding for a small chunk, nil for a full one.
	data []byte
}

// readCompactGroups lists the chunks of a series and reads, from one
// snapshot, those compaction merges, with the number of small chunks
// listed and of chunks no overview covers.
//
// Per context, chunks whose step ranges overlap, directly or through
// others, form a component; neighbouring components (in step order, no
// other chunk of the context between them) that are not a single full
// chunk make a group, merged when it holds two chunks or more. A group
// written back in chunks of ChunkPoints overlaps no other chunk of its
// context: its steps lie between the full chunks around it. A small chunk
// boxed in by full chunks is left alone until points next to it arrive.
// Chunks of other contexts may overlap any of them: a reader merges
// contexts anyway.
func (s *db) readCompactGroups(ctx context.Context, seriesID int64) (groups []*compactGroup, smallSeen int64, uncovered int, err error) {
	tx, err := s.beginCompactRead(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	defer tx.Rollback()
	return s.readCompactGroupsTx(ctx, tx, seriesID)
}

// beginCompactRead starts the snapshot compaction reads series from.
func (s *db) beginCompactRead(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	return tx, sqlError(err, "compaction: begin read")
}

// readCompactGroupsTx is readCompactGroups in a snapshot of the caller's.
func (s *db) readCompactGroupsTx(ctx context.Context, tx *sql.Tx, seriesID int64) (groups []*compactGroup, smallSeen int64, uncovered int, err error) {
	// The series' count of small chunks as of the listing: the swap takes
	// it off and adds back what can still grow, so that chunks written
	// since count on, and a small chunk that cannot be merged (a lone
	// context, one boxed in by full chunks) is taken off once, not at
	// every compaction (counting the listed ones took it off again each
	// time, and the count reached 0 with mergeable chunks left).
	if err := tx.QueryRowContext(ctx, `SELECT small_chunks FROM metric_series WHERE series_id = ?`, seriesID).Scan(&smallSeen); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, 0, sqlError(err, "compaction: read series")
	}
	full := int64(s.opts.ChunkPoints)
	all, err := listChunks(ctx, tx, seriesID, full, smallSeen)
	if err != nil {
		return nil, 0, 0, err
	}
	uncovered = len(all)
	if uncovered > s.opts.OverviewChunks {
		if uncovered, err = countUncovered(ctx, tx, seriesID, all); err != nil {
			return nil, 0, 0, err
		}
	}
	var contexts []tracking.MetricContext
	byCtx := map[tracking.MetricContext][]*listedChunk{}
	for i := range all {
		c := &all[i]
		if _, ok := byCtx[c.ctx]; !ok {
			contexts = append(contexts, c.ctx)
		}
		byCtx[c.ctx] = append(byCtx[c.ctx], c)
	}
	group := map[int64]*compactGroup{}
	for _, mc := range contexts {
		cs := byCtx[mc]
		var run []*listedChunk
		flush := func(atEnd bool) {
			if len(run) >= 2 {
				g := &compactGroup{ctx: mc, lo: math.MaxInt64, hi: math.MinInt64, atEnd: atEnd}
				n := int64(0)
				for _, c := range run {
					g.ids = append(g.ids, c.id)
					g.lo, g.hi = min(g.lo, c.minStep), max(g.hi, c.maxStep)
					group[c.id] = g
					n += c.count
				}
				// Room for every point the chunks hold, so that decoding
				// them one after the other does not grow the slice (a
				// group is some forty request-sized chunks).
				g.pts = make([]metrics.Point, 0, n)
				groups = append(groups, g)
			}
			run = run[:0]
		}
		for i := 0; i < len(cs); {
			// cs[i:j] is a component: listings are in min_step order.
			j, end := i+1, cs[i].maxStep
			for j < len(cs) && cs[j].minStep <= end {
				end = max(end, cs[j].maxStep)
				j++
			}
			if j == i+1 && cs[i].count >= full {
				flush(false)
			} else {
				run = append(run, cs[i:j]...)
			}
			i = j
		}
		flush(true)
	}
	// A full chunk merges only when it overlaps another; the listing
	// left its data out.
	at := map[int64]int{}
	var ids []any
	for i, c := range all {
		if group[c.id] != nil && c.data == nil {
			at[c.id] = i
			ids = append(ids, c.id)
		}
	}
	for start := 0; start < len(ids); start += maxRowsPerStatement {
		part := ids[start:min(start+maxRowsPerStatement, len(ids))]
		rows, err := tx.QueryContext(ctx, `SELECT chunk_id, data FROM metric_chunks WHERE chunk_id IN (`+sqlrow.Placeholders(len(part))+`)`, part...)
		if err != nil {
			return nil, 0, 0, sqlError(err, "compaction: read chunks")
		}
		for rows.Next() {
			var id int64
			var data []byte
			if err := rows.Scan(&id, &data); err != nil {
				rows.Close()
				return nil, 0, 0, sqlError(err, "compaction: read chunks")
			}
			all[at[id]].data = data
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, 0, 0, sqlError(err, "compaction: read chunks")
		}
	}
	// Decode in the listing's order, so that each group's points come
	// sorted when its chunks are disjoint (SortPoints then only checks
	// them): by chunk_id, a chunk compaction wrote comes after the small
	// chunks written while it was being built.
	for _, c := range all {
		if g := group[c.id]; g != nil {
			if g.pts, err = metrics.DecodeChunk(g.pts, c.data); err != nil {
				return nil, 0, 0, errs.Wrap(errs.Internal, fmt.Errorf("series %d chunk %d: %w", seriesID, c.id, err), "stored metric data is corrupt")
			}
		}
	}
	return groups, smallSeen, uncovered, nil
}

// countUncovered returns how many of a series' chunks (all, in chunkOrder)
// lie outside its overviews.
func countUncovered(ctx context.Context, tx *sql.Tx, seriesID int64, all []listedChunk) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT min_step, max_step FROM metric_overviews WHERE series_id = ? ORDER BY min_step`, seriesID)
	if err != nil {
		return 0, sqlError(err, "compaction: list overviews")
	}
	n, i := 0, 0
	for rows.Next() {
		var lo, hi int64
		if err := rows.Scan(&lo, &hi); err != nil {
			rows.Close()
			return 0, sqlError(err, "compaction: list overviews")
		}
		for ; i < len(all) && all[i].minStep < lo; i++ {
			n++
		}
		for i < len(all) && all[i].minStep <= hi {
			i++
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, sqlError(err, "compaction: list overviews")
	}
	return n + len(all) - i, nil
}

// listChunks lists the chunks of a series in chunkOrder, with the data of
// those of fewer than small points: compaction merges them, and reading
// their data in the listing saves looking each up again. A full chunk's
// data, often on overflow pages, is not read. smallHint, the series' count
// of small chunks, sizes the results.
func listChunks(ctx context.Context, tx *sql.Tx, seriesID, small, smallHint int64) ([]listedChunk, error) {
	rows, err := tx.QueryContext(ctx, `SELECT chunk_id, min_step, max_step, count, model_id, dataset_name, dataset_digest,
			CASE WHEN count < ? THEN data END
		FROM metric_chunks WHERE series_id = ? `+chunkOrder, small, seriesID)
	if err != nil {
		return nil, sqlError(err, "list metric chunks")
	}
	// Room for the small chunks (a request's hundred points take about a
	// kilobyte) and a few full ones, so that the listing of a series due
	// for compaction is not grown as it is read.
	hint := int(min(max(smallHint, 0), 1024))
	var (
		all  = make([]listedChunk, 0, hint+16)
		buf  = make([]byte, 0, hint<<10) // the small chunks' data, end to end
		ends = make([]int, 0, hint+16)   // where each chunk's data ends in buf; -1 for none
		// Scanned into once for all rows: their addresses escape.
		c                       listedChunk
		model, dsName, dsDigest sql.NullString
		data                    sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&c.id, &c.minStep, &c.maxStep, &c.count, &model, &dsName, &dsDigest, &data); err != nil {
			rows.Close()
			return nil, sqlError(err, "list metric chunks")
		}
		c.ctx = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
		all = append(all, c)
		end := -1
		if data != nil {
			buf = append(buf, data...)
			end = len(buf)
		}
		ends = append(ends, end)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, sqlError(err, "list metric chunks")
	}
	start := 0
	for i, end := range ends {
		if end >= 0 {
			all[i].data = buf[start:end:end]
			start = end
		}
	}
	return all, nil
}

// compactionCandidates lists every series with a small chunk (Compact:
// merge everything now; even one may overlap a full chunk).
func (s *db) compactionCandidates(ctx context.Context) ([]int64, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT series_id FROM metric_series WHERE small_chunks >= 1`)
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
