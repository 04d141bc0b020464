package runevents

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// The watcher finds RUNNING runs that do nothing: GPUs that stay under a
// utilisation threshold (idle), or no metrics, output or events (stalled),
// for a configurable time. Each finding is a span on the run (KindIdle,
// KindStalled) that stays open while it lasts and is closed when the run
// moves again, a notification (a webhook) when it opens and closes, and
// the run's tag sextant.alert while it is open (what `sextant runs ls` and
// the MLflow UI show). With several replicas only the one holding the
// watcher's lease watches.

// TagAlert is the run tag that holds the message of an open idle, stalled
// or hung span (the watcher sets it for idle and stalled ones, `sextant
// run` for hung ones), and is deleted when the last of them closes.
const TagAlert = "sextant.alert"

// AlertKinds are the span kinds that hold TagAlert while open.
var AlertKinds = []Kind{KindIdle, KindStalled, KindHung}

// AlertAfterClose is the one rule for TagAlert once an alerting span has
// closed: the message of another alerting span still open on the run
// (another kind, or a hung span of another node), or "" when none is and
// the tag is to be deleted. open lists the run's open spans of AlertKinds.
func AlertAfterClose(open []Event) string {
	for i := len(open) - 1; i >= 0; i-- {
		if open[i].Open && slices.Contains(AlertKinds, open[i].Kind) {
			return open[i].Message
		}
	}
	return ""
}

// RunActivity is what the watcher knows of a running run.
type RunActivity struct {
	RunID        string
	RunName      string
	ExperimentID string
	// StartMs is the run's start time.
	StartMs int64
	// LastMetricMs is the timestamp of its newest metric point (not
	// counting system/ metrics, which come from the GPU sampler); 0 when
	// none.
	LastMetricMs int64
	// LastLogMs is when its log last grew; 0 when it has none.
	LastLogMs int64
	// LastEventMs is the time of its newest event other than idle and
	// stalled spans (a checkpoint, a resume); 0 when none.
	LastEventMs int64
}

// LastActivityMs is when the run last showed it was alive.
func (a *RunActivity) LastActivityMs() int64 {
	return max(a.StartMs, a.LastMetricMs, a.LastLogMs, a.LastEventMs)
}

// Activity lists the running runs; internal/sqlstore implements it.
type Activity interface {
	// RunningRuns returns the active runs whose status is RUNNING.
	RunningRuns(ctx context.Context) ([]RunActivity, error)
}

// UtilPoint is the highest utilisation of a run's GPUs at one sample time
// (every node and GPU of the run).
type UtilPoint struct {
	TimeMs  int64
	MaxUtil float64
}

// Utilization reads a run's GPU utilisation; *gpu.Service implements it.
type Utilization interface {
	// RunUtilization returns the run's sample times in [fromMs, toMs) with
	// the highest utilisation of any of its GPUs at each, in time order;
	// samples without a utilisation reading are left out.
	RunUtilization(ctx context.Context, runID string, fromMs, toMs int64) ([]UtilPoint, error)
}

// Tagger sets and deletes run tags; *tracking.Service implements it
// through a small adapter in the wiring.
type Tagger interface {
	SetRunTag(ctx context.Context, runID, key, value string) error
	DeleteRunTag(ctx context.Context, runID, key string) error
}

// Notification is what a Notifier is told: a span opened or closed.
type Notification struct {
	Event Event
	Run   RunActivity
	// Closed says the span ended (the run moved again); false: it opened.
	Closed bool
}

