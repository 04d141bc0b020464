package gpu

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// Node health history: every health finding (Health) of every node's
// GPUs, whether or not a run held the GPU, kept far longer than the
// samples (DefaultHealthRetention), so that a node that keeps failing
// can be told from one bad day of one job. NodesHealth summarises it per
// node and flags the nodes a user should avoid (FlagRule).

// HealthRecord is one finding in a node's history.
type HealthRecord struct {
	// Key identifies the finding (the run event's key, see Health): a
	// batch sent again gives the same keys and is stored once.
	Key  string
	Node string
	// GPUIndex, GPUUUID and GPUModel name the GPU.
	GPUIndex int
	GPUUUID  string
	GPUModel string
	// Kind is "xid", "ecc", "throttle" or "lost" (HealthKind.String).
	Kind string
	// TimeMs is when it was seen; for a throttle span, when it started.
	TimeMs int64
	// EndMs is when a throttle span ended (0 while Open or for other
	// kinds).
	EndMs int64
	// Open is set on a throttle span that has not ended.
	Open bool
	// Xid is the Xid error code (0 for other kinds).
	Xid     int
	Message string
	// RunIDs are the runs that held the GPU then, when known.
	RunIDs []string
}

// HealthEnd closes the open throttle spans of a node's GPU that started
// at or before TimeMs.
type HealthEnd struct {
	Node    string
	GPUUUID string
	// GPUIndex names the GPU (with GPUUUID, "" when it has none).
	GPUIndex int
	TimeMs   int64
}

// HealthQuery selects a page of node history, newest first.
type HealthQuery struct {
	// Node, when set, selects one node's records; else every node's.
	Node string
	// FromMs selects records with TimeMs >= FromMs (0: all).
	FromMs int64
	// BeforeMs and BeforeKey continue a page: records strictly before
	// (BeforeMs, BeforeKey) in (TimeMs, Key) descending order. BeforeMs 0
	// means from the newest.
	BeforeMs  int64
	BeforeKey string
	// Limit is the most records returned; 0 or less means 100.
	Limit int
}

// HealthHistory keeps node health history. *sqlstore.GPUStore
// implements it.
//
// Contract: as Store's (ctx cancels, safe for concurrent use by several
// replicas, *errs.Error values).
type HealthHistory interface {
	// AppendHealth stores the records and then closes, with each end, the open throttle spans of its GPU
	// that started at or before it. A record is not stored when one of
	// the same node, GPU (index and UUID), kind and Xid code is stored
	// with a TimeMs within HealthMergeWindowMs of it (the same Key, a
	// resend; the same fault seen by two samplers of the node, a node's
	// agent and a run's; a fault repeated sample after sample) or, for
	// a throttle start, while a span of the GPU is open; the stored
	// record then gains the RunIDs when it had none. So replaying the same
	// call changes nothing, and a throttle start sent again after its
	// span closed stays closed.
	AppendHealth(ctx context.Context, recs []HealthRecord, ends []HealthEnd) error
	// ListHealth returns the records q selects, newest first (TimeMs,
	// then Key, descending).
	ListHealth(ctx context.Context, q HealthQuery) ([]HealthRecord, error)
	// PruneHealth deletes the records with TimeMs before cutoffMs and
	// returns how many.
	PruneHealth(ctx context.Context, cutoffMs int64) (int64, error)
}

// HealthMergeWindowMs is how close in time two findings of the same
// kind on the same GPU must be to be kept as one (HealthHistory).
const HealthMergeWindowMs = healthLookback

// DefaultHealthRetention is how long node health history is kept by
// default.
const DefaultHealthRetention = 90 * 24 * time.Hour

// FlagRule says when a node is flagged as unhealthy. Its faults are Xid
// errors, ECC error rises and lost GPUs; throttling is counted and shown
// but never flags a node on its own (heat or power limits slow a job
// down, they do not break it).
type FlagRule struct {
	// Window is the time over which faults are counted; 0 means 7 days.
	Window time.Duration
	// MaxFaults flags a node with at least this many faults within
	// Window; 0 means 2.
	MaxFaults int
	// LostWindow flags a node that lost a GPU within it; 0 means 24
	// hours, a negative value turns this part of the rule off.
	LostWindow time.Duration
}

// DefaultFlagRule returns the rule with its defaults: 2 faults in 7 days,
// or a lost GPU in 24 hours.
func DefaultFlagRule() FlagRule {
	return FlagRule{Window: 7 * 24 * time.Hour, MaxFaults: 2, LostWindow: 24 * time.Hour}
}

