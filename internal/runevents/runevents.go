// Package runevents holds the events of a run: what happened to a training
// job besides its metrics and its output, on the run's own time line.
// Checkpoint saves and loads (reported by the Python VolumeWriter and
// VolumeReader), GPU health (Xid errors, throttling, ECC errors, a GPU that
// fell off the bus, derived from GPU samples), idle and stalled jobs (found
// by the Watcher), resumes (recorded by `sextant run --resume`) and the attempts of a job
// (recorded by `sextant run`).
//
// An event is an instant (EndMs 0 and no span) or a span with a start and
// an end; a span still going on has EndMs 0 and Open set. Events carry a
// Key, unique within their run: appending an event with a stored key
// replaces the stored one, so a save reported when it starts and again
// when it lands is one event, and a retried append is harmless.
//
// It imports no HTTP or SQL package: internal/httpapi carries events over
// the wire and internal/sqlstore stores them. docs/api.md describes the
// routes.
package runevents

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// Kind says what an event is about. The numbers are persisted (the kind
// column of run_events) and never change; the names are the wire's.
type Kind uint8

// The kinds.
const (
	// KindCheckpointSave is a checkpoint saved (or being saved, or failed):
	// a span from the start of the save to the moment it landed, with
	// Checkpoint set.
	KindCheckpointSave Kind = 1
	// KindCheckpointLoad is a checkpoint loaded, with Checkpoint set.
	KindCheckpointLoad Kind = 2
	// KindResume is a job resumed from a checkpoint (sextant run --resume).
	KindResume Kind = 3
	// KindAttempt is one execution of the job on one node by `sextant
	// run` (a resumed run has several): a span from the job's start to its
	// end, open while the job runs, with the GPUs it held in Attrs
	// ("gpus", "gpu_model") and how it ended ("status"). The GPU-hours of
	// a run are computed from these (internal/gpuhours).
	KindAttempt Kind = 4
	// KindGPUXid is an Xid error a GPU's driver reported.
	KindGPUXid Kind = 10
	// KindGPUThrottle is a GPU slowed down by a thermal or power limit, or
	// by the hardware: a span while it lasts.
	KindGPUThrottle Kind = 11
	// KindGPUECC is a rise in a GPU's ECC error counts.
	KindGPUECC Kind = 12
	// KindGPULost is a GPU that could no longer be read: fallen off the
	// bus, lost by the driver, or no longer listed.
	KindGPULost Kind = 13
	// KindIdle is a running job whose GPUs stayed under the idle threshold:
	// a span while it lasts.
	KindIdle Kind = 20
	// KindStalled is a running job that stopped logging metrics and
	// output: a span while it lasts.
	KindStalled Kind = 21
	// KindStraggler is a rank whose step time stays above the other ranks'
	// median by the watcher's margin (from the run's progress reports): a
	// span while it lasts, with Node, GPU and the attribute "rank".
	KindStraggler Kind = 22
	// KindHung is a span opened by `sextant run` on a node whose ranks
	// stopped making progress (no heartbeat, or no output and no metrics)
	// for its --hang-after; the ranks' stacks are in the run's log.
	KindHung Kind = 23
	// KindNote is any other event a client reports (a message on the
	// run's time line).
	KindNote Kind = 30
)

var kindNames = map[Kind]string{
	KindCheckpointSave: "checkpoint_save",
	KindCheckpointLoad: "checkpoint_load",
	KindResume:         "resume",
	KindAttempt:        "attempt",
	KindGPUXid:         "gpu_xid",
	KindGPUThrottle:    "gpu_throttle",
	KindGPUECC:         "gpu_ecc",
	KindGPULost:        "gpu_lost",
	KindIdle:           "idle",
	KindStalled:        "stalled",
	KindStraggler:      "straggler",
	KindHung:           "hung",
	KindNote:           "note",
}

// String returns the kind's wire name.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "unknown"
}

// ParseKind returns the kind with the given wire name.
func ParseKind(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name {
			return k, true
		}
	}
	return 0, false
}

// Kinds returns every kind, in number order.
func Kinds() []Kind {
	return []Kind{KindCheckpointSave, KindCheckpointLoad, KindResume, KindAttempt, KindGPUXid, KindGPUThrottle, KindGPUECC, KindGPULost, KindIdle, KindStalled, KindStraggler, KindHung, KindNote}
}

// IsGPU reports whether the kind is about a GPU's health.
func (k Kind) IsGPU() bool { return k >= 10 && k < 20 }

// Severity says how much an event matters. The numbers are persisted.
type Severity uint8

