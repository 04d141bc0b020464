package sqlstore

import "testing"

// TestDriveCheaper checks the index's choice between walking the runs in
// the search's order and starting from the runs a clause selects, on the
// reads benchmark's shapes (page of 1,000).
func TestDriveCheaper(t *testing.T) {
	for _, c := range []struct {
		name      string
		driven, n int
		share     float64
		want      bool
	}{
		// params.lr = (a quarter) AND metrics.loss < 0.5: 1 run in 8 passes.
		{"MetricParam2000", 500, 2000, 0.125, false},
		{"MetricParam20000", 5000, 20000, 0.125, false},
		{"MetricParam100000", 25000, 100000, 0.125, false},
		// tags.sweep = (200 runs) AND metrics.val_loss < 0.5.
		{"Tag2000", 200, 2000, 0.05, true},
		{"Tag100000", 200, 100000, 0.001, true},
		// A clause that selects few runs drives, whatever the others.
		{"FewRuns", 30, 100000, 0.0003, true},
	} {
		if got := driveCheaper(c.driven, c.n, 1000, c.share); got != c.want {
			t.Errorf("%s: drive %v, want %v", c.name, got, c.want)
		}
	}
}