func (r FlagRule) withDefaults() FlagRule {
	d := DefaultFlagRule()
	if r.Window <= 0 {
		r.Window = d.Window
	}
	if r.MaxFaults <= 0 {
		r.MaxFaults = d.MaxFaults
	}
	if r.LostWindow == 0 {
		r.LostWindow = d.LostWindow
	}
	return r
}

// HealthCounts counts findings by kind.
type HealthCounts struct {
	Xid, ECC, Throttle, Lost int
}

// Faults is the number of faults: Xid errors, ECC rises and lost GPUs.
func (c HealthCounts) Faults() int { return c.Xid + c.ECC + c.Lost }

func (c *HealthCounts) add(kind string) {
	switch kind {
	case "xid":
		c.Xid++
	case "ecc":
		c.ECC++
	case "throttle":
		c.Throttle++
	case "lost":
		c.Lost++
	}
}

// NodeGPU is a GPU of a node.
type NodeGPU struct {
	Index int
	UUID  string
	Model string
}

// NodeHealth is a node's health summary.
type NodeHealth struct {
	Node string
	// GPUs are the node's GPUs in its newest sample (for a node without
	// samples kept, those its history names), by index.
	GPUs []NodeGPU
	// LastSeenMs is the time of the newest sample kept (0: none).
	LastSeenMs int64
	// LastFaultMs is the time of the newest finding of any kind counted
	// (0: none).
	LastFaultMs int64
	// Counts24h and Counts7d count the findings of the last 24 hours and
	// of the rule's Window (7 days by default).
	Counts24h, Counts7d HealthCounts
	// Flagged is set when the rule flags the node; Reason says why.
	Flagged bool
	Reason  string
}

// Flag applies the rule: lostRecent is the number of lost GPUs within
// the rule's LostWindow, c the counts within its Window. It returns
// whether the node is flagged and why.
func (r FlagRule) Flag(lostRecent int, c HealthCounts) (bool, string) {
	r = r.withDefaults()
	var why []string
	if r.LostWindow > 0 && lostRecent > 0 {
		why = append(why, fmt.Sprintf("lost a GPU in the last %s", fmtWindow(r.LostWindow)))
	}
	if n := c.Faults(); n >= r.MaxFaults {
		var parts []string
		for _, k := range []struct {
			n    int
			name string
		}{{c.Xid, "Xid"}, {c.ECC, "ECC"}, {c.Lost, "lost GPU"}} {
			if k.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", k.n, k.name))
			}
		}
		why = append(why, fmt.Sprintf("%d faults in %s (%s)", n, fmtWindow(r.Window), strings.Join(parts, ", ")))
	}
	return len(why) > 0, strings.Join(why, "; ")
}

func fmtWindow(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "24 hours"
	case d > day && d%day == 0:
		return strconv.Itoa(int(d/day)) + " days"
	}
	return d.String()
}