// Notifier delivers notifications (a webhook). Notify must not block: it
// queues, and delivery retries and gives up on its own.
type Notifier interface {
	Notify(n Notification)
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// IdleUtil is the utilisation, in percent, under which every GPU of a
	// run must stay for it to be idle; 0 means 5.
	IdleUtil float64
	// IdleFor is how long the GPUs must stay under IdleUtil; 0 means 10
	// minutes, negative turns idle detection off.
	IdleFor time.Duration
	// StallFor is how long a run may go without metrics, output or events
	// before it is stalled; 0 means 15 minutes, negative turns it off.
	StallFor time.Duration
	// AbandonedAfter: a run first seen silent this long is taken for
	// abandoned, not stalled (a job killed without ending its run, or a
	// run imported from another server, which stay RUNNING for ever), and
	// is not alerted on until it moves again; 0 means the larger of a day
	// and four times StallFor, negative never.
	AbandonedAfter time.Duration
	// Every is the time between two looks; 0 means 30 s.
	Every time.Duration
	// Leader reports whether this replica runs the watcher now (it holds
	// the lease, and renews it by being asked); nil means always.
	Leader func(ctx context.Context) bool
	// StragglerMargin is how far above the other ranks' median step time a
	// rank's must be to be slow (0.2: 20% above); 0 means 0.2.
	StragglerMargin float64
	// StragglerFor is how long a rank must stay slow before it is flagged
	// as a straggler; 0 means 2 minutes, negative turns the check off.
	StragglerFor time.Duration
	// Notifier, Tags, GPUs and Progress are optional: no webhook, no run
	// tag, no idle detection, no straggler detection.
	Notifier Notifier
	Tags     Tagger
	GPUs     Utilization
	Progress StepTimes
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives the watcher's logs; nil discards them.
	Logger *slog.Logger
}

// Watcher looks at the running runs every WatchOptions.Every.
type Watcher struct {
	events   *Service
	activity Activity
	opts     WatchOptions
	now      func() time.Time
	log      *slog.Logger
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu sync.Mutex
	// flagged are the runs this watcher opened spans on, to close them
	// when the run stops running.
	flagged map[string]RunActivity
	// abandoned are the runs taken for abandoned, with the time of their
	// last activity then, so that each is logged once.
	abandoned map[string]int64
	// suspects are, per run, the ranks found slow at every look since the
	// time given (a leader that takes over starts counting again).
	suspects map[string]map[int]int64
	// hung are, per run, the hung spans (opened by `sextant run`) seen
	// open and notified, by key.
	hung map[string]map[string]Event
}

// NewWatcher returns a watcher that records its findings through events.
func NewWatcher(events *Service, activity Activity, opts WatchOptions) *Watcher {
	if opts.IdleUtil <= 0 {
		opts.IdleUtil = 5
	}
	if opts.IdleFor == 0 {
		opts.IdleFor = 10 * time.Minute
	}
	if opts.StallFor == 0 {
		opts.StallFor = 15 * time.Minute
	}
	if opts.Every <= 0 {
		opts.Every = 30 * time.Second
	}
	if opts.StragglerMargin <= 0 {
		opts.StragglerMargin = 0.2
	}
	if opts.StragglerFor == 0 {
		opts.StragglerFor = 2 * time.Minute
	}
	if opts.AbandonedAfter == 0 {
		opts.AbandonedAfter = max(24*time.Hour, 4*opts.StallFor)
	}
	w := &Watcher{events: events, activity: activity, opts: opts, now: opts.Now, log: opts.Logger,
		flagged: map[string]RunActivity{}, abandoned: map[string]int64{}, suspects: map[string]map[int]int64{}, hung: map[string]map[string]Event{}}
	if w.now == nil {
		w.now = time.Now
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w
}

// Start runs the watcher in the background until Close.
func (w *Watcher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() {
		t := time.NewTicker(w.opts.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := w.Tick(ctx); err != nil && ctx.Err() == nil {
					w.log.Warn("watching running runs", "err", err)
				}
			}
		}
	})
}

// Close stops the watcher and waits for its look in progress.
func (w *Watcher) Close() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