// The severities.
const (
	SeverityInfo    Severity = 1
	SeverityWarning Severity = 2
	SeverityError   Severity = 3
)

var severityNames = map[Severity]string{SeverityInfo: "info", SeverityWarning: "warning", SeverityError: "error"}

// String returns the severity's wire name.
func (s Severity) String() string {
	if n, ok := severityNames[s]; ok {
		return n
	}
	return "unknown"
}

// ParseSeverity returns the severity with the given wire name.
func ParseSeverity(name string) (Severity, bool) {
	for k, n := range severityNames {
		if n == name {
			return k, true
		}
	}
	return 0, false
}

// Outcome is how a checkpoint save or load ended. The numbers are
// persisted (inside the event's data, see data.go).
type Outcome uint8

// The outcomes.
const (
	// OutcomeWriting is a save in progress (reported when it starts).
	OutcomeWriting Outcome = 1
	// OutcomeComplete is a save whose .metadata landed, or a load that
	// finished.
	OutcomeComplete Outcome = 2
	// OutcomeIncomplete is a save that stopped without an error report (the
	// job was killed while saving): no .metadata, nothing loads it.
	OutcomeIncomplete Outcome = 3
	// OutcomeFailed is a save or load that raised; Error says why.
	OutcomeFailed Outcome = 4
)

var outcomeNames = map[Outcome]string{OutcomeWriting: "writing", OutcomeComplete: "complete", OutcomeIncomplete: "incomplete", OutcomeFailed: "failed"}

// String returns the outcome's wire name.
func (o Outcome) String() string {
	if n, ok := outcomeNames[o]; ok {
		return n
	}
	return "unknown"
}

// ParseOutcome returns the outcome with the given wire name.
func ParseOutcome(name string) (Outcome, bool) {
	for k, n := range outcomeNames {
		if n == name {
			return k, true
		}
	}
	return 0, false
}

// Checkpoint is what a checkpoint event records.
type Checkpoint struct {
	// Path is the checkpoint's directory, /Volumes/... .
	Path string
	// Outcome is how the save or load ended (or that it is in progress).
	Outcome Outcome
	// Error says why a save or load failed; empty otherwise.
	Error string
	// Bytes is the size of the checkpoint's shards; 0 when unknown.
	Bytes int64
	// Files is the number of shard files; 0 when unknown.
	Files int
	// Ranks is the number of ranks that saved or loaded; 0 when unknown.
	Ranks int
	// Mode is how it was saved: "sync" (dcp.save), "thread" or "process"
	// (dcp.async_save's checkpointer types); empty when unknown.
	Mode string
	// BlockedMs is how long training was blocked by the save, in
	// milliseconds: the staging copy for an async save, the whole save for
	// a synchronous one. -1 when unknown.
	BlockedMs int64
	// Staging names how the state was staged for an async save ("copy",
	// "shared", "pinned"); empty when unknown.
	Staging string
}

// Event is one event of a run.
type Event struct {
	// Seq is the event's place in the run's events, assigned by the store
	// (1, 2, 3, ...): an event replaced by a later append gets a new, higher
	// Seq, so a reader that continues after the last Seq it saw gets every
	// change.
	Seq int64
	// Key identifies the event within its run; appending an event with a
	// stored key replaces the stored event. Empty on append: the store
	// makes a unique one ("seq-<n>").
	Key string
	// Kind says what the event is about.
	Kind Kind
	// Severity says how much it matters; 0 on append means info.
	Severity Severity
	// TimeMs is when it happened, or when a span began, in milliseconds
	// since the Unix epoch.
	TimeMs int64
	// EndMs is when a span ended; 0 for an instant, or for a span still
	// going on (Open).
	EndMs int64
	// Open marks a span that is still going on (a save in progress, GPUs
	// idle now).
	Open bool
	// Node is the node the event is about; empty when not one node's.
	Node string
	// GPU is the index of the GPU the event is about; -1 when none.
	GPU int
	// Step is the training step the event belongs to; -1 when unknown.
	Step int64
	// Message says what happened, for people.
	Message string
	// Checkpoint is set for checkpoint events.
	Checkpoint *Checkpoint
	// Attrs hold other facts, by name ("xid": "79", "reasons":
	// "hw_thermal,sw_power_cap").
	Attrs map[string]string
}

// Query selects a run's events.
type Query struct {
	// RunID is the run; required.
	RunID string
	// Kinds keeps only these kinds; empty means all.
	Kinds []Kind
	// AfterSeq keeps events with a Seq above it (the cursor of the next
	// page, or of a poll for changes).
	AfterSeq int64
	// FromMs and ToMs keep events that overlap [FromMs, ToMs): instants in
	// it, spans that reach into it (open spans reach to now). 0 means no
	// bound.
	FromMs, ToMs int64
	// OpenOnly keeps open spans only.
	OpenOnly bool
	// Limit caps the events returned; 0 means Limits.PageEvents.
	Limit int
}

