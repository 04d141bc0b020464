package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/gpu"
)

// GPUOptions configure the GPU part of the store.
type GPUOptions struct {
	// Retention is how long samples are kept; 0 means gpu.DefaultRetention.
	Retention time.Duration
	// HealthRetention is how long node health history is kept; 0 means
	// gpu.DefaultHealthRetention.
	HealthRetention time.Duration
	// PruneEvery is the time between two prunes; 0 means one minute. A
	// negative value turns the background pruning off (tests and tools
	// call Prune themselves).
	PruneEvery time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// CommitDelay lets ingest requests that arrive close together share
	// one transaction: a request that arrives less than CommitDelay after
	// the previous one waits for the end of a window of that length and is
	// then queued with the others of its window, so the writer commits
	// them together (one BEGIN, one COMMIT, one fsync). Requests that
	// arrive alone go at once. 0 means 50 ms; a negative value turns it
	// off. It only adds latency, never changes what is stored.
	CommitDelay time.Duration
	// Logger receives pruning logs; nil means the store's logger.
	Logger *slog.Logger
}

// GPUStore is the SQLite implementation of gpu.Store. It shares the
// Store's writer (an ingest request is one op of a group commit) and read
// pool, and runs the retention pruning in its own goroutine.
type GPUStore struct {
	s    *Store
	opts GPUOptions
	now  func() time.Time
	log  *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
	gate   commitGate
}

// commitGate groups ingest requests that arrive close together.
type commitGate struct {
	delay time.Duration
	mu    sync.Mutex
	last  time.Time     // when the last request arrived
	open  chan struct{} // closed when the current window ends; nil when none
}

