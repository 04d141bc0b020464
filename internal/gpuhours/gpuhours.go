// Package gpuhours computes the GPU-hours, and their cost, of runs from
// the attempts `sextant run` records on them (runevents.KindAttempt).
//
// An attempt is one execution of the job on one node: a run that was
// resumed (sextant run --resume, --run-id) has several, failed and killed
// ones included. An attempt's GPU-hours are the number of distinct GPUs
// sampled for the run on its node during the attempt times the attempt's
// wall time, from the job's start to its end. A run's are the sum over its
// attempts (and nodes); an experiment's, the sum over its runs; a folder's,
// the sum over the experiments under it. A run without attempts, or whose
// attempts sampled no GPU, has none.
//
// The package imports no HTTP or SQL package: internal/sqlstore reads the
// attempts and internal/httpapi serves the totals.
package gpuhours

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
)

// Attribute names of an attempt event.
const (
	// AttrGPUs is the number of distinct GPUs sampled during the attempt.
	AttrGPUs = "gpus"
	// AttrModel is the product name of the attempt's GPUs ("NVIDIA H100
	// 80GB HBM3").
	AttrModel = "gpu_model"
	// AttrStatus is how the attempt ended (FINISHED, FAILED, KILLED).
	AttrStatus = "status"
)

// msPerHour converts milliseconds to hours.
const msPerHour = 3_600_000.0

// Run is what the computation needs to know about a run.
type Run struct {
	RunID        string
	ExperimentID string
	// Running is true while the run's status is RUNNING: its open
	// attempts count until now.
	Running bool
	// EndMs is the run's end time; 0 when it has none.
	EndMs int64
	// Attempts are the run's attempt events (other kinds are ignored).
	Attempts []runevents.Event
}

// Attempt is one attempt's use of GPUs.
type Attempt struct {
	// Node is the node the attempt ran on.
	Node string
	// StartMs and EndMs bound the attempt, in milliseconds since the Unix
	// epoch. For an open attempt EndMs is where it is counted to (see
	// Compute).
	StartMs, EndMs int64
	// Open is true when the launcher recorded no end (the job is running,
	// or the launcher died with it).
	Open bool
	// GPUs is the number of distinct GPUs sampled; Model their name.
	GPUs  int
	Model string
	// Status is how the attempt ended; empty while open.
	Status string
	// GPUHours is GPUs × (EndMs − StartMs) in hours.
	GPUHours float64
	// Price is the price of one GPU-hour of Model; Priced is false when
	// no price applies (no price set, or none for this model).
	Price  float64
	Priced bool
	// Cost is GPUHours × Price.
	Cost float64
	// rank is the job's node rank the attempt ran as (from its event key,
	// attempt:<rank>:<start>), "" when unknown.
	rank string
}

// Usage is the GPU-hours and cost of a run, or a sum of runs.
type Usage struct {
	GPUHours float64
	// Cost is the sum of the priced attempts' costs.
	Cost float64
	// Attempts are the attempts, in start order (only for a run).
	Attempts []Attempt
}

// Add adds u2's totals (not its attempts) to u.
func (u *Usage) Add(u2 Usage) {
	u.GPUHours += u2.GPUHours
	u.Cost += u2.Cost
}

// Compute returns the usage of run r at nowMs, priced by p (nil: no
// prices).
//
// An open attempt (no end recorded) counts until the start of the next
// attempt in its place (the same node rank, on whichever node), else until the run's end when the run has ended,
// else until nowMs when the run is running; an open attempt of an ended
// run with no end time counts nothing. Negative spans count nothing.
func Compute(r Run, p *Prices, nowMs int64) Usage {
	var as []Attempt
	for _, e := range r.Attempts {
		if e.Kind != runevents.KindAttempt {
			continue
		}
		a := Attempt{Node: e.Node, StartMs: e.TimeMs, EndMs: e.EndMs, Open: e.Open, Model: e.Attrs[AttrModel], Status: e.Attrs[AttrStatus], rank: attemptRank(e.Key)}
		if n, err := strconv.Atoi(e.Attrs[AttrGPUs]); err == nil && n > 0 {
			a.GPUs = n
		}
		as = append(as, a)
	}
	sort.SliceStable(as, func(i, j int) bool {
		if as[i].StartMs != as[j].StartMs {
			return as[i].StartMs < as[j].StartMs
		}
		return as[i].Node < as[j].Node
	})
	var u Usage
	for i := range as {
		a := &as[i]
		if a.Open || a.EndMs == 0 {
			a.EndMs = openEnd(as, i, r, nowMs)
		}
		if a.EndMs < a.StartMs {
			a.EndMs = a.StartMs
		}
		a.GPUHours = float64(a.GPUs) * float64(a.EndMs-a.StartMs) / msPerHour
		if p != nil {
			a.Price, a.Priced = p.For(a.Model)
			if a.Priced {
				a.Cost = a.GPUHours * a.Price
			}
		}
		u.GPUHours += a.GPUHours
		u.Cost += a.Cost
	}
	u.Attempts = as
	return u
}

// sameSlot reports whether b takes a's place in the job: the same node
// rank, or where a rank is unknown the same node. A job resumed after a
// lost node runs on another host, as the same rank.
func sameSlot(a, b Attempt) bool {
	if a.rank != "" && b.rank != "" {
		return a.rank == b.rank
	}
	return a.Node == b.Node
}

