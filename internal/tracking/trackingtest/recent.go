package trackingtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// testReadRecent: Store.ReadRecent (through Service.RecentPoints) finds
// each series' points at its newest steps from a time on, in one pass over
// many series, before and after compaction, with a series' chunks
// together and in step order.
func testReadRecent(t *testing.T, e *env) {
	id := e.mustRun("0", "recent").Info.RunID
	const t0 = 1_800_000_000_000
	// "a": steps 0..99 at t0+step, in 10 requests (chunks) of 10 steps;
	// "b": steps 0..4, all old; "c": one recent step; and enough keys
	// "k<i>" to take the store more than one query.
	for i := range 10 {
		var b []tracking.Metric
		for s := int64(i * 10); s < int64(i*10+10); s++ {
			b = append(b, metric("a", s, t0+s, float64(s)))
		}
		e.mustLog(id, tracking.Batch{Metrics: b})
	}
	var b []tracking.Metric
	for s := range int64(5) {
		b = append(b, metric("b", s, t0-1000+s, 1))
	}
	b = append(b, metric("c", 7, t0+99, 7))
	e.mustLog(id, tracking.Batch{Metrics: b})
	const many = 1200
	keys := []string{"a", "b", "c", "missing"}
	for lo := 0; lo < many; lo += 1000 {
		b = b[:0]
		for i := lo; i < min(lo+1000, many); i++ {
			k := fmt.Sprintf("k%d", i)
			keys = append(keys, k)
			b = append(b, metric(k, 3, t0+int64(i), float64(i)))
		}
		e.mustLog(id, tracking.Batch{Metrics: b})
	}

	read := func(keys []string, lastSteps int, since int64) map[string][]metrics.Point {
		t.Helper()
		got := map[string][]metrics.Point{}
		err := e.svc.RecentPoints(e.ctx, id, keys, lastSteps, since, func(key string, pts []metrics.Point) error {
			if _, dup := got[key]; dup {
				return fmt.Errorf("key %q twice", key)
			}
			got[key] = slices.SortedFunc(slices.Values(pts), func(p, q metrics.Point) int { return metrics.Compare(p, q) })
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	steps := func(lo, hi int64) []metrics.Point {
		var out []metrics.Point
		for s := lo; s <= hi; s++ {
			out = append(out, metrics.Point{Step: s, TimestampMs: t0 + s, Value: float64(s)})
		}
		return out
	}
	check := func(what string) {
		t.Helper()
		// The newest 15 steps of "a" (85..99), those at t0+90 or later.
		got := read(keys, 15, t0+90)
		if want := steps(90, 99); !slices.EqualFunc(got["a"], want, metrics.Equal) {
			t.Fatalf("%s: a = %v, want %v", what, got["a"], want)
		}
		if _, ok := got["b"]; ok {
			t.Fatalf("%s: b has no recent points, got %v", what, got["b"])
		}
		if c := got["c"]; len(c) != 1 || c[0].Step != 7 {
			t.Fatalf("%s: c = %v", what, c)
		}
		for i := 90; i < many; i++ {
			k := fmt.Sprintf("k%d", i)
			if p := got[k]; len(p) != 1 || p[0].Value != float64(i) {
				t.Fatalf("%s: %s = %v", what, k, p)
			}
		}
		if len(got) != 2+many-90 {
			t.Fatalf("%s: %d series, want %d", what, len(got), 2+many-90)
		}
		// The step window alone: the newest 3 steps of "a", from any time.
		if got := read([]string{"a", "b"}, 3, 0); !slices.EqualFunc(got["a"], steps(97, 99), metrics.Equal) || len(got["b"]) != 3 {
			t.Fatalf("%s: last 3 steps: %v", what, got)
		}
		// The store hands a series' chunks together, in step order.
		var seen []string
		prev := tracking.RecentChunk{}
		err := e.store.ReadRecent(e.ctx, id, keys, 100, 0, func(c tracking.RecentChunk) error {
			pts, err := metrics.DecodeChunk(nil, c.Data)
			if err != nil {
				return err
			}
			if c.Key != prev.Key {
				if slices.Contains(seen, c.Key) {
					return fmt.Errorf("chunks of %q apart", c.Key)
				}
				seen = append(seen, c.Key)
			} else if pts[0].Step < prev.MaxStep {
				return fmt.Errorf("chunks of %q out of step order", c.Key)
			}
			if c.Key == "a" && c.MaxStep != 99 {
				return fmt.Errorf("a: max step %d, want 99", c.MaxStep)
			}
			prev = tracking.RecentChunk{Key: c.Key, MaxStep: pts[len(pts)-1].Step}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(seen) != 3+many {
			t.Fatalf("%s: %d series, want %d", what, len(seen), 3+many)
		}
	}
	check("fresh")
	if c, ok := e.store.(Compactor); ok {
		if err := c.Compact(e.ctx); err != nil {
			t.Fatal(err)
		}
		check("compacted")
	}

	// fn's error comes back as it is; no keys read nothing.
	stop := errors.New("stop")
	if err := e.svc.RecentPoints(e.ctx, id, keys, 10, 0, func(string, []metrics.Point) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
	if err := e.svc.RecentPoints(e.ctx, id, nil, 10, 0, func(string, []metrics.Point) error { return stop }); err != nil {
		t.Fatalf("no keys: %v", err)
	}
	err := e.svc.RecentPoints(e.ctx, "0123456789abcdef0123456789abcdef", keys, 10, 0, func(string, []metrics.Point) error { return nil })
	wantCode(t, err, errs.NotFound)
	err = e.svc.RecentPoints(e.ctx, id, keys, 0, 0, func(string, []metrics.Point) error { return nil })
	wantCode(t, err, errs.Invalid, "last steps")
}
