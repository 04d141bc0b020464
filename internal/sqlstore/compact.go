package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// Compaction merges the small chunks of a series (fresh writes land as one
// small chunk per request) into chunks of up to ChunkPoints points, which
// compress better and read faster.
//
// It runs in its own goroutine so that its CPU work (decoding, merging,
// encoding) never holds up the writer: it reads the small chunks through
// the read pool, builds their replacement, and hands the writer one small
// op that swaps the old chunks for the new ones inside the next group
// transaction. Only compaction deletes chunks, and it compacts one series
// at a time, so the chunks it read are still there when the swap runs; the
// swap checks anyway and gives up if they are not.
type compactor struct {
	s       *db
	log     *slog.Logger
	mu      sync.Mutex
	pending map[int64]struct{}
	// hold is held while the loop compacts a series; tests hold it to
	// keep background compaction away (HoldCompaction).
	hold     sync.Mutex
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

func (c *compactor) next() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.pending {
		delete(c.pending, id)
		return id, true
	}
	return 0, false
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
			ids, err := c.s.compactionCandidatesN(ctx, 256)
			if err != nil {
				c.log.Error("compaction sweep", "err", err)
				continue
			}
			c.request(ids)
		}
		for {
			select {
			case <-c.quit:
				return
			default:
			}
			id, ok := c.next()
			if !ok {
				break
			}
			c.hold.Lock()
			err := c.s.compactSeries(ctx, id)
			c.hold.Unlock()
			if err != nil {
				c.log.Error("compaction failed", "series", id, "err", err)
			}
		}
	}
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

// swapCompacted writes each group's points in chunks of up to ChunkPoints
// in place of the group's chunks, and lowers the series' count of small
// chunks by the smallSeen it had when they were listed, less the small
// chunks that can still grow.
func (s *db) swapCompacted(ctx context.Context, seriesID int64, groups []*compactGroup, smallSeen int64) error {
	var rows []chunkRow
	var growing int64
	for _, g := range groups {
		metrics.SortPoints(g.pts)
		g.pts = metrics.DedupSorted(g.pts)
		for start := 0; start < len(g.pts); start += s.opts.ChunkPoints {
			part := g.pts[start:min(start+s.opts.ChunkPoints, len(g.pts))]
			sl := &slice{ctx: g.ctx, pts: part, sum: metrics.Summarize(part)}
			var err error
			if sl.data, err = metrics.AppendChunk(nil, part); err != nil {
				return errs.Wrap(errs.Internal, err, "compaction: encode")
			}
			if err := sl.encodeSketch(s.sketchMin()); err != nil {
				return err
			}
			rows = append(rows, chunkRow{seriesID: seriesID, sl: sl})
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
			return nil
		}
	}
	err := s.w.do(ctx, func(tx *wtx) error {
		if err := lockSeriesRun(tx, seriesID); err != nil {
			return err
		}
		// The new chunks go in before the old ones are deleted. SQLite
		// numbers a new row one past the largest chunk_id left, so
		// deleting first could hand the new chunks the ids just deleted;
		// a compaction that had read those ids before would then find
		// "its" chunks all there and delete chunks holding points it never
		// read (TestCompactionRaceKeepsPoints). Inserted first, new chunks
		// are numbered past every chunk that exists.
		if err := insertChunks(tx, rows); err != nil {
			return err
		}
		for _, g := range groups {
			args := make([]any, len(g.ids))
			for i, id := range g.ids {
				args[i] = id
			}
			res, err := tx.exec(`DELETE FROM metric_chunks WHERE chunk_id IN (`+placeholders(len(args))+`)`, args...)
			if err != nil {
				return sqlError(err, "compaction: delete chunks")
			}
			if n, _ := res.RowsAffected(); n != int64(len(g.ids)) {
				return errCompactionRace
			}
			if err := dropOverviews(tx, seriesID, g.lo, g.hi); err != nil {
				return err
			}
		}
		// Chunks written since the listing counted themselves; the
		// counter never goes below 0 (it is a trigger, not an inventory).
		removed := smallSeen - growing
		_, err := tx.exec(`UPDATE metric_series SET small_chunks = CASE WHEN small_chunks > ? THEN small_chunks - ? ELSE 0 END WHERE series_id = ?`, removed, removed, seriesID)
		return sqlError(err, "compaction: update series")
	})
	return err
}