// Tick looks at every running run once (when this replica is the leader).
func (w *Watcher) Tick(ctx context.Context) error {
	if w.opts.Leader != nil && !w.opts.Leader(ctx) {
		return nil
	}
	runs, err := w.activity.RunningRuns(ctx)
	if err != nil {
		return err
	}
	now := w.now().UnixMilli()
	running := make(map[string]bool, len(runs))
	for i := range runs {
		running[runs[i].RunID] = true
	}
	// Runs that ended (or were deleted) with a span open: it ends now.
	w.mu.Lock()
	for id := range w.abandoned {
		if !running[id] {
			delete(w.abandoned, id)
		}
	}
	for id := range w.suspects {
		if !running[id] {
			delete(w.suspects, id)
		}
	}
	var hungGone []string
	for id := range w.hung {
		if !running[id] {
			hungGone = append(hungGone, id)
		}
	}
	var gone []RunActivity
	for id, r := range w.flagged {
		if !running[id] {
			gone = append(gone, r)
		}
	}
	w.mu.Unlock()
	for i := range gone {
		// A run stays flagged until its spans are closed: a close that
		// failed (a busy or briefly unreachable database) is tried again
		// at the next look, not left open for good.
		// NotFound: the tag was not there, or the run is gone for good.
		if err := w.closeEnded(ctx, &gone[i], now); err != nil && errs.CodeOf(err) != errs.NotFound {
			w.log.Warn("close the spans of an ended run", "run_id", gone[i].RunID, "err", err)
			continue
		}
		w.mu.Lock()
		delete(w.flagged, gone[i].RunID)
		w.mu.Unlock()
	}
	for _, id := range hungGone {
		w.checkHung(ctx, &RunActivity{RunID: id}, false)
	}
	for i := range runs {
		r := &runs[i]
		if w.opts.Notifier != nil {
			w.checkHung(ctx, r, true)
		}
		if w.opts.IdleFor > 0 && w.opts.GPUs != nil {
			if err := w.checkIdle(ctx, r, now); err != nil {
				w.log.Warn("idle check", "run_id", r.RunID, "err", err)
			}
		}
		if w.opts.StallFor > 0 {
			if err := w.checkStalled(ctx, r, now); err != nil {
				w.log.Warn("stall check", "run_id", r.RunID, "err", err)
			}
		}
		if w.opts.StragglerFor > 0 && w.opts.Progress != nil {
			if err := w.checkStragglers(ctx, r, now); err != nil {
				w.log.Warn("straggler check", "run_id", r.RunID, "err", err)
			}
		}
	}
	return nil
}

// closeEnded closes the watcher's open spans of a run that ended and
// clears its alert tag.
func (w *Watcher) closeEnded(ctx context.Context, r *RunActivity, now int64) error {
	for _, k := range []Kind{KindIdle, KindStalled} {
		open, err := w.openSpan(ctx, r.RunID, k)
		if err != nil {
			return err
		}
		if open != nil {
			if err := w.close(ctx, r, open, now, open.Message+" (until the run ended)"); err != nil {
				return err
			}
		}
	}
	open, err := w.events.All(ctx, Query{RunID: r.RunID, Kinds: []Kind{KindStraggler}, OpenOnly: true})
	if err != nil {
		return err
	}
	for j := range open {
		if err := w.close(ctx, r, &open[j], now, fmt.Sprintf("rank %s was a straggler until the run ended", open[j].Attrs["rank"])); err != nil {
			return err
		}
	}
	if w.opts.Tags != nil { // also when its launcher closed the span first
		return w.opts.Tags.DeleteRunTag(ctx, r.RunID, TagAlert)
	}
	return nil
}

