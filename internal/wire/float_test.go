package wire

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// strconvFloat is AppendFloat as strconv alone writes it: what the fast
// path must match byte for byte.
func strconvFloat(v float64) string {
	abs := math.Abs(v)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	return strconv.FormatFloat(v, fmtc, -1, 64)
}

func checkFloat(t *testing.T, v float64) {
	t.Helper()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if got, want := string(AppendFloat(nil, v)), strconvFloat(v); got != want {
		t.Fatalf("AppendFloat(%b, bits %#x) = %s, strconv writes %s", v, math.Float64bits(v), got, want)
	}
}

// TestAppendFloatMatchesStrconv holds the shortest-digit path to strconv
// on the values metrics carry (uniform, losses, integers, counters) and on
// the edges of its own arithmetic: powers of two (whose lower neighbour
// is half as far), powers of ten and their neighbours, the ends of the
// range it takes, and ties between two shortest decimals.
func TestAppendFloatMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 2_000_000
	if testing.Short() {
		n = 200_000
	}
	for range n {
		checkFloat(t, r.Float64())
		checkFloat(t, -r.Float64()*1000)
		checkFloat(t, math.Float64frombits(r.Uint64()))
		checkFloat(t, math.Exp(r.NormFloat64()*10))
		checkFloat(t, float64(r.Int64N(1<<53)))
		checkFloat(t, float64(float32(r.Float64()))) // float32 metrics widened
	}
	for e := -1074; e <= 1023; e++ {
		p := math.Ldexp(1, e)
		for _, v := range []float64{p, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)), 3 * p, p * 1.5} {
			checkFloat(t, v)
			checkFloat(t, -v)
		}
	}
	for e := -325; e <= 308; e++ {
		p, _ := strconv.ParseFloat("1e"+strconv.Itoa(e), 64)
		for _, v := range []float64{p, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)), 5 * p, 9.999999999999999 * p} {
			checkFloat(t, v)
		}
	}
	for _, v := range []float64{1e-6, math.Nextafter(1e-6, 0), 1e21, math.Nextafter(1e21, 0), 0.1, 0.2, 0.3, 1.0 / 3,
		2.0 / 3, 5e-324, math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53, 1<<53 + 2, 1<<53 - 1, 9007199254740993,
		123456789012345678, 0.000001234, 100, 1e20, 1.7976931348623157e308, 2.2250738585072014e-308, 4.35, 0.5, 1e-5} {
		checkFloat(t, v)
		checkFloat(t, -v)
	}
}

// FuzzAppendFloat holds AppendFloat to strconv for any float64's bits.
func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 0.1, 1e-6, 1e21, 123.456, 1 << 60, 5e-324, math.MaxFloat64} {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, b uint64) { checkFloat(t, math.Float64frombits(b)) })
}

func BenchmarkAppendFloat(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	vs := make([]float64, 4096)
	for i := range vs {
		vs[i] = r.Float64()
	}
	buf := make([]byte, 0, 64)
	b.Run("sextant", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			buf = AppendFloat(buf[:0], vs[i%len(vs)])
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			buf = strconv.AppendFloat(buf[:0], vs[i%len(vs)], 'f', -1, 64)
		}
	})
}
