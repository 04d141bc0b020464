package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

func TestDecimalCounter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var c decimalCounter
	v := int64(-3)
	for i := range 200_000 {
		switch r.IntN(10) {
		case 0:
			v = r.Int64() - r.Int64() // anything, a reset
		case 1:
			v -= r.Int64N(100) // backwards
		case 2:
			v = math.MaxInt64 - r.Int64N(3)
		default:
			v += r.Int64N(1 << uint(r.IntN(22)))
		}
		if v < 0 && r.IntN(2) == 0 {
			v = -v
		}
		got := string(c.append(nil, v))
		if want := strconv.FormatInt(v, 10); got != want {
			t.Fatalf("value %d: %s, want %s", i, got, want)
		}
	}
	for _, v := range []int64{0, 9, 10, 99, 100, 999999, 1000000, 0, 1} {
		if got, want := string(c.append(nil, v)), strconv.FormatInt(v, 10); got != want {
			t.Fatalf("%s, want %s", got, want)
		}
	}
}

// historySeries returns a page of n points with the values, steps and
// timestamps that are hard to format (NaN, infinities, -0, the extremes
// of float64 and int64, runs of small increments that carry digits, jumps
// back and forth) and contexts that change along the page.
func historySeries(r *rand.Rand, n int) *tracking.HistoryBuffer {
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1, -1, 1e-7, 1e-6, 9.999999e-7,
		1e20, 1e21, -1e21, 1e300, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3, float64(float32(0.1)), 123456789.125}
	contexts := []*tracking.MetricContext{
		nil,
		{ModelID: "m-1"},
		{DatasetName: "train \"set\"\n<&>", DatasetDigest: "abc"},
		{DatasetName: "é€😀", DatasetDigest: "d", ModelID: "m-\u2028"},
		{DatasetDigest: "only-digest"},
	}
	hb := &tracking.HistoryBuffer{}
	step, ts := int64(0), int64(1_700_000_000_000)
	for i := range n {
		var v float64
		switch r.IntN(3) {
		case 0:
			v = specials[r.IntN(len(specials))]
		case 1:
			v = math.Float64frombits(r.Uint64()) // any bits: NaNs, subnormals, huge
		default:
			v = r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		}
		switch r.IntN(20) {
		case 0:
			step, ts = r.Int64()-r.Int64(), r.Int64()-r.Int64() // anything, negative too
		case 1:
			step, ts = math.MaxInt64-r.Int64N(3), math.MinInt64+r.Int64N(3)
		case 2:
			step, ts = step-r.Int64N(1000), ts-r.Int64N(1000) // backwards
		case 3:
			step, ts = 9_999_999, 999_999_999_999 // the next increment carries every digit
		default:
			step, ts = step+r.Int64N(3), ts+r.Int64N(1<<uint(r.IntN(24)))
		}
		hb.Points = append(hb.Points, metrics.Point{Step: step, TimestampMs: ts, Value: v})
		if i == 0 || r.IntN(50) == 0 {
			hb.Contexts = append(hb.Contexts, tracking.ContextRun{Start: i, Context: contexts[r.IntN(len(contexts))]})
		}
	}
	return hb
}

// TestHistoryEncodersAgree checks the two encoders of a history point
// against each other and against encoding/json, byte for byte: a page
// written by AppendHistory, cut into parts at random points as the server
// cuts it among goroutines, is what AppendHistoryPoint writes point by
// point, and each point is what encoding/json writes for the Metric
// shape.
func TestHistoryEncodersAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, key := range []string{"loss", "a \"quoted\\\" key", "é/€/😀", "<html>&\u2028", ""} {
		for _, n := range []int{0, 1, 2, 17, 5000} {
			hb := historySeries(r, n)
			prefix := HistoryPrefix(key)

			var fast []byte
			for from := 0; from < n; {
				to := min(n, from+1+r.IntN(1500))
				fast = append(fast, AppendHistory(nil, prefix, hb, from, to)...)
				from = to
			}

			var one, std []byte
			for i := range hb.Points {
				c, _ := hb.ContextAt(i, 0)
				p := tracking.HistoryPoint{Point: hb.Points[i], Context: c}
				if i > 0 {
					one = append(one, ',')
					std = append(std, ',')
				}
				one = AppendHistoryPoint(one, key, &p, "")
				m := Metric{Key: key, Value: Double(p.Value), Timestamp: p.TimestampMs, Step: p.Step}
				if c != nil {
					m.DatasetName, m.DatasetDigest, m.ModelID = c.DatasetName, c.DatasetDigest, c.ModelID
				}
				b, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				std = append(std, b...)

				// With a run id (the bulk routes), against encoding/json.
				m.RunID = "r\"1"
				b, _ = json.Marshal(m)
				if got := AppendHistoryPoint(nil, key, &p, m.RunID); !bytes.Equal(got, b) {
					t.Fatalf("key %q point %d with a run id:\n%s\nencoding/json writes\n%s", key, i, got, b)
				}
			}
			if !bytes.Equal(fast, one) {
				at := 0
				for at < min(len(fast), len(one)) && fast[at] == one[at] {
					at++
				}
				t.Fatalf("key %q, %d points: AppendHistory and AppendHistoryPoint differ at byte %d:\n%s\n%s",
					key, n, at, fast[max(at-80, 0):min(at+80, len(fast))], one[max(at-80, 0):min(at+80, len(one))])
			}
			if !bytes.Equal(one, std) {
				t.Fatalf("key %q, %d points: AppendHistoryPoint and encoding/json differ", key, n)
			}
		}
	}
}

// BenchmarkAppendHistory encodes a page of 25,000 points as the
// benchmark's history has them: uniform random values, steps one apart,
// timestamps a few milliseconds apart.
func BenchmarkAppendHistory(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	hb := &tracking.HistoryBuffer{}
	ts := int64(1_700_000_000_000)
	for i := range 25_000 {
		ts += 1 + r.Int64N(20)
		hb.Points = append(hb.Points, metrics.Point{Step: int64(i), TimestampMs: ts, Value: r.Float64()})
	}
	prefix := HistoryPrefix("loss")
	var dst []byte
	for b.Loop() {
		dst = AppendHistory(dst[:0], prefix, hb, 0, len(hb.Points))
	}
	b.SetBytes(int64(len(dst)))
}
