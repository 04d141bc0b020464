package gpuhours_test

import (
	"math"
	"testing"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/runevents"
)

const hour = 3_600_000

func att(node string, start, end int64, open bool, gpus, model, status string) runevents.Event {
	return runevents.Event{Kind: runevents.KindAttempt, Node: node, TimeMs: start, EndMs: end, Open: open,
		Attrs: map[string]string{gpuhours.AttrGPUs: gpus, gpuhours.AttrModel: model, gpuhours.AttrStatus: status}}
}

// keyed gives an attempt the key the launcher gives it.
func keyed(e runevents.Event, key string) runevents.Event { e.Key = key; return e }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCompute(t *testing.T) {
	h100 := "NVIDIA H100 80GB HBM3"
	tests := map[string]struct {
		run   gpuhours.Run
		now   int64
		hours float64
		each  []float64
	}{
		"NoAttempts": {run: gpuhours.Run{EndMs: 5 * hour}, hours: 0},
		"NoGPUs": {run: gpuhours.Run{Attempts: []runevents.Event{att("a", 0, 2*hour, false, "0", "", "FINISHED")}},
			hours: 0, each: []float64{0}},
		"KilledThenResumed": {run: gpuhours.Run{EndMs: 10 * hour, Attempts: []runevents.Event{
			att("a", 5*hour, 10*hour, false, "2", h100, "FINISHED"),
			att("a", 0, 1*hour, false, "2", h100, "KILLED"),
		}}, hours: 12, each: []float64{2, 10}},
		"GapNotCounted": {run: gpuhours.Run{Attempts: []runevents.Event{
			att("a", 0, hour/2, false, "4", h100, "FAILED"),
			att("a", 3*hour, 3*hour+hour/2, false, "4", h100, "FINISHED"),
		}}, hours: 4, each: []float64{2, 2}},
		"SeveralNodes": {run: gpuhours.Run{Attempts: []runevents.Event{
			att("a", 0, hour, false, "8", h100, "FINISHED"),
			att("b", 0, hour, false, "8", h100, "FINISHED"),
		}}, hours: 16, each: []float64{8, 8}},
		"OpenRunningCountsToNow": {run: gpuhours.Run{Running: true, Attempts: []runevents.Event{
			att("a", hour, 0, true, "2", h100, ""),
		}}, now: 4 * hour, hours: 6, each: []float64{6}},
		"OpenEndsAtNextAttemptOnNode": {run: gpuhours.Run{Running: true, Attempts: []runevents.Event{
			att("a", 0, 0, true, "1", h100, ""),
			att("b", hour/2, 0, true, "1", h100, ""),
			att("a", 2*hour, 0, true, "1", h100, ""),
		}}, now: 3 * hour, hours: 2 + 2.5 + 1, each: []float64{2, 2.5, 1}},
		"OpenEndsAtItsRanksNextAttemptElsewhere": {run: gpuhours.Run{EndMs: 2 * hour, Attempts: []runevents.Event{
			keyed(att("lost", 0, 0, true, "1", h100, ""), "attempt:0:0"),
			keyed(att("other", hour, 2*hour, false, "1", h100, "FINISHED"), "attempt:0:3600000"),
		}}, now: 9 * hour, hours: 2, each: []float64{1, 1}},
		"OpenEndsAtRunEnd": {run: gpuhours.Run{EndMs: 3 * hour, Attempts: []runevents.Event{
			att("a", hour, 0, true, "3", h100, ""),
		}}, now: 9 * hour, hours: 6, each: []float64{6}},
		"OpenOfEndedRunWithoutEnd": {run: gpuhours.Run{Attempts: []runevents.Event{
			att("a", hour, 0, true, "3", h100, ""),
		}}, now: 9 * hour, hours: 0, each: []float64{0}},
		"OtherKindsIgnored": {run: gpuhours.Run{Attempts: []runevents.Event{
			{Kind: runevents.KindIdle, TimeMs: 0, EndMs: hour},
		}}, hours: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u := gpuhours.Compute(tc.run, nil, tc.now)
			if !near(u.GPUHours, tc.hours) {
				t.Fatalf("GPUHours = %v, want %v (%+v)", u.GPUHours, tc.hours, u.Attempts)
			}
			if len(u.Attempts) != len(tc.each) {
				t.Fatalf("%d attempts, want %d", len(u.Attempts), len(tc.each))
			}
			for i, a := range u.Attempts {
				if !near(a.GPUHours, tc.each[i]) {
					t.Errorf("attempt %d: %v GPU-hours, want %v", i, a.GPUHours, tc.each[i])
				}
				if i > 0 && a.StartMs < u.Attempts[i-1].StartMs {
					t.Errorf("attempts out of order")
				}
			}
		})
	}
}

func TestComputeCost(t *testing.T) {
	p, err := gpuhours.ParsePrices("H100=4, A100=2.5, *=1")
	if err != nil {
		t.Fatal(err)
	}
	u := gpuhours.Compute(gpuhours.Run{Attempts: []runevents.Event{
		att("a", 0, hour, false, "2", "NVIDIA H100 80GB HBM3", "FINISHED"),
		att("b", 0, hour, false, "1", "NVIDIA A100-SXM4-80GB", "FINISHED"),
		att("c", 0, hour, false, "1", "Tesla T4", "FINISHED"),
	}}, p, 0)
	if !near(u.GPUHours, 4) || !near(u.Cost, 8+2.5+1) {
		t.Fatalf("hours %v cost %v", u.GPUHours, u.Cost)
	}
	only, _ := gpuhours.ParsePrices("H100=4")
	u = gpuhours.Compute(gpuhours.Run{Attempts: []runevents.Event{
		att("a", 0, hour, false, "1", "Tesla T4", "FINISHED"),
	}}, only, 0)
	if u.Attempts[0].Priced || u.Cost != 0 {
		t.Fatalf("a model without price got %+v", u.Attempts[0])
	}
}

func TestParsePrices(t *testing.T) {
	f := func(spec, model string, want float64, priced bool) {
		t.Helper()
		p, err := gpuhours.ParsePrices(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		got, ok := p.For(model)
		if ok != priced || !near(got, want) {
			t.Fatalf("%q For(%q) = %v, %v; want %v, %v", spec, model, got, ok, want, priced)
		}
	}
	f("", "H100", 0, false)
	f("2.50", "anything", 2.5, true)
	f("H100=4.00,A100=2.50,*=1.00", "NVIDIA H100 80GB HBM3", 4, true)
	f("h100=4,H100 NVL=5", "NVIDIA H100 NVL", 5, true) // the longest part wins
	f("H100=4", "NVIDIA A100", 0, false)
	for _, bad := range []string{"x", "-1", "H100", "H100=x", "=2", "H100=1,h100=2", "NaN", "Inf"} {
		if _, err := gpuhours.ParsePrices(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestFolder(t *testing.T) {
	f, err := gpuhours.Folder("/Users/alice@example.com/")
	if err != nil || f != "/Users/alice@example.com/" {
		t.Fatal(f, err)
	}
	if !gpuhours.InFolder("/Users/alice@example.com/mnist", f) || gpuhours.InFolder("/Users/alice@example.com2/x", f) {
		t.Fatal("InFolder")
	}
	if _, err := gpuhours.Folder("Users"); err == nil {
		t.Fatal("relative folder accepted")
	}
	if root, _ := gpuhours.Folder("/"); !gpuhours.InFolder("Default", root) {
		t.Fatal("root holds every experiment")
	}
}
