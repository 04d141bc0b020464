package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// Clock tells the time and waits. The agent takes every reading of time
// from it, so tests can run half an hour of sampling in milliseconds.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock returns the real clock (under testing/synctest, the bubble's
// fake one).
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sink delivers batches to the server.
//
// Contract: Send returns nil once the server has stored the batch's
// accepted samples (a resend of the same samples is harmless: the server
// stores each node and timestamp once). An error with code errs.Invalid or
// errs.LimitExceeded means the server refused the batch and sending it
// again will not help; any other error is transient (server down, timeout,
// overload, credentials not accepted yet) and the agent keeps the batch.
// Send may be called from one goroutine at a time; it does not keep b.
type Sink interface {
	Send(ctx context.Context, b *Batch) (*SendResult, error)
}

// SendResult is the server's answer to an ingest request.
type SendResult struct {
	// Accepted is the number of samples stored (or already stored).
	Accepted int
	// Skipped are samples the server did not store, with why (outside the
	// accepted time window).
	Skipped []Skipped
	// SystemMetricsErr, when not empty, says why the samples could not be
	// logged to the run as system metrics (they are stored all the same).
	SystemMetricsErr string
}

// Skipped is a sample the server did not store.
type Skipped struct {
	TimestampMs int64
	Reason      string
}

// AgentOptions configure an Agent.
type AgentOptions struct {
	// Source is where samples come from; required.
	Source Source
	// Sink receives the samples; nil means the agent only serves /metrics.
	Sink Sink
	// Spool keeps samples the sink could not take; required with a Sink.
	Spool *Spool
	// Labels are attached to every sample; Labels.Node is required.
	Labels Labels
	// Selector picks the GPUs to report (CUDA_VISIBLE_DEVICES); the zero
	// value reports all.
	Selector Selector
	// Interval is the time between samples; 0 means 10 s. Samples are taken
	// at multiples of Interval since the epoch and stamped with them, so
	// that the nodes of a job sample at the same instants (see Run).
	Interval time.Duration
	// MaxBatchSamples caps the samples of one request; 0 means 20, which
	// keeps a request of 8-GPU samples within one 1000-metric log-batch
	// when the samples are linked to a run.
	MaxBatchSamples int
	// SendTimeout bounds one request; 0 means 30 s.
	SendTimeout time.Duration
	// Clock is the agent's clock; nil means SystemClock.
	Clock Clock
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
}

// Agent samples the node's GPUs at a fixed interval and delivers the
// samples to a Sink, spooling them while the sink is unreachable.
type Agent struct {
	opts  AgentOptions
	clock Clock
	log   *slog.Logger

	mu     sync.Mutex
	latest *Sample
	known  map[string]GPU // GPUs seen so far, by Key
	// health counts the health findings of each GPU (by Key), and lastXid
	// its last Xid error, for Prometheus.
	health  map[string]map[HealthKind]int64
	lastXid map[string]float64

	failing   failure // why the last send failed (for logging changes only)
	lastSMErr string

	samples    atomic.Int64
	sourceErrs atomic.Int64
	sent       atomic.Int64
	sendErrs   atomic.Int64
	rejected   atomic.Int64
}

// maxKnownGPUs bounds the GPUs an agent remembers.
const maxKnownGPUs = 1024