// listedChunk is a chunk of a listing made for compaction or overviews.
type listedChunk struct {
	id, minStep, maxStep, count int64
	ctx                         tracking.MetricContext
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
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return nil, 0, 0, sqlError(err, "compaction: begin read")
	}
	defer tx.Rollback()
	// The series' count of small chunks as of the listing: the swap takes
	// it off and adds back what can still grow, so that chunks written
	// since count on, and a small chunk that cannot be merged (a lone
	// context, one boxed in by full chunks) is taken off once, not at
	// every compaction (counting the listed ones took it off again each
	// time, and the count reached 0 with mergeable chunks left).
	if err := tx.QueryRowContext(ctx, `SELECT small_chunks FROM metric_series WHERE series_id = ?`, seriesID).Scan(&smallSeen); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, 0, sqlError(err, "compaction: read series")
	}
	all, err := listChunks(ctx, tx, seriesID, math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, 0, 0, err
	}
	uncovered = len(all)
	if uncovered > s.opts.OverviewChunks {
		if uncovered, err = countUncovered(ctx, tx, seriesID, all); err != nil {
			return nil, 0, 0, err
		}
	}
	full := int64(s.opts.ChunkPoints)
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
				for _, c := range run {
					g.ids = append(g.ids, c.id)
					g.lo, g.hi = min(g.lo, c.minStep), max(g.hi, c.maxStep)
					group[c.id] = g
				}
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
	// Read the groups' chunks.
	var ids []any
	for _, c := range all {
		if group[c.id] != nil {
			ids = append(ids, c.id)
		}
	}
	for start := 0; start < len(ids); start += maxRowsPerStatement {
		part := ids[start:min(start+maxRowsPerStatement, len(ids))]
		rows, err := tx.QueryContext(ctx, `SELECT chunk_id, data FROM metric_chunks WHERE chunk_id IN (`+placeholders(len(part))+`)`, part...)
		if err != nil {
			return nil, 0, 0, sqlError(err, "compaction: read chunks")
		}
		for rows.Next() {
			var id int64
			var data sql.RawBytes
			if err := rows.Scan(&id, &data); err != nil {
				rows.Close()
				return nil, 0, 0, sqlError(err, "compaction: read chunks")
			}
			g := group[id]
			if g.pts, err = metrics.DecodeChunk(g.pts, data); err != nil {
				rows.Close()
				return nil, 0, 0, errs.Wrap(errs.Internal, fmt.Errorf("series %d chunk %d: %w", seriesID, id, err), "stored metric data is corrupt")
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, 0, 0, sqlError(err, "compaction: read chunks")
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

// listChunks lists the chunks of a series with steps in [lo, hi], in
// chunkOrder, without their data.
func listChunks(ctx context.Context, tx *sql.Tx, seriesID, lo, hi int64) ([]listedChunk, error) {
	rows, err := tx.QueryContext(ctx, `SELECT chunk_id, min_step, max_step, count, model_id, dataset_name, dataset_digest FROM metric_chunks
		WHERE series_id = ? AND min_step <= ? AND max_step >= ? `+chunkOrder, seriesID, hi, lo)
	if err != nil {
		return nil, sqlError(err, "list metric chunks")
	}
	var all []listedChunk
	for rows.Next() {
		var c listedChunk
		var model, dsName, dsDigest sql.NullString
		if err := rows.Scan(&c.id, &c.minStep, &c.maxStep, &c.count, &model, &dsName, &dsDigest); err != nil {
			rows.Close()
			return nil, sqlError(err, "list metric chunks")
		}
		c.ctx = tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
		all = append(all, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, sqlError(err, "list metric chunks")
	}
	return all, nil
}

// compactionCandidatesN lists up to n series with at least two small
// chunks; n < 0 (Compact: merge everything now) lists every series with a
// small chunk at all, since even one may overlap a full chunk.
func (s *db) compactionCandidatesN(ctx context.Context, n int) ([]int64, error) {
	least := 2
	if n < 0 {
		n, least = math.MaxInt32, 1
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT series_id FROM metric_series WHERE small_chunks >= ? LIMIT ?`, least, n)
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
