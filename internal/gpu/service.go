package gpu

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// Store keeps GPU samples. Implementations live in adapter packages
// (internal/sqlstore).
//
// Contract, for every method:
//   - ctx cancels the call; a cancelled call has no effect or its full
//     effect.
//   - Methods are safe for concurrent use, also from several server
//     replicas sharing the database: no method relies on state kept in a
//     replica's memory.
//   - Errors are *errs.Error values (errs.Unavailable for a busy or full
//     database); no method returns errs.NotFound for an unknown node or run:
//     it selects nothing.
type Store interface {
	// AppendSamples stores the batch's samples, all in one write. A node
	// stores one sample per timestamp: a sample whose (node, timestamp) is
	// stored already only adds the GPUs (by Key) the stored one lacks, so
	// a resent batch changes nothing. The batch is validated by the
	// Service; the store does not keep b.
	AppendSamples(ctx context.Context, b *Batch) error
	// Latest returns the newest stored sample of each node q selects,
	// ordered by node name.
	Latest(ctx context.Context, q Selection) ([]NodeSample, error)
	// Scan calls fn for every stored sample that q selects with a
	// timestamp in [fromMs, toMs), ordered by node and then timestamp. The
	// *NodeSample is reused between calls: fn must copy what it keeps. An
	// error from fn ends the scan and is returned.
	Scan(ctx context.Context, q Selection, fromMs, toMs int64, fn func(*NodeSample) error) error
	// Prune deletes the samples with a timestamp before cutoffMs, and the
	// nodes left without samples, and returns the number of samples
	// deleted. Running it twice, or on two replicas at once, is harmless.
	Prune(ctx context.Context, cutoffMs int64) (int64, error)
}

// Selection selects the samples of some nodes: those named in Nodes, or
// those labelled with RunID (all the run's nodes), or, when both are empty,
// every node. With both set, a sample must match both.
type Selection struct {
	Nodes []string
	RunID string
}

// NodeSample is a stored sample with its labels. NumNodes is not stored.
type NodeSample struct {
	Labels
	Sample
}

// RunLogger logs run metrics; *tracking.Service implements it.
type RunLogger interface {
	GetRun(ctx context.Context, id string) (*tracking.Run, error)
	LogBatch(ctx context.Context, runID string, b tracking.Batch) error
}

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// Retention is how long samples are kept and how far back a sample
	// may be dated; 0 means 2 hours.
	Retention time.Duration
	// MaxFutureSkew is how far ahead of the server's clock a sample may be
	// dated (a clock skew; a sample dated later would stand as the node's
	// latest until then); 0 means 30 seconds.
	MaxFutureSkew time.Duration
	// MaxBatchSamples caps the samples of one ingest request; 0 means 1000.
	MaxBatchSamples int
	// MaxGPUs caps the GPUs of one sample; 0 means 1024.
	MaxGPUs int
	// MaxPoints caps the points of one downsampled series; 0 means 10,000.
	MaxPoints int
	// MaxRawPoints caps the points a raw (points=0) series query returns in
	// all; 0 means 1,000,000.
	MaxRawPoints int
	// Runs, when set, receives the samples of runs as MLflow system
	// metrics.
	Runs RunLogger
	// Events, when set, receives the health events of runs' GPUs (Xid
	// errors, throttling, ECC errors, lost GPUs; see Health).
	Events EventSink
	// Health keeps every node's health findings (run-linked or not) and
	// flags unhealthy nodes.
	Health HealthOptions
	// BatchMetrics is the most metrics one LogBatch call may carry; 0
	// means 1000 (tracking's default limit).
	BatchMetrics int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// DefaultRetention is how long samples are kept by default.
const DefaultRetention = 2 * time.Hour

// Service applies the GPU monitoring rules on top of a Store: what an
// ingest request may hold, which samples are accepted, how samples of runs
// become system metrics, and how history is downsampled. It is safe for
// concurrent use and keeps no state that replicas would need to share
// (only a cache of run start times, which never change).
type Service struct {
	store Store
	opts  ServiceOptions
	now   func() time.Time
	log   *slog.Logger

	mu        sync.Mutex
	runStarts map[string]int64
}