// NewAgent returns an agent; Run starts it.
func NewAgent(opts AgentOptions) (*Agent, error) {
	if opts.Source == nil {
		return nil, errors.New("gpu agent: no source")
	}
	if opts.Labels.Node == "" {
		return nil, errors.New("gpu agent: no node name")
	}
	if opts.Sink != nil && opts.Spool == nil {
		return nil, errors.New("gpu agent: a sink needs a spool")
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.MaxBatchSamples <= 0 {
		opts.MaxBatchSamples = 20
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 30 * time.Second
	}
	a := &Agent{opts: opts, clock: opts.Clock, log: opts.Logger, known: map[string]GPU{}, health: map[string]map[HealthKind]int64{}, lastXid: map[string]float64{}}
	if a.clock == nil {
		a.clock = SystemClock()
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// Run samples until ctx is cancelled, then makes a last attempt (bounded
// by a few seconds) to deliver what is spooled, and returns nil. Samples
// are taken at the multiples of the interval since the epoch, the first at
// the first one from now, and each is stamped with its instant, not with
// the moment the agent woke up: another agent sampling the node at the
// same interval (a node-wide agent and the launcher of a run) stamps the
// same instants, and the server keeps one sample per node and instant.
// Instants missed (a machine suspended, a source or a send slower than the
// interval) are skipped.
func (a *Agent) Run(ctx context.Context) error {
	iv := a.opts.Interval
	next := gridAt(a.clock.Now(), iv, true)
	for {
		if wait := next.Sub(a.clock.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				a.lastDrain(ctx)
				return nil
			case <-a.clock.After(wait):
			}
		} else if ctx.Err() != nil {
			a.lastDrain(ctx)
			return nil
		}
		at := next
		if now := a.clock.Now(); now.Sub(at) >= iv {
			at = gridAt(now, iv, false) // woken late: the latest instant
		}
		if smp, err := a.Take(ctx, at); err == nil && a.opts.Sink != nil {
			a.deliver(ctx, smp)
		}
		next = at.Add(iv)
		if now := a.clock.Now(); !next.After(now) { // sampling took longer than the interval
			next = gridAt(now, iv, true)
		}
	}
}

// lastDrain makes the last attempt to deliver what is spooled.
func (a *Agent) lastDrain(ctx context.Context) {
	if a.opts.Sink != nil && a.opts.Spool.Len() > 0 {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		a.drain(fctx)
		cancel()
	}
}

// gridAt returns the multiple of iv since the Unix epoch at or before t,
// or with up, at or after t.
func gridAt(t time.Time, iv time.Duration, up bool) time.Time {
	ns := t.UnixNano()
	g := ns - ns%int64(iv)
	if ns%int64(iv) < 0 {
		g -= int64(iv)
	}
	if up && g < ns {
		g += int64(iv)
	}
	return time.Unix(0, g)
}

// Take takes one sample at time now: it reads the source, keeps the
// selected GPUs, and adds GPUs seen before but missing now, marked with an
// error, so that a GPU that falls off the bus shows as failed rather than
// vanishing. When the source fails as a whole, every known GPU is reported
// failed. The sample becomes the one /metrics shows.
func (a *Agent) Take(ctx context.Context, now time.Time) (*Sample, error) {
	smp, err := a.opts.Source.Sample(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.sourceErrs.Add(1)
		a.log.Warn("reading the GPUs failed", "source", a.opts.Source.Name(), "err", err)
		if len(a.known) == 0 {
			return nil, err
		}
		smp = &Sample{}
	}
	smp.TimestampMs = now.UnixMilli()
	a.opts.Selector.Filter(smp)
	present := make(map[string]bool, len(smp.GPUs))
	for i := range smp.GPUs {
		g := &smp.GPUs[i]
		g.UUID, g.Name, g.Err = cleanString(g.UUID), cleanString(g.Name), cleanString(g.Err)
		k := g.Key()
		present[k] = true
		if _, ok := a.known[k]; !ok && len(a.known) < maxKnownGPUs {
			a.known[k] = NewGPU(g.Index, g.UUID, g.Name)
		}
	}
	for k, g := range a.known {
		if present[k] {
			continue
		}
		g.Err = "not reported by the GPU source"
		if err != nil {
			g.Err = cleanString(err.Error())
		}
		smp.GPUs = append(smp.GPUs, g)
	}
	slices.SortStableFunc(smp.GPUs, func(x, y GPU) int { return x.Index - y.Index })
	a.countHealth(smp)
	a.latest = smp
	a.samples.Add(1)
	return smp, nil
}

// countHealth counts the health findings of each GPU of smp against the
// previous sample (with a.mu held).
func (a *Agent) countHealth(smp *Sample) {
	prev := map[string]*GPU{}
	if a.latest != nil {
		for i := range a.latest.GPUs {
			prev[a.latest.GPUs[i].Key()] = &a.latest.GPUs[i]
		}
	}
	for i := range smp.GPUs {
		g := &smp.GPUs[i]
		k := g.Key()
		for _, f := range Health(a.opts.Labels.Node, prev[k], g, smp.TimestampMs) {
			c := a.health[k]
			if c == nil {
				if len(a.health) >= maxKnownGPUs {
					break
				}
				c = map[HealthKind]int64{}
				a.health[k] = c
			}
			c[f.Kind]++
		}
		if x := g.Values[FieldXid]; !IsMissing(x) && x > 0 && (len(a.lastXid) < maxKnownGPUs || a.lastXid[k] != 0) {
			a.lastXid[k] = x
		}
	}
}

// lastXids returns a copy of the last Xid of each GPU, by key.
func (a *Agent) lastXids() map[string]float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.lastXid)
}

// healthCounts returns a copy of the health counts by GPU key.
func (a *Agent) healthCounts() map[string]map[HealthKind]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]map[HealthKind]int64, len(a.health))
	for k, c := range a.health {
		out[k] = maps.Clone(c)
	}
	return out
}

// Latest returns the last sample taken, or nil.
func (a *Agent) Latest() *Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.latest
}

// deliver sends a new sample, after whatever is spooled so that the server
// receives samples in order, and spools it when that fails.
func (a *Agent) deliver(ctx context.Context, smp *Sample) {
	rec := SpoolRecord{Labels: a.opts.Labels, Sample: *smp}
	if a.opts.Spool.Len() == 0 {
		err := a.send(ctx, []SpoolRecord{rec})
		if err == nil || permanent(err) {
			return
		}
	}
	if err := a.opts.Spool.Append(&rec); err != nil {
		a.log.Error("spooling a GPU sample failed; it is lost", "err", err)
	}
	a.drain(ctx)
}

