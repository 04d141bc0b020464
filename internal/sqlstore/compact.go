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
	s        *Store
	log      *slog.Logger
	mu       sync.Mutex
	pending  map[int64]struct{}
	wake     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	interval time.Duration
}

func newCompactor(s *Store, log *slog.Logger) *compactor {
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
			if err := c.s.compactSeries(ctx, id); err != nil {
				c.log.Error("compaction failed", "series", id, "err", err)
			}
		}
	}
}

// errCompactionRace means the chunks compaction read have changed; the
// swap is abandoned and the series stays as it was.
var errCompactionRace = errors.New("compaction: chunks changed while compacting")

type compactGroup struct {
	ctx tracking.MetricContext
	ids []int64
	pts []metrics.Point
}

// replacement is the new chunks for some small chunks of a series.
type replacement struct {
	old    []int64
	chunks []*slice
	small  int64 // small chunks among the new ones
}

// compactSeries merges the small chunks of one series, context by context.
func (s *Store) compactSeries(ctx context.Context, seriesID int64) error {
	reps, err := s.planCompaction(ctx, seriesID)
	if err != nil || len(reps) == 0 {
		return err
	}
	return s.swapChunks(ctx, seriesID, reps)
}

// planCompaction reads the small chunks of a series and encodes their
// replacements, off the writer.
func (s *Store) planCompaction(ctx context.Context, seriesID int64) ([]replacement, error) {
	groups, err := s.readSmallChunks(ctx, seriesID)
	if err != nil {
		return nil, err
	}
	var reps []replacement
	for _, g := range groups {
		if len(g.ids) < 2 {
			continue
		}
		metrics.SortPoints(g.pts)
		g.pts = metrics.DedupSorted(g.pts)
		r := replacement{old: g.ids}
		for start := 0; start < len(g.pts); start += s.opts.ChunkPoints {
			part := g.pts[start:min(start+s.opts.ChunkPoints, len(g.pts))]
			sl := &slice{ctx: g.ctx, pts: part, sum: metrics.Summarize(part)}
			if sl.data, err = metrics.AppendChunk(nil, part); err != nil {
				return nil, errs.Wrap(errs.Internal, err, "compaction: encode")
			}
			r.chunks = append(r.chunks, sl)
			if len(part) < s.opts.ChunkPoints {
				r.small++
			}
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// swapChunks replaces chunks in one writer op, unless some of them are
// gone (another compaction replaced them first): then it changes nothing.
//
// The new chunks go in before the old ones are deleted. SQLite numbers a
// new row one past the largest chunk_id left, so deleting first could
// hand the new chunks the ids just deleted; a compaction that had read
// those ids before would then find "its" chunks all there and delete
// chunks holding points it never read (TestCompactionRaceKeepsPoints).
// Inserted first, new chunks are numbered past every chunk that exists,
// and a deleted id is never given again while a chunk above it lives.
func (s *Store) swapChunks(ctx context.Context, seriesID int64, reps []replacement) error {
	err := s.w.do(ctx, func(tx *wtx) error {
		var removed int64
		var rows []chunkRow
		for _, r := range reps {
			for _, sl := range r.chunks {
				rows = append(rows, chunkRow{seriesID: seriesID, sl: sl})
			}
			removed += int64(len(r.old)) - r.small
		}
		if err := insertChunks(tx, rows); err != nil {
			return err
		}
		for _, r := range reps {
			args := make([]any, 0, len(r.old)+1)
			for _, id := range r.old {
				args = append(args, id)
			}
			args = append(args, seriesID)
			res, err := tx.exec(`DELETE FROM metric_chunks WHERE chunk_id IN (`+placeholders(len(r.old))+`) AND series_id = ?`, args...)
			if err != nil {
				return sqlError(err, "compaction: delete chunks")
			}
			if n, _ := res.RowsAffected(); n != int64(len(r.old)) {
				return errCompactionRace
			}
		}
		_, err := tx.exec(`UPDATE metric_series SET small_chunks = small_chunks - ? WHERE series_id = ?`, removed, seriesID)
		return sqlError(err, "compaction: update series")
	})
	if errors.Is(err, errCompactionRace) {
		s.log.Debug("compaction abandoned", "series", seriesID)
		return nil
	}
	return err
}

// readSmallChunks reads and decodes the small chunks of a series from one
// snapshot, grouped by context.
func (s *Store) readSmallChunks(ctx context.Context, seriesID int64) ([]*compactGroup, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, sqlError(err, "compaction: begin read")
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT chunk_id, model_id, dataset_name, dataset_digest, data FROM metric_chunks
		WHERE series_id = ? AND count < ? ORDER BY min_step, chunk_id`, seriesID, s.opts.ChunkPoints)
	if err != nil {
		return nil, sqlError(err, "compaction: read chunks")
	}
	defer rows.Close()
	var groups []*compactGroup
	for rows.Next() {
		var id int64
		var model, dsName, dsDigest sql.NullString
		var data []byte
		if err := rows.Scan(&id, &model, &dsName, &dsDigest, &data); err != nil {
			return nil, sqlError(err, "compaction: scan chunk")
		}
		mc := tracking.MetricContext{ModelID: model.String, DatasetName: dsName.String, DatasetDigest: dsDigest.String}
		var g *compactGroup
		for _, cand := range groups {
			if cand.ctx == mc {
				g = cand
				break
			}
		}
		if g == nil {
			g = &compactGroup{ctx: mc}
			groups = append(groups, g)
		}
		g.ids = append(g.ids, id)
		if g.pts, err = metrics.DecodeChunk(g.pts, data); err != nil {
			return nil, errs.Wrap(errs.Internal, fmt.Errorf("series %d chunk %d: %w", seriesID, id, err), "stored metric data is corrupt")
		}
	}
	return groups, sqlError(rows.Err(), "compaction: read chunks")
}

// compactionCandidatesN lists up to n series (all when n < 0) with at
// least two small chunks.
func (s *Store) compactionCandidatesN(ctx context.Context, n int) ([]int64, error) {
	if n < 0 {
		n = math.MaxInt32 // all of them
	}
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