// wait returns at once for a request that arrives alone, and otherwise at
// the end of the current window, together with the other requests of it.
func (g *commitGate) wait(ctx context.Context) error {
	if g.delay <= 0 {
		return nil
	}
	g.mu.Lock()
	now := time.Now()
	quiet := now.Sub(g.last) >= g.delay
	g.last = now
	if quiet && g.open == nil {
		g.mu.Unlock()
		return nil
	}
	if g.open == nil {
		ch := make(chan struct{})
		g.open = ch
		time.AfterFunc(g.delay, func() {
			g.mu.Lock()
			g.open = nil
			g.mu.Unlock()
			close(ch)
		})
	}
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ gpu.Store = (*GPUStore)(nil)

// OpenGPU returns the GPU part of s and starts its pruning loop, which
// deletes samples older than the retention window at once and then every
// PruneEvery. Of several replicas, the one holding the "gpu-prune" lease
// prunes (a prune is an idempotent DELETE of what is older than a cutoff,
// so an overlap at a hand-over is harmless). Close it before s.
func OpenGPU(s *Store, opts GPUOptions) *GPUStore {
	if opts.Retention <= 0 {
		opts.Retention = gpu.DefaultRetention
	}
	if opts.HealthRetention <= 0 {
		opts.HealthRetention = gpu.DefaultHealthRetention
	}
	if opts.PruneEvery == 0 {
		opts.PruneEvery = time.Minute
	}
	if opts.CommitDelay == 0 {
		opts.CommitDelay = 50 * time.Millisecond
	}
	g := &GPUStore{s: s, opts: opts, now: opts.Now, log: opts.Logger, gate: commitGate{delay: opts.CommitDelay}}
	if g.now == nil {
		g.now = time.Now
	}
	if g.log == nil {
		g.log = s.log
	}
	g.log = g.log.With("component", "gpu-store")
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	if opts.PruneEvery > 0 {
		g.wg.Go(func() { g.pruneLoop(ctx) })
	}
	return g
}

// Close stops the pruning loop.
func (g *GPUStore) Close(ctx context.Context) error {
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *GPUStore) pruneLoop(ctx context.Context) {
	t := time.NewTicker(g.opts.PruneEvery)
	defer t.Stop()
	for {
		if !g.s.leader(ctx, "gpu-prune", g.opts.PruneEvery) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				continue
			}
		}
		cutoff := g.now().Add(-g.opts.Retention).UnixMilli()
		n, err := g.Prune(ctx, cutoff)
		switch {
		case err != nil && ctx.Err() == nil:
			g.log.Warn("pruning GPU samples failed; retrying at the next tick", "err", err)
		case n > 0:
			g.log.Debug("pruned GPU samples", "deleted", n, "cutoff_ms", cutoff)
		}
		hcut := g.now().Add(-g.opts.HealthRetention).UnixMilli()
		if n, err := g.PruneHealth(ctx, hcut); err != nil && ctx.Err() == nil {
			g.log.Warn("pruning GPU health history failed; retrying at the next tick", "err", err)
		} else if n > 0 {
			g.log.Debug("pruned GPU health history", "deleted", n, "cutoff_ms", hcut)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneNodesPerOp bounds the nodes one prune op handles, so that pruning
// never holds the writer for long.
const pruneNodesPerOp = 200

// Prune implements gpu.Store. It deletes node by node through the primary
// key, a bounded number of nodes per write, and then the nodes whose
// newest sample is older than the cutoff.
func (g *GPUStore) Prune(ctx context.Context, cutoffMs int64) (int64, error) {
	rows, err := g.s.rdb.QueryContext(ctx, `SELECT node_pk FROM gpu_nodes ORDER BY node_pk`)
	if err != nil {
		return 0, sqlError(err, "list GPU nodes")
	}
	var nodes []int64
	for rows.Next() {
		var pk int64
		if err := rows.Scan(&pk); err != nil {
			rows.Close()
			return 0, sqlError(err, "list GPU nodes")
		}
		nodes = append(nodes, pk)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, sqlError(err, "list GPU nodes")
	}
	var deleted int64
	for len(nodes) > 0 {
		chunk := nodes[:min(len(nodes), pruneNodesPerOp)]
		nodes = nodes[len(chunk):]
		err := g.s.w.do(ctx, func(tx *wtx) error {
			for _, pk := range chunk {
				res, err := tx.exec(`DELETE FROM gpu_samples WHERE node_pk = ? AND ts_ms < ?`, pk, cutoffMs)
				if err != nil {
					return sqlError(err, "prune GPU samples")
				}
				n, _ := res.RowsAffected()
				deleted += n
				if _, err := tx.exec(`DELETE FROM gpu_nodes WHERE node_pk = ? AND latest_ts_ms < ?`, pk, cutoffMs); err != nil {
					return sqlError(err, "prune GPU nodes")
				}
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// packedSample is a sample encoded outside the writer.
type packedSample struct {
	ts   int64
	data []byte
	smp  *gpu.Sample
}

// AppendSamples implements gpu.Store: one writer op per batch, whatever
// its size. The samples are encoded before the op is queued, so the
// writer goroutine only runs SQL: upsert the node's row with its latest
// sample, then insert each sample (ON CONFLICT DO NOTHING on the (node,
// ts) key; a sample stored already only gains the GPUs it lacks).
func (g *GPUStore) AppendSamples(ctx context.Context, b *gpu.Batch) error {
	if len(b.Samples) == 0 {
		return nil
	}
	packed := make([]packedSample, len(b.Samples))
	newest := 0
	for i := range b.Samples {
		smp := &b.Samples[i]
		packed[i] = packedSample{ts: smp.TimestampMs, data: gpu.AppendSample(nil, smp), smp: smp}
		if smp.TimestampMs > b.Samples[newest].TimestampMs {
			newest = i
		}
	}
	runID := nullString(b.RunID)
	rank := nullRank(b.NodeRank)
	p := packed[newest]
	if err := g.gate.wait(ctx); err != nil {
		return err
	}
	return g.s.w.do(ctx, func(tx *wtx) error {
		// One statement in the usual case (a node's next sample): create
		// the node or move its latest sample forward, and return its key.
		// When the batch is not newer than the stored latest, the upsert
		// changes nothing and returns no row; read the node then.
		var pk, latestTs int64
		err := tx.queryRow(`INSERT INTO gpu_nodes (name, latest_ts_ms, latest_run_id, latest_node_rank, latest_data) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET latest_ts_ms = excluded.latest_ts_ms, latest_run_id = excluded.latest_run_id,
				latest_node_rank = excluded.latest_node_rank, latest_data = excluded.latest_data
			WHERE excluded.latest_ts_ms > gpu_nodes.latest_ts_ms
			RETURNING node_pk, latest_ts_ms`, b.Node, p.ts, runID, rank, p.data).Scan(&pk, &latestTs)
		if errors.Is(err, sql.ErrNoRows) {
			// Locked, so that a prune on another replica cannot delete
			// the node under the samples about to be added to it.
			err = tx.queryRow(`SELECT node_pk, latest_ts_ms FROM gpu_nodes WHERE name = ?`+tx.lock(), b.Node).Scan(&pk, &latestTs)
		}
		if err != nil {
			return sqlError(err, "store GPU node")
		}
		for _, p := range packed {
			res, err := tx.exec(`INSERT INTO gpu_samples (node_pk, ts_ms, run_id, node_rank, data) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				pk, p.ts, runID, rank, p.data)
			if err != nil {
				return sqlError(err, "store GPU sample")
			}
			if n, _ := res.RowsAffected(); n == 1 {
				continue
			}
			if runID != nil {
				// A node-wide agent (a DaemonSet) and the launcher of a
				// run on the node sample at the same instants: a sample of
				// no run stored first takes the run's labels, so the run's
				// series has it whichever arrived first.
				if err := adoptRun(tx, pk, p.ts, runID, rank, p.ts == latestTs); err != nil {
					return err
				}
			}
			merged, err := mergeStored(tx, pk, p)
			if err != nil {
				return err
			}
			if merged != nil && p.ts == latestTs {
				// The node's latest sample gained GPUs.
				if _, err := tx.exec(`UPDATE gpu_nodes SET latest_data = ? WHERE node_pk = ? AND latest_ts_ms = ?`, merged, pk, p.ts); err != nil {
					return sqlError(err, "update GPU node")
				}
			}
		}
		return nil
	})
}

// adoptRun gives the stored sample of (node, ts), when it has no run, the
// run's labels; and the node's latest sample too when latest is set.
func adoptRun(tx *wtx, pk, ts int64, runID, rank any, latest bool) error {
	if _, err := tx.exec(`UPDATE gpu_samples SET run_id = ?, node_rank = ? WHERE node_pk = ? AND ts_ms = ? AND run_id IS NULL`, runID, rank, pk, ts); err != nil {
		return sqlError(err, "label GPU sample")
	}
	if !latest {
		return nil
	}
	_, err := tx.exec(`UPDATE gpu_nodes SET latest_run_id = ?, latest_node_rank = ? WHERE node_pk = ? AND latest_ts_ms = ? AND latest_run_id IS NULL`, runID, rank, pk, ts)
	return sqlError(err, "label GPU node")
}

// mergeStored adds to the stored sample of (node, p.ts) the GPUs of p it
// lacks, with their processes, and returns the new packed data, or nil
// when nothing was added (a resend).
func mergeStored(tx *wtx, pk int64, p packedSample) ([]byte, error) {
	var data []byte
	if err := tx.queryRow(`SELECT data FROM gpu_samples WHERE node_pk = ? AND ts_ms = ?`+tx.lock(), pk, p.ts).Scan(&data); err != nil {
		return nil, sqlError(err, "read GPU sample")
	}
	var have gpu.Sample
	if err := gpu.DecodeSample(data, &have); err != nil {
		// A damaged row is replaced by the new sample.
		_, err := tx.exec(`UPDATE gpu_samples SET data = ? WHERE node_pk = ? AND ts_ms = ?`, p.data, pk, p.ts)
		return p.data, sqlError(err, "store GPU sample")
	}
	keys := make(map[string]bool, len(have.GPUs))
	for i := range have.GPUs {
		keys[have.GPUs[i].Key()] = true
	}
	added := map[int]bool{}
	for _, g := range p.smp.GPUs {
		if !keys[g.Key()] {
			have.GPUs = append(have.GPUs, g)
			added[g.Index] = true
		}
	}
	if len(added) == 0 {
		return nil, nil
	}
	for _, pr := range p.smp.Processes {
		if added[pr.GPU] {
			have.Processes = append(have.Processes, pr)
		}
	}
	sortByIndex(have.GPUs)
	merged := gpu.AppendSample(nil, &have)
	if _, err := tx.exec(`UPDATE gpu_samples SET data = ? WHERE node_pk = ? AND ts_ms = ?`, merged, pk, p.ts); err != nil {
		return nil, sqlError(err, "store GPU sample")
	}
	return merged, nil
}

func sortByIndex(gs []gpu.GPU) {
	for i := 1; i < len(gs); i++ {
		for j := i; j > 0 && gs[j].Index < gs[j-1].Index; j-- {
			gs[j], gs[j-1] = gs[j-1], gs[j]
		}
	}
}

func nullRank(r int) any {
	if r < 0 {
		return nil
	}
	return int64(r)
}