// drain sends spooled samples, oldest first, until the spool is empty or a
// send fails.
func (a *Agent) drain(ctx context.Context) {
	sp := a.opts.Spool
	for ctx.Err() == nil {
		recs, err := sp.Peek(a.opts.MaxBatchSamples)
		if err != nil {
			a.log.Error("reading the spool failed", "err", err)
			return
		}
		if len(recs) == 0 {
			return
		}
		// One request carries samples of one label set.
		n := 1
		for n < len(recs) && recs[n].Labels == recs[0].Labels {
			n++
		}
		err = a.send(ctx, recs[:n])
		if err != nil && !permanent(err) {
			return
		}
		if err := sp.Ack(n); err != nil {
			a.log.Error("acknowledging spooled samples failed", "err", err)
			return
		}
	}
}

// send sends records with the same labels in one request. When the server
// refuses a batch of several samples, each is sent alone, so that one bad
// sample does not take the others with it; refused ones are dropped.
func (a *Agent) send(ctx context.Context, recs []SpoolRecord) error {
	b := &Batch{Labels: recs[0].Labels, Samples: make([]Sample, len(recs))}
	for i := range recs {
		b.Samples[i] = recs[i].Sample
	}
	sctx, cancel := context.WithTimeout(ctx, a.opts.SendTimeout)
	res, err := a.opts.Sink.Send(sctx, b)
	cancel()
	switch {
	case err == nil:
		a.sent.Add(int64(res.Accepted))
		a.noteResult(res, len(recs))
		if a.failing != failureNone {
			a.failing = failureNone
			a.log.Info("the server is reachable again; sending spooled samples", "spooled", a.opts.Spool.Len())
		}
		return nil
	case permanent(err) && len(recs) > 1:
		for i := range recs {
			if err := a.send(ctx, recs[i:i+1]); err != nil && !permanent(err) {
				return err
			}
		}
		return nil
	case permanent(err):
		a.rejected.Add(1)
		a.log.Warn("the server refused a GPU sample; dropping it", "ts_ms", recs[0].Sample.TimestampMs, "err", err)
		return err
	}
	a.sendErrs.Add(1)
	// Logged once per kind of failure: an outage followed by a refusal
	// (the server came back with sign-in on) is told twice, the 10-second
	// ticks of either are not.
	if f := failureOf(err); f != a.failing {
		a.failing = f
		switch f {
		case failureUnauthenticated:
			// Samples pile up until the credentials are fixed.
			a.log.Error("the server refused the agent's credentials; spooling GPU samples until it takes them. "+
				"Give the agent a token (sextant tokens create, then MLFLOW_TRACKING_TOKEN) or "+
				"MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD of a user of the server, and restart it", "err", err)
		case failurePermission:
			a.log.Error("the server refused the agent's samples for lack of permission; spooling them until it takes them. "+
				"The agent's user needs CAN_EDIT on the run's experiment (sextant perms set experiment:ID user:EMAIL CAN_EDIT), "+
				"or run the agent without --run-id", "run_id", a.opts.Labels.RunID, "err", err)
		default:
			a.log.Warn("sending GPU samples failed; spooling them until the server takes them", "err", err)
		}
	}
	return err
}

// failure is the kind of a failed send, for logging each change once.
type failure int

const (
	failureNone failure = iota
	failureTransient
	failureUnauthenticated
	failurePermission
)

func failureOf(err error) failure {
	switch {
	case errs.Is(err, errs.Unauthenticated):
		return failureUnauthenticated
	case errs.Is(err, errs.PermissionDenied):
		return failurePermission
	}
	return failureTransient
}

func (a *Agent) noteResult(res *SendResult, sent int) {
	if len(res.Skipped) > 0 {
		a.rejected.Add(int64(len(res.Skipped)))
		a.log.Warn("the server skipped GPU samples", "skipped", len(res.Skipped), "of", sent, "first_ts_ms", res.Skipped[0].TimestampMs, "reason", res.Skipped[0].Reason)
	}
	if res.SystemMetricsErr != a.lastSMErr {
		a.lastSMErr = res.SystemMetricsErr
		if res.SystemMetricsErr != "" {
			a.log.Warn("the samples could not be logged to the run as system metrics", "run_id", a.opts.Labels.RunID, "err", res.SystemMetricsErr)
		}
	}
}

func permanent(err error) bool {
	return errs.Is(err, errs.Invalid) || errs.Is(err, errs.LimitExceeded)
}

// Stats are the agent's counters.
type Stats struct {
	Samples, SourceErrors, Sent, SendErrors, Rejected, Dropped int64
	Spooled                                                    int
	SpoolBytes                                                 int64
}

// Stats returns the agent's counters.
func (a *Agent) Stats() Stats {
	st := Stats{
		Samples: a.samples.Load(), SourceErrors: a.sourceErrs.Load(),
		Sent: a.sent.Load(), SendErrors: a.sendErrs.Load(), Rejected: a.rejected.Load(),
	}
	if sp := a.opts.Spool; sp != nil {
		st.Spooled, st.SpoolBytes, st.Dropped = sp.Len(), sp.Bytes(), sp.Dropped()
	}
	return st
}

// String describes the agent for its start line.
func (a *Agent) String() string {
	return fmt.Sprintf("source=%s node=%s interval=%s gpus=%s", a.opts.Source.Name(), a.opts.Labels.Node, a.opts.Interval, a.opts.Selector)
}