// NewService returns a Service over store.
func NewService(store Store, opts ServiceOptions) *Service {
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.MaxFutureSkew <= 0 {
		opts.MaxFutureSkew = 30 * time.Second
	}
	if opts.MaxBatchSamples <= 0 {
		opts.MaxBatchSamples = 1000
	}
	if opts.MaxGPUs <= 0 {
		opts.MaxGPUs = 1024
	}
	if opts.MaxPoints <= 0 {
		opts.MaxPoints = 10_000
	}
	if opts.MaxRawPoints <= 0 {
		opts.MaxRawPoints = 1_000_000
	}
	if opts.BatchMetrics <= 0 {
		opts.BatchMetrics = 1000
	}
	s := &Service{store: store, opts: opts, now: opts.Now, log: opts.Logger, runStarts: map[string]int64{}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Retention returns the retention window.
func (s *Service) Retention() time.Duration { return s.opts.Retention }

func invalidf(format string, args ...any) error { return errs.Errorf(errs.Invalid, format, args...) }

// ValidateNode checks a node name: 1 to 255 bytes of UTF-8 without control
// characters.
func ValidateNode(node string) error {
	switch {
	case node == "":
		return invalidf("Missing value for required parameter 'node'")
	case len(node) > 255:
		return invalidf("node name has %d bytes, which exceeds the limit of 255", len(node))
	case !utf8.ValidString(node) || strings.IndexFunc(node, isControl) >= 0:
		return invalidf("node name %q contains control characters", node)
	}
	return nil
}

// Ingest validates a batch, stores the samples within the accepted time
// window and, for a run, logs them to the run as system metrics.
//
// The time window is [now - Retention, now + MaxFutureSkew]. Samples
// outside it are not stored and are listed in the result's Skipped, so
// that an agent catching up after a long outage still delivers its recent
// samples; when no sample of the batch is inside, Ingest fails with
// errs.Invalid naming the first one, so a node whose clock is far off gets
// a clear error every time.
//
// Readings that are NaN or infinite are stored as missing. Within one
// sample a GPU listed twice keeps its first entry; within one batch a
// timestamp given twice keeps its first sample.
func (s *Service) Ingest(ctx context.Context, b *Batch) (*SendResult, error) {
	if err := s.validate(b); err != nil {
		return nil, err
	}
	now := s.now()
	lo, hi := now.Add(-s.opts.Retention).UnixMilli(), now.Add(s.opts.MaxFutureSkew).UnixMilli()
	res := &SendResult{}
	accepted := make([]Sample, 0, len(b.Samples))
	seen := make(map[int64]bool, len(b.Samples))
	for _, smp := range b.Samples {
		ts := smp.TimestampMs
		switch {
		case ts < lo:
			res.Skipped = append(res.Skipped, Skipped{ts, fmt.Sprintf("older than the retention window: %s before the server's time, which keeps %s", now.Sub(time.UnixMilli(ts)).Round(time.Second), s.opts.Retention)})
			continue
		case ts > hi:
			res.Skipped = append(res.Skipped, Skipped{ts, fmt.Sprintf("%s ahead of the server's clock (at most %s is accepted): check the clock of node %s", time.UnixMilli(ts).Sub(now).Round(time.Second), s.opts.MaxFutureSkew, b.Node)})
			continue
		case seen[ts]:
			continue
		}
		seen[ts] = true
		accepted = append(accepted, normalize(smp))
	}
	if len(accepted) == 0 {
		sk := res.Skipped[0]
		return nil, invalidf("no sample is inside the accepted time window: the sample at %d (%s) is %s", sk.TimestampMs, time.UnixMilli(sk.TimestampMs).UTC().Format(time.RFC3339), sk.Reason)
	}
	in := &Batch{Labels: b.Labels, Samples: accepted, RunOnly: b.RunOnly}
	if b.RunOnly && b.RunID == "" {
		return nil, invalidf("run-only samples name no run")
	}
	if !b.RunOnly {
		if err := s.store.AppendSamples(ctx, in); err != nil {
			return nil, err
		}
	}
	res.Accepted = len(accepted)
	if (b.RunID != "" && s.opts.Events != nil) || (s.opts.Health.History != nil && !b.RunOnly) {
		// Best effort: the samples are stored, and the events follow from
		// them again if the agent resends.
		if err := s.recordHealth(ctx, in); err != nil {
			s.log.Debug("GPU health events not recorded", "run_id", b.RunID, "node", b.Node, "err", err)
		}
	}
	if b.RunID != "" && s.opts.Runs != nil {
		if err := s.logSystemMetrics(ctx, in); err != nil {
			if !isPermanent(err) {
				// The samples are stored; the agent's retry stores them
				// again harmlessly and logs the metrics then.
				return nil, err
			}
			s.log.Debug("system metrics not logged", "run_id", b.RunID, "node", b.Node, "err", err)
			res.SystemMetricsErr = errs.MessageOf(err)
		}
	}
	return res, nil
}

func isPermanent(err error) bool {
	switch errs.CodeOf(err) {
	case errs.Invalid, errs.LimitExceeded, errs.NotFound, errs.PermissionDenied:
		return true
	}
	return false
}

func (s *Service) validate(b *Batch) error {
	if err := ValidateNode(b.Node); err != nil {
		return err
	}
	if b.RunID != "" {
		if err := tracking.ValidateRunID(b.RunID); err != nil {
			return err
		}
	}
	if b.NodeRank < -1 || b.NodeRank > 1<<20 {
		return invalidf("node_rank %d is out of range", b.NodeRank)
	}
	if b.NumNodes < 0 || b.NumNodes > 1<<20 {
		return invalidf("num_nodes %d is out of range", b.NumNodes)
	}
	switch {
	case len(b.Samples) == 0:
		return invalidf("Missing value for required parameter 'samples'")
	case len(b.Samples) > s.opts.MaxBatchSamples:
		return errs.Errorf(errs.LimitExceeded, "limit exceeded: a request can carry at most %d samples, got %d", s.opts.MaxBatchSamples, len(b.Samples))
	}
	for i, smp := range b.Samples {
		if smp.TimestampMs <= 0 {
			return invalidf("samples[%d]: ts_ms %d is not a time: give milliseconds since the Unix epoch", i, smp.TimestampMs)
		}
		if len(smp.GPUs) > s.opts.MaxGPUs {
			return errs.Errorf(errs.LimitExceeded, "limit exceeded: samples[%d] has %d GPUs, the maximum is %d", i, len(smp.GPUs), s.opts.MaxGPUs)
		}
		if len(smp.Processes) > 16*s.opts.MaxGPUs {
			return errs.Errorf(errs.LimitExceeded, "limit exceeded: samples[%d] has %d processes, the maximum is %d", i, len(smp.Processes), 16*s.opts.MaxGPUs)
		}
		for j, g := range smp.GPUs {
			if g.Index < 0 || g.Index > 1<<16 {
				return invalidf("samples[%d].gpus[%d]: index %d is out of range", i, j, g.Index)
			}
		}
	}
	return nil
}

// normalize returns a copy of smp fit for storing: strings cleaned,
// non-finite and negative byte readings missing, duplicate GPUs dropped,
// GPUs ordered by index.
func normalize(smp Sample) Sample {
	out := Sample{TimestampMs: smp.TimestampMs, GPUs: make([]GPU, 0, len(smp.GPUs))}
	seen := make(map[string]bool, len(smp.GPUs))
	for _, g := range smp.GPUs {
		g.UUID, g.Name, g.Err = cleanString(g.UUID), cleanString(g.Name), cleanString(g.Err)
		if seen[g.Key()] {
			continue
		}
		seen[g.Key()] = true
		for f := range g.Values {
			if !storable(Field(f), g.Values[f]) {
				g.Values[f] = Missing()
			}
		}
		out.GPUs = append(out.GPUs, g)
	}
	sortGPUs(out.GPUs)
	for _, p := range smp.Processes {
		if p.PID < 0 || p.GPU < 0 {
			continue
		}
		p.Name = cleanString(p.Name)
		if p.MemUsedBytes < -1 {
			p.MemUsedBytes = -1
		}
		out.Processes = append(out.Processes, p)
	}
	return out
}

func sortGPUs(gs []GPU) {
	// Insertion sort: samples have a handful of GPUs, usually in order.
	for i := 1; i < len(gs); i++ {
		for j := i; j > 0 && gs[j].Index < gs[j-1].Index; j-- {
			gs[j], gs[j-1] = gs[j-1], gs[j]
		}
	}
}

// Latest returns the newest sample of each selected node.
func (s *Service) Latest(ctx context.Context, q Selection) ([]NodeSample, error) {
	if err := validateSelection(q); err != nil {
		return nil, err
	}
	return s.store.Latest(ctx, q)
}

func validateSelection(q Selection) error {
	for _, n := range q.Nodes {
		if err := ValidateNode(n); err != nil {
			return err
		}
	}
	if q.RunID != "" {
		return tracking.ValidateRunID(q.RunID)
	}
	return nil
}