// checkHung notifies the hung spans the run's launchers opened (KindHung:
// the launcher detects the hang, collects the stacks and sets the alert
// tag; the server's watcher only tells the webhook) when they are first
// seen open, and again once they closed. running is false for a run that
// ended: its spans seen open are told closed.
func (w *Watcher) checkHung(ctx context.Context, r *RunActivity, running bool) {
	w.mu.Lock()
	seen := w.hung[r.RunID]
	w.mu.Unlock()
	open := map[string]Event{}
	if running {
		evs, err := w.events.All(ctx, Query{RunID: r.RunID, Kinds: []Kind{KindHung}, OpenOnly: true})
		if err != nil {
			w.log.Debug("hung check", "run_id", r.RunID, "err", err)
			return
		}
		for _, ev := range evs {
			open[ev.Key] = ev
		}
	}
	var closed []Event
	for k, ev := range seen {
		if _, ok := open[k]; !ok {
			closed = append(closed, ev)
		}
	}
	if len(closed) > 0 { // the closed span's own message and end, when stored
		all, _ := w.events.All(ctx, Query{RunID: r.RunID, Kinds: []Kind{KindHung}})
		for i := range closed {
			for _, ev := range all {
				if ev.Key == closed[i].Key && !ev.Open {
					closed[i] = ev
				}
			}
			if closed[i].Open {
				closed[i].Open, closed[i].EndMs = false, max(w.now().UnixMilli(), closed[i].TimeMs)
			}
			w.opts.Notifier.Notify(Notification{Event: closed[i], Run: *r, Closed: true})
		}
	}
	next := map[string]Event{}
	for k, ev := range open {
		if _, ok := seen[k]; !ok {
			w.log.Info("run needs attention", "run_id", r.RunID, "kind", ev.Kind.String(), "message", ev.Message)
			w.opts.Notifier.Notify(Notification{Event: ev, Run: *r})
		}
		next[k] = ev
	}
	w.mu.Lock()
	if len(next) == 0 {
		delete(w.hung, r.RunID)
	} else {
		w.hung[r.RunID] = next
	}
	w.mu.Unlock()
}

func (w *Watcher) openSpan(ctx context.Context, runID string, k Kind) (*Event, error) {
	p, err := w.events.List(ctx, Query{RunID: runID, Kinds: []Kind{k}, OpenOnly: true, Limit: 1})
	if err != nil || len(p.Events) == 0 {
		return nil, err
	}
	return &p.Events[0], nil
}

func dur(ms int64) time.Duration { return (time.Duration(ms) * time.Millisecond).Round(time.Second) }

func (w *Watcher) checkIdle(ctx context.Context, r *RunActivity, now int64) error {
	open, err := w.openSpan(ctx, r.RunID, KindIdle)
	if err != nil {
		return err
	}
	idleFor := w.opts.IdleFor.Milliseconds()
	from := now - idleFor - 2*w.opts.Every.Milliseconds()
	if open != nil {
		from = min(from, open.TimeMs)
	}
	pts, err := w.opts.GPUs.RunUtilization(ctx, r.RunID, from, now+1)
	if err != nil || len(pts) == 0 {
		return err
	}
	busy := func(p UtilPoint) bool { return p.MaxUtil >= w.opts.IdleUtil }
	if open != nil {
		for _, p := range pts {
			if p.TimeMs > open.TimeMs && busy(p) {
				return w.close(ctx, r, open, p.TimeMs, fmt.Sprintf("GPUs were idle for %s (utilisation under %s%%)", dur(p.TimeMs-open.TimeMs), fmtPct(w.opts.IdleUtil)))
			}
		}
		return nil
	}
	// Idle since the last busy sample (or the first of the window), the
	// span starting at the first idle sample after it, with samples up to
	// now (a sampler that stopped is not idle GPUs).
	since, start := pts[0].TimeMs, pts[0].TimeMs
	for _, p := range pts {
		if busy(p) {
			since, start = p.TimeMs, -1
		} else if start < 0 {
			start = p.TimeMs
		}
	}
	last := pts[len(pts)-1].TimeMs
	if start < 0 || now-since < idleFor || now-last > idleFor/2 {
		return nil
	}
	ev := Event{
		Key: "idle:" + strconv.FormatInt(start, 10), Kind: KindIdle, Severity: SeverityWarning, TimeMs: start, Open: true, GPU: -1, Step: -1,
		Message: fmt.Sprintf("GPUs idle for %s: every GPU of the run under %s%% utilisation", dur(now-since), fmtPct(w.opts.IdleUtil)),
		Attrs:   map[string]string{"threshold_pct": fmtPct(w.opts.IdleUtil)},
	}
	return w.open(ctx, r, ev)
}

