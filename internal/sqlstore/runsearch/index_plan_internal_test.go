package runsearch

import "testing"

// TestChoosePlan checks the index's choice between walking the runs in
// the search's order, starting from the runs a clause selects and walking
// the runs an equality selects in a led order, on the reads benchmark's
// shapes (page of 1,000).
func TestChoosePlan(t *testing.T) {
	for _, c := range []struct {
		name        string
		n           int
		share       float64
		driven, led int
		ledKept     bool
		want        plan
	}{
		// params.lr = (a quarter) AND metrics.loss < 0.5: 1 run in 8
		// passes; the runs with the lr are a quarter of a walk's.
		{"MetricParam2000", 2000, 0.125, 500, 500, false, planLed},
		{"MetricParam20000", 20000, 0.125, 5000, 5000, false, planLed},
		{"MetricParam100000", 100000, 0.125, 25000, 25000, true, planLed},
		// The same without the equality: a walk.
		{"MetricOnly100000", 100000, 0.5, 50000, -1, false, planWalk},
		// An equality most runs pass does not halve the walk.
		{"BroadParam100000", 100000, 0.45, 50000, 90000, false, planWalk},
		// tags.sweep = (200 runs) AND metrics.val_loss < 0.5: the 200 runs
		// are sorted rather than a led order of 100,000 runs sorted for
		// them; a led order kept is walked.
		{"Tag2000", 2000, 0.05, 200, 200, false, planDrive},
		{"Tag100000", 100000, 0.001, 200, 200, false, planDrive},
		{"Tag100000Kept", 100000, 0.001, 200, 200, true, planLed},
		// A clause that selects few runs drives, whatever the others.
		{"FewRuns", 100000, 0.0003, 30, -1, false, planDrive},
		// An equality no run passes: nothing to sort.
		{"NoRun", 100000, 0, 0, 0, false, planDrive},
	} {
		if got := choosePlan(c.n, 1000, c.share, c.driven, c.led, c.ledKept); got != c.want {
			t.Errorf("%s: plan %d, want %d", c.name, got, c.want)
		}
	}
}