// Summarize builds the health summary of each node named in latest (the
// newest sample of each node) or recs (history records, at least those
// of the rule's windows before nowMs), ordered by node name.
func (r FlagRule) Summarize(nowMs int64, latest []NodeSample, recs []HealthRecord) []NodeHealth {
	r = r.withDefaults()
	by := map[string]*NodeHealth{}
	lost := map[string]int{}
	get := func(node string) *NodeHealth {
		h := by[node]
		if h == nil {
			h = &NodeHealth{Node: node}
			by[node] = h
		}
		return h
	}
	for _, ns := range latest {
		h := get(ns.Node)
		h.LastSeenMs = ns.TimestampMs
		for _, g := range ns.GPUs {
			h.GPUs = append(h.GPUs, NodeGPU{Index: g.Index, UUID: g.UUID, Model: g.Name})
		}
	}
	win := nowMs - r.Window.Milliseconds()
	day := nowMs - (24 * time.Hour).Milliseconds()
	lostWin := nowMs - r.LostWindow.Milliseconds()
	for _, rec := range recs {
		h := get(rec.Node)
		if rec.TimeMs < min(win, day, lostWin) {
			continue
		}
		h.LastFaultMs = max(h.LastFaultMs, rec.TimeMs)
		if h.LastSeenMs == 0 && !slices.ContainsFunc(h.GPUs, func(g NodeGPU) bool { return g.Index == rec.GPUIndex && g.UUID == rec.GPUUUID }) {
			h.GPUs = append(h.GPUs, NodeGPU{Index: rec.GPUIndex, UUID: rec.GPUUUID, Model: rec.GPUModel})
		}
		if rec.TimeMs >= win {
			h.Counts7d.add(rec.Kind)
		}
		if rec.TimeMs >= day {
			h.Counts24h.add(rec.Kind)
		}
		if rec.Kind == "lost" && r.LostWindow > 0 && rec.TimeMs >= lostWin {
			lost[rec.Node]++
		}
	}
	out := make([]NodeHealth, 0, len(by))
	for _, h := range by {
		sort.SliceStable(h.GPUs, func(i, j int) bool { return h.GPUs[i].Index < h.GPUs[j].Index })
		h.Flagged, h.Reason = r.Flag(lost[h.Node], h.Counts7d)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// healthRecords turns the findings of a batch of node's samples into
// history records and throttle ends; model names each GPU by Key.
func healthRecords(node, runID string, fs []Finding, model map[string]string) ([]HealthRecord, []HealthEnd) {
	var recs []HealthRecord
	var ends []HealthEnd
	for _, f := range fs {
		e := f.Event
		uuid := e.Attrs["uuid"]
		if f.Kind == HealthThrottleEnd {
			ends = append(ends, HealthEnd{Node: node, GPUUUID: uuid, GPUIndex: e.GPU, TimeMs: e.TimeMs})
			continue
		}
		key := uuid
		if key == "" {
			key = "index:" + strconv.Itoa(e.GPU)
		}
		rec := HealthRecord{Key: e.Key, Node: node, GPUIndex: e.GPU, GPUUUID: uuid, GPUModel: model[key], Kind: f.Kind.String(),
			TimeMs: e.TimeMs, Open: e.Open, Message: e.Message}
		if x, err := strconv.Atoi(e.Attrs["xid"]); err == nil {
			rec.Xid = x
		}
		if runID != "" {
			rec.RunIDs = []string{runID}
		}
		recs = append(recs, rec)
	}
	return recs, ends
}

// HealthOptions are the node health options of a Service.
type HealthOptions struct {
	// History, when set, keeps every node's health findings.
	History HealthHistory
	// Rule flags nodes; zero fields take DefaultFlagRule's values.
	Rule FlagRule
}

// maxSummaryRecords bounds the history records one summary reads: a
// fleet whose faults exceed it is summarised from its newest ones.
const maxSummaryRecords = 100_000

// NodesHealth returns the health summary of every node known from its
// samples or its history, by node name.
func (s *Service) NodesHealth(ctx context.Context) ([]NodeHealth, error) {
	latest, err := s.store.Latest(ctx, Selection{})
	if err != nil {
		return nil, err
	}
	rule := s.opts.Health.Rule.withDefaults()
	now := s.now().UnixMilli()
	var recs []HealthRecord
	if h := s.opts.Health.History; h != nil {
		q := HealthQuery{FromMs: now - max(rule.Window, rule.LostWindow, 24*time.Hour).Milliseconds(), Limit: 1000}
		for len(recs) < maxSummaryRecords {
			page, err := h.ListHealth(ctx, q)
			if err != nil {
				return nil, err
			}
			recs = append(recs, page...)
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			q.BeforeMs, q.BeforeKey = last.TimeMs, last.Key
		}
	}
	return rule.Summarize(now, latest, recs), nil
}

// MaxHealthPage is the most records one page of node history holds.
const MaxHealthPage = 1000

// NodeHealthHistory returns a page of a node's history (every node's when
// q.Node is empty), newest first.
func (s *Service) NodeHealthHistory(ctx context.Context, q HealthQuery) ([]HealthRecord, error) {
	if q.Node != "" {
		if err := ValidateNode(q.Node); err != nil {
			return nil, err
		}
	}
	if q.Limit < 0 || q.Limit > MaxHealthPage {
		return nil, errs.Errorf(errs.Invalid, "max_results must be between 1 and %d, got %d", MaxHealthPage, q.Limit)
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	if s.opts.Health.History == nil {
		return nil, nil
	}
	return s.opts.Health.History.ListHealth(ctx, q)
}

// String describes the rule in words, for the API and the UI.
func (r FlagRule) String() string {
	r = r.withDefaults()
	s := fmt.Sprintf("flagged at %d or more faults (Xid, ECC, lost GPU) in %s", r.MaxFaults, fmtWindow(r.Window))
	if r.LostWindow > 0 {
		s += fmt.Sprintf(", or a lost GPU in the last %s", fmtWindow(r.LostWindow))
	}
	return s + "; throttling is shown but never flags a node"
}

// FlagRule returns the rule that flags nodes, its defaults filled in.
func (s *Service) FlagRule() FlagRule { return s.opts.Health.Rule.withDefaults() }