// Page is a page of events, ordered by Seq.
type Page struct {
	Events []Event
	// NextSeq is the AfterSeq of the next page; 0 when this page holds the
	// last selected event.
	NextSeq int64
}

// Store keeps runs' events. Implementations live in adapter packages
// (internal/sqlstore); runeventstest holds the conformance suite every
// implementation passes.
//
// Contract, for every method:
//   - ctx cancels the call; a cancelled call has no effect or its full
//     effect.
//   - Methods are safe for concurrent use, also from several server
//     replicas sharing the database.
//   - A run that does not exist is errs.NotFound; a deleted run's events
//     can be neither appended nor read (errs.NotFound, with a hint to
//     restore it). A purged run takes its events with it.
//   - Errors are *errs.Error values (errs.Unavailable for a busy database).
type Store interface {
	// AppendEvents stores evs (validated by the Service) on the run in one
	// write, in order, and returns the Seq each got. An event whose Key is
	// stored already replaces the stored event, which then keeps no trace;
	// two events of evs with one key: the later wins. An empty Key gets
	// "seq-<Seq>". When the run would then hold more than maxEvents
	// events, nothing is stored and the error is errs.LimitExceeded. The
	// store does not keep evs.
	AppendEvents(ctx context.Context, runID string, evs []Event, maxEvents int) ([]int64, error)
	// ListEvents returns the events q selects, ordered by Seq, at most
	// q.Limit (which the Service sets). nowMs is the present, for open
	// spans in a time range.
	ListEvents(ctx context.Context, q Query, nowMs int64) (Page, error)
}

// Limits are the caps on run events. Every field is documented for users
// in docs/limits.md; a value of 0 or less means "use the default".
type Limits struct {
	// EventsPerRun caps the events a run holds (replaced ones not counted).
	EventsPerRun int
	// BatchEvents caps the events of one append request.
	BatchEvents int
	// PageEvents caps the events one list returns.
	PageEvents int
	// MessageBytes caps an event's message; longer ones are cut.
	MessageBytes int
	// Attrs caps an event's attributes.
	Attrs int
	// StringBytes caps keys, nodes, paths, modes, attribute names and values
	// and a checkpoint's error (which is cut, not refused).
	StringBytes int
}

// DefaultLimits returns the limits Sextant ships with.
func DefaultLimits() Limits {
	return Limits{EventsPerRun: 100_000, BatchEvents: 1000, PageEvents: 10_000, MessageBytes: 4096, Attrs: 32, StringBytes: 1024}
}

// WithDefaults returns l with every unset field taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.EventsPerRun, d.EventsPerRun)
	set(&l.BatchEvents, d.BatchEvents)
	set(&l.PageEvents, d.PageEvents)
	set(&l.MessageBytes, d.MessageBytes)
	set(&l.Attrs, d.Attrs)
	set(&l.StringBytes, d.StringBytes)
	return l
}

// CheckEvents decides whether adding events to a run that holds have
// stays within max (Limits.EventsPerRun); a store calls it inside the
// transaction that appends, with the count it read there.
func CheckEvents(have, adding, max int) error {
	if have+adding > max {
		return LimitError(have, adding, max)
	}
	return nil
}

// LimitError is the error for a run that would hold more than max events.
func LimitError(have, adding, max int) error {
	return errs.RunLimit("events per run", int64(have), int64(adding), int64(max), "report fewer events (a span replaced in place by its key counts once)")
}

// RunDeleted is the error for reading or adding the events of a deleted
// run.
func RunDeleted(runID string) error {
	return &errs.Error{Code: errs.NotFound, Msg: "Run with id=" + runID + " is deleted: its events cannot be read or added", Hint: "restore the run"}
}

func invalidf(format string, args ...any) error { return errs.Errorf(errs.Invalid, format, args...) }

// maxTimeMs bounds timestamps: year 2286, far past any real event, well
// inside JavaScript's exact integers.
const maxTimeMs = 1 << 53

