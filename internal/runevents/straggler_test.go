package runevents_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/runevents"
)

func TestSlowRanks(t *testing.T) {
	rank := func(r int, secs ...float64) runevents.RankStepTimes {
		return runevents.RankStepTimes{Rank: r, Node: "n" + string(rune('0'+r)), GPU: r, Seconds: secs}
	}
	for name, tc := range map[string]struct {
		ranks  []runevents.RankStepTimes
		margin float64
		want   []int
	}{
		"OneSlowOfFour": {ranks: []runevents.RankStepTimes{rank(0, 1, 1.1, 0.9), rank(1, 1, 1), rank(2, 2, 2.1, 1.9), rank(3, 1.05)}, margin: 0.2, want: []int{2}},
		// Against the median of the others, not their mean: one very fast
		// rank does not make the others slow.
		"MedianNotMean": {ranks: []runevents.RankStepTimes{rank(0, 0.01), rank(1, 1), rank(2, 1.1), rank(3, 1)}, margin: 0.2, want: nil},
		// Within the margin: 15% slower with a 20% margin is fine, with 10% it is slow.
		"WithinMargin": {ranks: []runevents.RankStepTimes{rank(0, 1), rank(1, 1.15), rank(2, 1)}, margin: 0.2, want: nil},
		"OverMargin":   {ranks: []runevents.RankStepTimes{rank(0, 1), rank(1, 1.15), rank(2, 1)}, margin: 0.1, want: []int{1}},
		// The rank's median: a single slow step among fast ones is not slowness.
		"OneSlowStep": {ranks: []runevents.RankStepTimes{rank(0, 1, 1, 9), rank(1, 1, 1, 1)}, margin: 0.2, want: nil},
		// Two ranks: the slow one is compared with the other alone, and
		// the fast one is not "slow" against it.
		"TwoRanks": {ranks: []runevents.RankStepTimes{rank(0, 0.05, 0.05), rank(1, 0.25, 0.26)}, margin: 0.5, want: []int{1}},
		// Ranks without step times in the window take no part.
		"OneReporting": {ranks: []runevents.RankStepTimes{rank(0), rank(1, 5)}, margin: 0.2, want: nil},
		"Empty":        {ranks: nil, margin: 0.2, want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			var got []int
			for _, s := range runevents.SlowRanks(tc.ranks, tc.margin) {
				got = append(got, s.Rank)
				if s.Node != tc.ranks[s.Rank].Node || s.GPU != s.Rank || s.StepTimeS <= s.OthersS*(1+tc.margin) {
					t.Errorf("slow rank %+v", s)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("slow ranks %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeSteps serves step times per rank as the test sets them.
type fakeSteps struct {
	mu    sync.Mutex
	ranks []runevents.RankStepTimes
}

func (f *fakeSteps) RecentStepTimes(ctx context.Context, runID string, sinceMs int64) ([]runevents.RankStepTimes, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ranks), nil
}

// TestWatcherStragglers: with a 20% margin and 60 s, a rank 2x slower
// than the others is flagged only once it has been slow at every look for
// 60 s (a look where it caught up starts the count again), as a span
// naming the rank, its node and GPU, notified but without the alert tag;
// the span closes when the rank catches up, and when the run ends.
func TestWatcherStragglers(t *testing.T) {
	svc, f, t0 := watchedRun(t, "r")
	id := f.run.RunID
	now := t0
	steps := &fakeSteps{}
	w := runevents.NewWatcher(svc, f, runevents.WatchOptions{StallFor: -1, IdleFor: -1, StragglerFor: 60 * time.Second, Every: 10 * time.Second,
		Progress: steps, Tags: f, Notifier: f, Now: func() time.Time { return time.UnixMilli(now) }})
	ctx := context.Background()
	set := func(slow float64) {
		steps.mu.Lock()
		steps.ranks = []runevents.RankStepTimes{
			{Rank: 0, Node: "a", GPU: 0, Seconds: []float64{1, 1.02}},
			{Rank: 1, Node: "a", GPU: 1, Seconds: []float64{slow, slow}},
			{Rank: 2, Node: "b", GPU: 0, Seconds: []float64{0.98, 1}},
		}
		steps.mu.Unlock()
	}
	look := func() {
		t.Helper()
		now += 10_000
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spans := func() []runevents.Event {
		t.Helper()
		evs, err := svc.All(ctx, runevents.Query{RunID: id, Kinds: []runevents.Kind{runevents.KindStraggler}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	set(2)
	for range 3 {
		look()
	}
	set(1) // caught up once: the count starts again
	look()
	set(2)
	look()
	start := now
	for range 6 {
		look()
		if got := spans(); len(got) != 0 && now-start < 60_000 {
			t.Fatalf("flagged after %d ms slow: %+v", now-start, got)
		}
	}
	got := spans()
	if len(got) != 1 {
		t.Fatalf("after 60 s slow: %d straggler spans, want 1", len(got))
	}
	ev := got[0]
	if !ev.Open || ev.TimeMs != start || ev.Node != "a" || ev.GPU != 1 || ev.Attrs["rank"] != "1" || ev.Severity != runevents.SeverityWarning {
		t.Fatalf("span %+v", ev)
	}
	if _, ok := f.tags[runevents.TagAlert]; ok || len(f.sent) != 1 || f.sent[0].Closed {
		t.Fatalf("tags %v, notifications %+v", f.tags, f.sent)
	}
	look() // still slow: the same span
	if len(spans()) != 1 {
		t.Fatal("a second span for the same slowness")
	}
	set(1.05)
	look()
	if got := spans(); len(got) != 1 || got[0].Open || got[0].EndMs != now {
		t.Fatalf("after catching up: %+v", got)
	}
	// Slow again, and the run ends with the span open: it closes.
	set(3)
	for range 8 {
		look()
	}
	if got := spans(); len(got) != 2 || !got[1].Open {
		t.Fatalf("slow again: %+v", got)
	}
	f.mu.Lock()
	f.run.RunID = "00000000000000000000000000000000"
	f.mu.Unlock()
	steps.mu.Lock()
	steps.ranks = nil
	steps.mu.Unlock()
	look()
	for _, ev := range spans() {
		if ev.Open {
			t.Fatalf("span still open after the run ended: %+v", ev)
		}
	}
}

// TestSlowRanksOthersMedian: the others' median SlowRanks takes from the
// medians sorted once is the median of the other ranks' medians, computed
// here the long way, for even and odd counts and ties.
func TestSlowRanksOthersMedian(t *testing.T) {
	med := func(xs []float64) float64 {
		s := slices.Sorted(slices.Values(xs))
		if n := len(s); n%2 == 1 {
			return s[n/2]
		} else {
			return (s[n/2-1] + s[n/2]) / 2
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 2; n < 40; n++ {
		ranks := make([]runevents.RankStepTimes, n)
		for r := range ranks {
			ranks[r] = runevents.RankStepTimes{Rank: r, GPU: -1}
			for range 1 + rng.IntN(5) {
				ranks[r].Seconds = append(ranks[r].Seconds, float64(1+rng.IntN(8))/4) // coarse: ties
			}
		}
		var want []runevents.Slow
		for a := range ranks {
			var others []float64
			for b := range ranks {
				if b != a {
					others = append(others, med(ranks[b].Seconds))
				}
			}
			if m, o := med(ranks[a].Seconds), med(others); m > o*1.2 {
				want = append(want, runevents.Slow{Rank: a, GPU: -1, StepTimeS: m, OthersS: o})
			}
		}
		if got := runevents.SlowRanks(ranks, 0.2); !slices.Equal(got, want) {
			t.Fatalf("%d ranks: got %+v, want %+v", n, got, want)
		}
	}
}