func (w *Watcher) checkStalled(ctx context.Context, r *RunActivity, now int64) error {
	open, err := w.openSpan(ctx, r.RunID, KindStalled)
	if err != nil {
		return err
	}
	last := r.LastActivityMs()
	if open != nil {
		if last > open.TimeMs {
			return w.close(ctx, r, open, last, fmt.Sprintf("no metrics, output or events for %s", dur(last-open.TimeMs)))
		}
		return nil
	}
	if now-last < w.opts.StallFor.Milliseconds() {
		return nil
	}
	if a := w.opts.AbandonedAfter; a > 0 && now-last >= a.Milliseconds() {
		w.mu.Lock()
		seen, ok := w.abandoned[r.RunID]
		w.abandoned[r.RunID] = last
		w.mu.Unlock()
		if !ok || seen != last {
			w.log.Info("running run silent too long: taken for abandoned, not alerted on until it moves again (sextant runs end ends it)",
				"run_id", r.RunID, "silent_for", dur(now-last))
		}
		return nil
	}
	ev := Event{
		Key: "stalled:" + strconv.FormatInt(last, 10), Kind: KindStalled, Severity: SeverityWarning, TimeMs: last, Open: true, GPU: -1, Step: -1,
		Message: fmt.Sprintf("no metrics, output or events for %s", dur(now-last)),
	}
	return w.open(ctx, r, ev)
}

func (w *Watcher) open(ctx context.Context, r *RunActivity, ev Event) error {
	if _, err := w.events.Append(ctx, r.RunID, []Event{ev}); err != nil {
		return err
	}
	w.log.Info("run needs attention", "run_id", r.RunID, "kind", ev.Kind.String(), "message", ev.Message)
	w.mu.Lock()
	w.flagged[r.RunID] = *r
	w.mu.Unlock()
	if w.opts.Tags != nil && alerting(ev.Kind) {
		if err := w.opts.Tags.SetRunTag(ctx, r.RunID, TagAlert, ev.Message); err != nil {
			w.log.Debug("set the alert tag", "run_id", r.RunID, "err", err)
		}
	}
	if w.opts.Notifier != nil {
		w.opts.Notifier.Notify(Notification{Event: ev, Run: *r})
	}
	return nil
}

func (w *Watcher) close(ctx context.Context, r *RunActivity, open *Event, endMs int64, msg string) error {
	ev := *open
	ev.Open, ev.EndMs, ev.Message = false, max(endMs, ev.TimeMs), msg
	if _, err := w.events.Append(ctx, r.RunID, []Event{ev}); err != nil {
		return err
	}
	if w.opts.Tags != nil && alerting(ev.Kind) {
		if p, err := w.events.List(ctx, Query{RunID: r.RunID, Kinds: AlertKinds, OpenOnly: true}); err == nil {
			if msg := AlertAfterClose(p.Events); msg != "" {
				err = w.opts.Tags.SetRunTag(ctx, r.RunID, TagAlert, msg)
			} else {
				err = w.opts.Tags.DeleteRunTag(ctx, r.RunID, TagAlert)
			}
			if err != nil {
				w.log.Debug("update the alert tag", "run_id", r.RunID, "err", err)
			}
		}
	}
	if w.opts.Notifier != nil {
		w.opts.Notifier.Notify(Notification{Event: ev, Run: *r, Closed: true})
	}
	return nil
}

// alerting reports whether spans of kind k set the run's alert tag: idle
// and stalled jobs, which hold machines and do nothing; a straggler is
// told through its event and the notifier only.
func alerting(k Kind) bool { return k == KindIdle || k == KindStalled }

func fmtPct(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