// attemptRank is the node rank in an attempt event's key, "" if none.
func attemptRank(key string) string {
	rest, ok := strings.CutPrefix(key, "attempt:")
	if !ok {
		return ""
	}
	rank, _, _ := strings.Cut(rest, ":")
	return rank
}

// openEnd is where the open attempt as[i] is counted to.
func openEnd(as []Attempt, i int, r Run, nowMs int64) int64 {
	a := as[i]
	end := int64(math.MaxInt64)
	if r.Running {
		end = nowMs
	} else if r.EndMs > 0 {
		end = r.EndMs
	}
	for _, b := range as[i+1:] {
		if sameSlot(a, b) && b.StartMs >= a.StartMs {
			end = min(end, b.StartMs)
			break
		}
	}
	if end == math.MaxInt64 {
		return a.StartMs
	}
	return end
}

// Prices are prices of a GPU-hour, by GPU model.
type Prices struct {
	// byModel maps a lower-case part of a model name to its price,
	// longest first.
	byModel []modelPrice
	// fallback is the price of the other models ("*"); hasFallback says
	// whether there is one.
	fallback    float64
	hasFallback bool
	spec        string
}

type modelPrice struct {
	part  string
	price float64
}

// ParsePrices parses a price list: one price for every GPU ("2.50"), or
// MODEL=PRICE pairs separated by commas ("H100=4.00,A100=2.50,*=1.00"),
// where MODEL is matched, without regard to case, as a part of the GPU's
// product name ("NVIDIA H100 80GB HBM3"; the longest matching part wins)
// and "*" prices every other model. An empty spec returns nil: no prices.
func ParsePrices(spec string) (*Prices, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	p := &Prices{spec: spec}
	if v, err := parsePrice(spec); err == nil {
		p.fallback, p.hasFallback = v, true
		return p, nil
	} else if !strings.Contains(spec, "=") {
		return nil, err
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" {
			return nil, errs.Errorf(errs.Invalid, "GPU-hour price %q: give PRICE or MODEL=PRICE pairs separated by commas (H100=4.00,*=1.00)", item)
		}
		if seen[k] {
			return nil, errs.Errorf(errs.Invalid, "GPU-hour price: model %q is priced twice", k)
		}
		seen[k] = true
		price, err := parsePrice(v)
		if err != nil {
			return nil, err
		}
		if k == "*" {
			p.fallback, p.hasFallback = price, true
			continue
		}
		p.byModel = append(p.byModel, modelPrice{part: k, price: price})
	}
	sort.SliceStable(p.byModel, func(i, j int) bool { return len(p.byModel[i].part) > len(p.byModel[j].part) })
	return p, nil
}

func parsePrice(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errs.Errorf(errs.Invalid, "GPU-hour price %q is not a number of 0 or more", strings.TrimSpace(s))
	}
	return v, nil
}

// For returns the price of a GPU-hour of model, and false when none
// applies. A nil *Prices prices nothing.
func (p *Prices) For(model string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	m := strings.ToLower(model)
	for _, mp := range p.byModel {
		if m != "" && strings.Contains(m, mp.part) {
			return mp.price, true
		}
	}
	return p.fallback, p.hasFallback
}

// String returns the spec the prices were parsed from.
func (p *Prices) String() string {
	if p == nil {
		return ""
	}
	return p.spec
}

// Folder returns the cleaned folder path ("/Users/alice@example.com/"
// for "/Users/alice@example.com"), which experiment names under it start
// with, or an error for a path that is not absolute.
func Folder(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", errs.Errorf(errs.Invalid, "folder %q: give an absolute path, such as /Users/alice@example.com or /Shared", errs.Clip(path, 80))
	}
	return strings.TrimRight(path, "/") + "/", nil
}

// InFolder reports whether the experiment named name is under folder (as
// Folder returns it); the root folder "/" holds every experiment.
func InFolder(name, folder string) bool {
	return folder == "/" || strings.HasPrefix(name, folder)
}

// FormatAmount formats GPU-hours or a cost for people: two decimals, four
// below 0.01.
func FormatAmount(h float64) string {
	switch {
	case h == 0:
		return "0"
	case h < 0.01:
		return fmt.Sprintf("%.4f", h)
	}
	return fmt.Sprintf("%.2f", h)
}

// Query selects runs for Store.Runs: the runs RunIDs names, and those of
// the experiments ExperimentIDs names; both empty with All set selects
// every run.
type Query struct {
	RunIDs        []string
	ExperimentIDs []string
	All           bool
}

// Experiment is an experiment's id and name, for folder totals.
type Experiment struct {
	ID   string
	Name string
}

// Store reads what the GPU-hours are computed from. internal/sqlstore
// implements it. Methods are safe for concurrent use; errors are
// *errs.Error values.
type Store interface {
	// Runs returns the active (not deleted) runs q selects that have
	// attempts, each with its attempt events, ordered by run. A run
	// without attempts is left out.
	Runs(ctx context.Context, q Query) ([]Run, error)
	// Experiments returns the active experiments, ordered by id.
	Experiments(ctx context.Context) ([]Experiment, error)
}