// normalize validates ev (the i-th of a request) and returns it fit for
// storing: defaults filled in, strings cleaned and cut to the limits.
func normalize(ev Event, i int, l Limits) (Event, error) {
	at := func(format string, args ...any) error {
		return invalidf("events[%d]: "+format, append([]any{i}, args...)...)
	}
	if _, ok := kindNames[ev.Kind]; !ok {
		return ev, at("unknown kind %d", ev.Kind)
	}
	if ev.Severity == 0 {
		ev.Severity = SeverityInfo
	}
	if _, ok := severityNames[ev.Severity]; !ok {
		return ev, at("unknown severity %d", ev.Severity)
	}
	switch {
	case ev.TimeMs <= 0 || ev.TimeMs > maxTimeMs:
		return ev, at("time_ms %d is not a time: give milliseconds since the Unix epoch", ev.TimeMs)
	case ev.EndMs < 0 || ev.EndMs > maxTimeMs:
		return ev, at("end_ms %d is not a time", ev.EndMs)
	case ev.EndMs != 0 && ev.EndMs < ev.TimeMs:
		return ev, at("end_ms %d is before time_ms %d", ev.EndMs, ev.TimeMs)
	case ev.Open && ev.EndMs != 0:
		return ev, at("an open span has no end_ms yet (got %d)", ev.EndMs)
	case ev.GPU < -1 || ev.GPU > 1<<16:
		return ev, at("gpu %d is out of range (-1 for none)", ev.GPU)
	case ev.Step < -1 || ev.Step > maxTimeMs:
		return ev, at("step %d is out of range (-1 for none)", ev.Step)
	case len(ev.Key) > l.StringBytes:
		return ev, at("key has %d bytes, the maximum is %d", len(ev.Key), l.StringBytes)
	case ev.Key != "" && !printable(ev.Key):
		return ev, at("key %q holds control characters", errs.Clip(ev.Key, 80))
	case strings.HasPrefix(ev.Key, "seq-"):
		return ev, at("key %q: keys starting with \"seq-\" are the store's", errs.Clip(ev.Key, 80))
	case len(ev.Attrs) > l.Attrs:
		return ev, at("%d attributes, the maximum is %d", len(ev.Attrs), l.Attrs)
	}
	ev.Node = clean(ev.Node, l.StringBytes)
	ev.Message = clean(ev.Message, l.MessageBytes)
	if len(ev.Attrs) > 0 {
		attrs := make(map[string]string, len(ev.Attrs))
		for k, v := range ev.Attrs {
			if k == "" || len(k) > 128 || !printable(k) {
				return ev, at("attribute name %q must be 1 to 128 printable bytes", errs.Clip(k, 80))
			}
			attrs[k] = clean(v, l.StringBytes)
		}
		ev.Attrs = attrs
	}
	isCkpt := ev.Kind == KindCheckpointSave || ev.Kind == KindCheckpointLoad
	switch {
	case isCkpt && ev.Checkpoint == nil:
		return ev, at("a %s event needs its checkpoint", ev.Kind)
	case !isCkpt && ev.Checkpoint != nil:
		return ev, at("a %s event has no checkpoint", ev.Kind)
	}
	if c := ev.Checkpoint; c != nil {
		cc := *c
		if cc.Outcome == 0 {
			cc.Outcome = OutcomeComplete
		}
		if _, ok := outcomeNames[cc.Outcome]; !ok {
			return ev, at("unknown checkpoint outcome %d", cc.Outcome)
		}
		switch {
		case cc.Path == "":
			return ev, at("Missing value for required parameter 'checkpoint.path'")
		case len(cc.Path) > l.StringBytes || !printable(cc.Path):
			return ev, at("checkpoint.path must be at most %d printable bytes", l.StringBytes)
		case cc.Bytes < 0 || cc.Files < 0 || cc.Ranks < 0 || cc.Ranks > 1<<24:
			return ev, at("checkpoint bytes, files and ranks must be 0 or more")
		case cc.BlockedMs < -1:
			return ev, at("checkpoint.blocked_ms %d is out of range (-1 for unknown)", cc.BlockedMs)
		}
		switch cc.Mode {
		case "", "sync", "thread", "process":
		default:
			return ev, at("checkpoint.mode %q: use sync, thread or process", errs.Clip(cc.Mode, 40))
		}
		cc.Error = clean(cc.Error, l.MessageBytes)
		cc.Staging = clean(cc.Staging, 64)
		ev.Checkpoint = &cc
	}
	ev.Seq = 0
	return ev, nil
}

func printable(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, isControl) < 0
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// clean makes s valid UTF-8 without control characters (other than
// newlines and tabs in long texts) and cuts it to n bytes on a rune
// boundary.
func clean(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexFunc(s, func(r rune) bool { return isControl(r) && r != '\n' && r != '\t' }) >= 0 {
		s = strings.Map(func(r rune) rune {
			if isControl(r) && r != '\n' && r != '\t' {
				return ' '
			}
			return r
		}, s)
	}
	return errs.Clip(s, n)
}
