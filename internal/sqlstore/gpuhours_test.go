package sqlstore_test

import (
	"context"
	"sort"
	"testing"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// TestGPUHoursRuns reads runs' attempts by run, by experiment and all,
// leaving out runs without attempts and deleted runs.
func TestGPUHoursRuns(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
			tr := tracking.NewService(s.Tracking(), tracking.Options{})
			if err := tr.Init(ctx); err != nil {
				t.Fatal(err)
			}
			es := MustOpenEvents(t, s)
			exp, err := tr.CreateExperiment(ctx, "/Shared/gh", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			newRun := func(expID string, attempts int) string {
				r, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: expID, StartTimeMs: 1_800_000_000_000})
				if err != nil {
					t.Fatal(err)
				}
				var evs []runevents.Event
				for i := range attempts {
					evs = append(evs, runevents.Event{Key: "attempt:" + string(rune('a'+i)), Kind: runevents.KindAttempt,
						TimeMs: 1_800_000_000_000 + int64(i)*10_000, EndMs: 1_800_000_005_000 + int64(i)*10_000, Node: "n", GPU: -1, Step: -1,
						Attrs: map[string]string{gpuhours.AttrGPUs: "4"}})
				}
				evs = append(evs, runevents.Event{Key: "note", Kind: runevents.KindNote, TimeMs: 1_800_000_000_000, GPU: -1, Step: -1})
				if _, err := es.AppendEvents(ctx, r.Info.RunID, evs, 1000); err != nil {
					t.Fatal(err)
				}
				return r.Info.RunID
			}
			a, b2, none, deleted := newRun(exp, 2), newRun("0", 1), newRun(exp, 0), newRun(exp, 1)
			if err := tr.DeleteRun(ctx, deleted); err != nil {
				t.Fatal(err)
			}
			ids := func(q gpuhours.Query) map[string]int {
				t.Helper()
				runs, err := es.Runs(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]int{}
				for _, r := range runs {
					out[r.RunID] = len(r.Attempts)
					if !r.Running || r.ExperimentID == "" { // created RUNNING
						t.Errorf("run %+v", r)
					}
				}
				return out
			}
			check := func(got, want map[string]int) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("got %v, want %v", got, want)
				}
				for k, v := range want {
					if got[k] != v {
						t.Fatalf("got %v, want %v", got, want)
					}
				}
			}
			check(ids(gpuhours.Query{RunIDs: []string{a, none, deleted}}), map[string]int{a: 2})
			check(ids(gpuhours.Query{ExperimentIDs: []string{exp, "nope"}}), map[string]int{a: 2})
			check(ids(gpuhours.Query{All: true}), map[string]int{a: 2, b2: 1})
			xs, err := es.Experiments(ctx)
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, x := range xs {
				names = append(names, x.Name)
			}
			sort.Strings(names)
			if len(names) != 2 || names[0] != "/Shared/gh" || names[1] != "Default" {
				t.Fatalf("experiments %v", names)
			}
		})
	}
}
