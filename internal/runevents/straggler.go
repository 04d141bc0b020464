package runevents

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Stragglers: a rank of a running run whose step time stays above the
// median of the other ranks' by more than a margin, for a while. The
// watcher reads each run's recent step times per rank (StepTimes, from the
// run's progress reports), applies SlowRanks at every look, and opens a
// KindStraggler span on a rank found slow at every look for
// WatchOptions.StragglerFor; the span closes at the first look that finds
// the rank no longer slow, or when the run ends.

// RankStepTimes are one rank's recent step times.
type RankStepTimes struct {
	Rank int
	// Node is the host the rank runs on; empty when unknown.
	Node string
	// GPU is the index of the rank's GPU on its node; -1 when unknown.
	GPU int
	// Seconds are the rank's step times in the window asked for, in
	// seconds, in any order.
	Seconds []float64
}

// StepTimes reads runs' recent step times per rank; internal/progress
// implements it over the run's progress metrics.
type StepTimes interface {
	// RecentStepTimes returns, for each rank of the run that reported
	// progress, its step times reported at sinceMs or later (at most a few
	// hundred of the newest per rank). A run without progress reports gets
	// none and no error.
	RecentStepTimes(ctx context.Context, runID string, sinceMs int64) ([]RankStepTimes, error)
}

// Slow is a rank SlowRanks found slower than the others.
type Slow struct {
	Rank int
	Node string
	GPU  int
	// StepTimeS is the rank's median step time, OthersS the median of the
	// other ranks' medians, both in seconds.
	StepTimeS, OthersS float64
}

// SlowRanks returns the ranks whose median step time is more than margin
// (0.2: 20%) above the median of the other ranks' median step times.
// Ranks without step times take no part; with fewer than two ranks left
// there is no comparison and nothing is slow.
func SlowRanks(ranks []RankStepTimes, margin float64) []Slow {
	type rm struct {
		i int
		m float64
	}
	var meds []rm
	for i := range ranks {
		if len(ranks[i].Seconds) > 0 {
			meds = append(meds, rm{i, median(ranks[i].Seconds)})
		}
	}
	if len(meds) < 2 {
		return nil
	}
	// The other ranks' median, for each rank, comes from the medians sorted
	// once: leaving out the rank at sorted place p shifts the places after
	// it down by one. (Sorting the others afresh for each rank cost a
	// thousand sorts of a thousand, and as many copies, at 1,000 ranks.)
	slices.SortFunc(meds, func(a, b rm) int { return cmp.Compare(a.m, b.m) })
	n := len(meds) - 1                // the others' count
	other := func(p, k int) float64 { // the k-th smallest of the others of place p
		if k >= p {
			k++
		}
		return meds[k].m
	}
	type hit struct {
		i    int
		m, o float64
	}
	var hits []hit
	for p, a := range meds {
		o := other(p, n/2)
		if n%2 == 0 {
			o = (other(p, n/2-1) + o) / 2
		}
		if o > 0 && a.m > o*(1+margin) {
			hits = append(hits, hit{a.i, a.m, o})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(a.i, b.i) }) // in the ranks' order
	var out []Slow
	for _, h := range hits {
		r := &ranks[h.i]
		out = append(out, Slow{Rank: r.Rank, Node: r.Node, GPU: r.GPU, StepTimeS: h.m, OthersS: h.o})
	}
	return out
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is not changed.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// stragglerWindow is how far back each look reads step times: two looks,
// and at least 10 s so that a look sees several steps of slow jobs.
func (w *Watcher) stragglerWindow() time.Duration {
	return max(2*w.opts.Every, 10*time.Second)
}

func (w *Watcher) checkStragglers(ctx context.Context, r *RunActivity, now int64) error {
	ranks, err := w.opts.Progress.RecentStepTimes(ctx, r.RunID, now-w.stragglerWindow().Milliseconds())
	if err != nil {
		return err
	}
	w.mu.Lock()
	sus := w.suspects[r.RunID]
	w.mu.Unlock()
	if len(ranks) == 0 && len(sus) == 0 {
		return nil
	}
	open, err := w.events.All(ctx, Query{RunID: r.RunID, Kinds: []Kind{KindStraggler}, OpenOnly: true})
	if err != nil {
		return err
	}
	openByRank := map[int]*Event{}
	for i := range open {
		if rk, err := strconv.Atoi(open[i].Attrs["rank"]); err == nil {
			openByRank[rk] = &open[i]
		}
	}
	slow := map[int]Slow{}
	for _, s := range SlowRanks(ranks, w.opts.StragglerMargin) {
		slow[s.Rank] = s
	}
	reported := map[int]bool{}
	for i := range ranks {
		reported[ranks[i].Rank] = len(ranks[i].Seconds) > 0
	}
	next := map[int]int64{}
	for rank, s := range slow {
		since, ok := sus[rank]
		if !ok {
			since = now
		}
		next[rank] = since
		if openByRank[rank] != nil || now-since < w.opts.StragglerFor.Milliseconds() {
			continue
		}
		where := "node " + s.Node
		if s.Node == "" {
			where = "node unknown"
		}
		if s.GPU >= 0 {
			where += ", GPU " + strconv.Itoa(s.GPU)
		}
		ev := Event{
			Key: fmt.Sprintf("straggler:%d:%d", rank, since), Kind: KindStraggler, Severity: SeverityWarning, TimeMs: since, Open: true,
			Node: s.Node, GPU: s.GPU, Step: -1,
			Message: fmt.Sprintf("rank %d (%s) is a straggler: median step time %s against %s for the other ranks (+%.0f%%) for %s",
				rank, where, fmtSec(s.StepTimeS), fmtSec(s.OthersS), 100*(s.StepTimeS/s.OthersS-1), dur(now-since)),
			Attrs: map[string]string{"rank": strconv.Itoa(rank), "step_time_s": fmtNum(s.StepTimeS), "others_median_s": fmtNum(s.OthersS),
				"margin": strconv.FormatFloat(w.opts.StragglerMargin, 'f', -1, 64)},
		}
		if err := w.open(ctx, r, ev); err != nil {
			return err
		}
	}
	// A rank that reported in the window and is no longer slow has caught
	// up; one that did not report is left as it was (a hang is another
	// check's business).
	for rank, ev := range openByRank {
		if _, still := slow[rank]; still || !reported[rank] {
			continue
		}
		msg := fmt.Sprintf("rank %d was a straggler for %s", rank, dur(now-ev.TimeMs))
		if err := w.close(ctx, r, ev, now, msg); err != nil {
			return err
		}
	}
	for rank, since := range sus {
		if _, ok := next[rank]; !ok && !reported[rank] {
			next[rank] = since
		}
	}
	w.mu.Lock()
	if len(next) == 0 {
		delete(w.suspects, r.RunID)
	} else {
		w.suspects[r.RunID] = next
	}
	w.mu.Unlock()
	return nil
}

func fmtSec(s float64) string {
	switch {
	case s >= 10:
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	case s >= 0.1:
		return strconv.FormatFloat(s, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(s*1000, 'f', 1, 64) + " ms"
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
