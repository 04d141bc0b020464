package metrics

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// startMs is a plausible wall-clock timestamp (November 2023).
const startMs = 1_700_000_000_000

// genSeries returns n points shaped like a training loss: steps 0..n-1,
// timestamps 5 to 15 ms apart (uniform jitter), and values chosen by kind:
//
//	float32  1/(1+step) plus Gaussian noise, rounded to float32, as
//	         loss.item() on a float32 tensor gives
//	float64  the same curve and noise in full float64 precision
//	const    0.5 throughout, and timestamps exactly 100 ms apart, as a
//	         timer-driven logger of a flat metric produces
//	loss32   a float32 loss that stays well above its noise:
//	         0.1 + 2*exp(-step/1000) plus Gaussian noise of 0.01
//	mixed    float32, except for one float64 value at step 100
//	smooth64 a loss without noise in float64: 0.1 + 2*exp(-step/1000)
//	smooth32 the same rounded to float32
//	cosine   a cosine learning-rate schedule from 3e-4 over 100,000 steps
//	linear   a linear learning-rate warm-up to 3e-4 over 10,000 steps
func genSeries(kind string, n int, seed uint64) []Point {
	r := rand.New(rand.NewPCG(seed, 0x5e47a47))
	pts := make([]Point, n)
	ts := int64(startMs)
	for i := range pts {
		curve := 1 / (1 + float64(i))
		var v float64
		switch kind {
		case "float32":
			v = float64(float32(curve + r.NormFloat64()*0.01))
			ts += 5 + r.Int64N(11)
		case "float64":
			v = curve + r.NormFloat64()*0.01
			ts += 5 + r.Int64N(11)
		case "const":
			v = 0.5
			ts += 100
		case "loss32":
			v = float64(float32(0.1 + 2*math.Exp(-float64(i)/1000) + r.NormFloat64()*0.01))
			ts += 5 + r.Int64N(11)
		case "smooth64":
			v = 0.1 + 2*math.Exp(-float64(i)/1000)
			ts += 5 + r.Int64N(11)
		case "smooth32":
			v = float64(float32(0.1 + 2*math.Exp(-float64(i)/1000)))
			ts += 5 + r.Int64N(11)
		case "cosine":
			v = 0.5 * 3e-4 * (1 + math.Cos(math.Pi*float64(i)/1e5))
			ts += 5 + r.Int64N(11)
		case "linear":
			v = 3e-4 * float64(i) / 1e4
			ts += 5 + r.Int64N(11)
		case "mixed":
			v = float64(float32(curve + r.NormFloat64()*0.01))
			if i == 100 {
				v = 0.1
			}
			ts += 5 + r.Int64N(11)
		default:
			panic("unknown series kind " + kind)
		}
		pts[i] = Point{Step: int64(i), TimestampMs: ts, Value: v}
	}
	return pts
}

// mustAppendChunk encodes pts or stops the test.
func mustAppendChunk(tb testing.TB, dst []byte, pts []Point) []byte {
	tb.Helper()
	b, err := AppendChunk(dst, pts)
	if err != nil {
		tb.Fatalf("AppendChunk: %v", err)
	}
	return b
}

// checkRoundTrip encodes pts, decodes them every way there is, and checks
// that every point comes back with its exact bits (NaNs as math.NaN). It
// returns the chunk AppendChunk made; the other value codecs that can
// store pts are checked too.
func checkRoundTrip(t *testing.T, pts []Point) []byte {
	t.Helper()
	chunk := mustAppendChunk(t, nil, pts)
	checkDecode(t, pts, chunk)
	quick, err := AppendChunkQuick(nil, pts)
	if err != nil {
		t.Fatalf("AppendChunkQuick: %v", err)
	}
	checkDecode(t, pts, quick)
	if len(pts) == 0 {
		return chunk
	}
	for flags := range byte(flagsKnown + 1) {
		c := codecOf(flags)
		if (c.width == 32 && !allFloat32(pts)) || (c.order != 0 && c.rot != 0) {
			continue
		}
		head := binary.AppendUvarint([]byte{ChunkVersion}, uint64(len(pts)))
		checkDecode(t, pts, appendChunk(head, pts, c))
	}
	return chunk
}

// checkDecode checks that chunk decodes to pts.
func checkDecode(t *testing.T, pts []Point, chunk []byte) {
	t.Helper()
	got, err := DecodeChunk(nil, chunk)
	if err != nil {
		t.Fatalf("DecodeChunk: %v", err)
	}
	if len(got) != len(pts) {
		t.Fatalf("decoded %d points, want %d", len(got), len(pts))
	}
	for i, p := range pts {
		g := got[i]
		if g.Step != p.Step || g.TimestampMs != p.TimestampMs ||
			math.Float64bits(g.Value) != valueBits(p.Value) {
			t.Fatalf("point %d: got %+v (bits %#x), want %+v (bits %#x)",
				i, g, math.Float64bits(g.Value), p, valueBits(p.Value))
		}
	}
	n, err := ChunkLen(chunk)
	if err != nil || n != len(pts) {
		t.Fatalf("ChunkLen = %d, %v; want %d", n, err, len(pts))
	}
	steps, err := DecodeChunkSteps(nil, chunk)
	if err != nil {
		t.Fatalf("DecodeChunkSteps: %v", err)
	}
	for i, p := range pts {
		if steps[i] != p.Step {
			t.Fatalf("DecodeChunkSteps: step %d = %d, want %d", i, steps[i], p.Step)
		}
	}
}

func TestChunkRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for name, tc := range map[string]struct {
		pts []Point
	}{
		"Empty":    {},
		"OnePoint": {pts: []Point{{Step: 3, TimestampMs: startMs, Value: 0.25}}},
		"TwoPoints": {pts: []Point{
			{Step: 0, TimestampMs: startMs, Value: 1},
			{Step: 1, TimestampMs: startMs + 10, Value: 0.5},
		}},
		"RegularSteps": {pts: func() []Point {
			pts := make([]Point, 1000)
			for i := range pts {
				pts[i] = Point{Step: int64(i), TimestampMs: startMs + int64(i)*100, Value: float64(i % 7)}
			}
			return pts
		}()},
		"StepsBy50": {pts: func() []Point {
			pts := make([]Point, 500)
			for i := range pts {
				pts[i] = Point{Step: int64(i) * 50, TimestampMs: startMs + int64(i)*3000, Value: 1 / float64(i+1)}
			}
			return pts
		}()},
		"IrregularSteps": {pts: func() []Point {
			pts := make([]Point, 2000)
			step, ts := int64(0), int64(startMs)
			for i := range pts {
				step += r.Int64N(1 << uint(r.IntN(40)))
				ts += r.Int64N(1 << uint(r.IntN(30)))
				pts[i] = Point{Step: step, TimestampMs: ts, Value: r.Float64()}
			}
			SortPoints(pts)
			return pts
		}()},
		"DuplicateSteps": {pts: []Point{
			{0, startMs, 1}, {0, startMs + 5, 1}, {0, startMs + 5, 2},
			{1, startMs, 3}, {1, startMs, 3}, {1, startMs + 1, 3}, {2, startMs - 100, 0},
		}},
		"ExtremeSteps": {pts: []Point{
			{math.MinInt64, math.MaxInt64, 1}, {math.MinInt64 + 1, math.MinInt64, 2},
			{-1 << 53, 0, 3}, {-1, -1, 4}, {0, math.MaxInt64, 5}, {1, math.MinInt64, 6},
			{1 << 53, 1, 7}, {math.MaxInt64 - 1, -5, 8}, {math.MaxInt64, math.MaxInt64, 9},
			{math.MaxInt64, math.MaxInt64, 10},
		}},
		"ExtremeTimestamps": {pts: []Point{
			{0, math.MinInt64, 0}, {0, math.MinInt64 + 1, 0}, {0, -1, 0}, {0, 0, 0},
			{0, math.MaxInt64 - 1, 0}, {0, math.MaxInt64, 0}, {1, math.MinInt64, 0}, {1, math.MaxInt64, 0},
		}},
		"SpecialValues": {pts: []Point{
			{0, 0, math.NaN()}, {1, 0, otherNaN}, {2, 0, posInf}, {3, 0, negInf}, {4, 0, negZ},
			{5, 0, 0}, {6, 0, negZ}, {7, 0, math.SmallestNonzeroFloat64}, {8, 0, -math.MaxFloat64},
			{9, 0, math.MaxFloat64}, {10, 0, math.NaN()}, {11, 0, 1}, {12, 0, math.Float64frombits(1)},
			{13, 0, math.Float64frombits(1 << 63)}, {14, 0, math.Float64frombits(math.MaxUint64 >> 1)},
		}},
		"FirstValueNaN":  {pts: []Point{{0, 0, otherNaN}, {1, 0, 1}}},
		"Float32Origin":  {pts: genSeries("float32", 3000, 1)},
		"Float64Noise":   {pts: genSeries("float64", 3000, 2)},
		"ConstantValues": {pts: genSeries("const", 3000, 3)},
		"RandomBits": {pts: func() []Point {
			pts := make([]Point, 1000)
			for i := range pts {
				pts[i] = Point{Step: int64(i), Value: math.Float64frombits(r.Uint64())}
			}
			return pts
		}()},
		"AlternatingMagnitudes": {pts: func() []Point {
			pts := make([]Point, 300)
			for i := range pts {
				v := []float64{1e300, -1e-300, 3, math.SmallestNonzeroFloat64, 1}[i%5]
				pts[i] = Point{Step: int64(i), Value: v}
			}
			return pts
		}()},
		"EveryDoDClass": {pts: func() []Point {
			// Deltas whose delta-of-deltas sit on both edges of every
			// class of both codes, including the 64-bit escape.
			var deltas []int64
			for _, w := range []uint{4, 6, 8, 12, 13, 20, 32, 40, 62} {
				lim := int64(1) << (w - 1)
				deltas = append(deltas, 0, lim-1, 0, lim, 0, -lim, 0, -lim-1, 0)
			}
			pts := make([]Point, len(deltas)+1)
			step, ts := int64(0), int64(0)
			var d int64
			for i, dd := range deltas {
				d += dd
				step += d
				ts -= d
				pts[i+1] = Point{Step: step, TimestampMs: ts}
			}
			SortPoints(pts)
			return pts
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			checkRoundTrip(t, tc.pts)
		})
	}
}

// TestAppendChunkQuick checks the codec AppendChunkQuick picks (XOR on
// the IEEE-754 pattern, 32-bit keys for float32 values) and that it
// refuses unsorted points as AppendChunk does.
func TestAppendChunkQuick(t *testing.T) {
	for _, tc := range []struct {
		series string
		want   byte
	}{{"float32", flagFloat32}, {"float64", 0}, {"const", flagFloat32}} {
		pts := genSeries(tc.series, 500, 9)
		chunk, err := AppendChunkQuick(nil, pts)
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseChunk(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.codec.flags(); got != tc.want {
			t.Errorf("%s: flags %#x, want %#x", tc.series, got, tc.want)
		}
	}
	pts := []Point{{Step: 2}, {Step: 1}}
	if _, err := AppendChunkQuick(nil, pts); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("unsorted points: err %v, want ErrUnsorted", err)
	}
}

// TestAppendChunkAllocatesOnce: the encoders size dst from the chosen
// codec's estimate, so a chunk is one allocation of about its length;
// compaction encodes every point once more, and growing the buffer from a
// guess copied each chunk several times.
func TestAppendChunkAllocatesOnce(t *testing.T) {
	for _, tc := range []struct {
		series string
		n      int
		encode func([]byte, []Point) ([]byte, error)
	}{
		{"float64", 4096, AppendChunk}, {"smooth64", 4096, AppendChunk}, {"loss32", 4096, AppendChunk},
		{"float64", 1000, AppendChunk}, {"cosine", 300, AppendChunk},
		{"float64", 100, AppendChunkQuick}, {"float32", 100, AppendChunkQuick}, {"smooth64", 1000, AppendChunkQuick},
	} {
		pts := genSeries(tc.series, tc.n, 5)
		var chunk []byte
		allocs := testing.AllocsPerRun(5, func() {
			var err error
			if chunk, err = tc.encode(nil, pts); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 1 {
			t.Errorf("%s, %d points: %v allocations, want 1", tc.series, tc.n, allocs)
		}
		// Room for the points not sampled, not a multiple of the chunk.
		if limit := 2*len(chunk) + 64; cap(chunk) > limit {
			t.Errorf("%s, %d points: capacity %d for %d bytes", tc.series, tc.n, cap(chunk), len(chunk))
		}
	}
}

func TestChooseCodec(t *testing.T) {
	alternating := func(values ...float64) []Point {
		pts := make([]Point, 1000)
		for i := range pts {
			pts[i] = Point{Step: int64(i), Value: values[i%len(values)]}
		}
		return pts
	}
	for name, tc := range map[string]struct {
		pts  []Point
		want byte // flags
	}{
		"Float32NoiseSignLow":  {genSeries("float32", 1000, 1), flagFloat32 | flagSignLow},
		"Smooth64Delta3":       {genSeries("smooth64", 1000, 1), 3 << 2},
		"Smooth32Delta3":       {genSeries("smooth32", 1000, 1), flagFloat32 | 3<<2},
		"LinearDelta2":         {genSeries("linear", 1000, 1), 2 << 2},
		"CosineDelta3":         {genSeries("cosine", 1000, 1), 3 << 2},
		"Float64NoiseSignLow":  {genSeries("float64", 1000, 1), flagSignLow},
		"Float32ConstSignHigh": {genSeries("const", 1000, 1), flagFloat32},
		"FewMantissaBitsHigh":  {alternating(-1, 2, -3, 0.5), flagFloat32},
		"Float64FewBitsHigh":   {alternating(-1, 2, -3, 0.1), 0},
		"OnePoint":             {alternating(1)[:1], flagFloat32},
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := chooseCodec(tc.pts)
			if got := c.flags(); got != tc.want {
				t.Errorf("chooseCodec flags = %#x, want %#x", got, tc.want)
			}
		})
	}
}

// TestChooseCodecSampled: on chunks of 4096 points, which chooseCodec
// sizes on samples, the chunk it makes is within 1% of the smallest any
// codec makes.
func TestChooseCodecSampled(t *testing.T) {
	for _, kind := range []string{"float32", "float64", "const", "loss32", "mixed", "smooth64", "smooth32", "cosine", "linear"} {
		pts := genSeries(kind, 4096, 42)
		head := binary.AppendUvarint([]byte{ChunkVersion}, uint64(len(pts)))
		c, _ := chooseCodec(pts)
		chosen := len(appendChunk(slices.Clone(head), pts, c))
		best := chosen
		for flags := range byte(flagsKnown + 1) {
			c := codecOf(flags)
			if (c.width == 32 && !allFloat32(pts)) || (c.order != 0 && c.rot != 0) {
				continue
			}
			best = min(best, len(appendChunk(slices.Clone(head), pts, c)))
		}
		if float64(chosen) > 1.01*float64(best) {
			t.Errorf("%s: chosen codec makes %d bytes, the best %d", kind, chosen, best)
		}
	}
}

func TestAppendChunkDst(t *testing.T) {
	pts := genSeries("float32", 100, 1)
	alone := mustAppendChunk(t, nil, pts)
	prefix := []byte("prefix")
	both := mustAppendChunk(t, slices.Clone(prefix), pts)
	if string(both[:len(prefix)]) != string(prefix) || string(both[len(prefix):]) != string(alone) {
		t.Fatal("AppendChunk onto a non-empty dst differs from onto nil")
	}
	old := []Point{{Step: -1}}
	got, err := DecodeChunk(slices.Clone(old), alone)
	if err != nil {
		t.Fatal(err)
	}
	if !pointsEqual(got, append(old, pts...)) {
		t.Fatal("DecodeChunk onto a non-empty dst lost or changed points")
	}
}

func TestAppendChunkUnsorted(t *testing.T) {
	for name, pts := range map[string][]Point{
		"ErrStep":      {{2, 0, 0}, {1, 0, 0}},
		"ErrTimestamp": {{1, 5, 0}, {1, 4, 0}},
		"ErrValue":     {{1, 5, 1}, {1, 5, 0}},
		"ErrNaNFirst":  {{1, 5, math.NaN()}, {1, 5, posInf}},
		"ErrZeroOrder": {{1, 5, 0}, {1, 5, negZ}},
		"ErrLate":      append(genSeries("float32", 50, 1), Point{Step: 3}),
	} {
		t.Run(name, func(t *testing.T) {
			dst := []byte{42}
			got, err := AppendChunk(dst, pts)
			if !errors.Is(err, ErrUnsorted) {
				t.Fatalf("AppendChunk error = %v, want ErrUnsorted", err)
			}
			if len(got) != 1 || got[0] != 42 {
				t.Fatalf("AppendChunk changed dst to %v", got)
			}
		})
	}
}

// streamSizes returns the byte lengths of the three streams of chunk.
func streamSizes(tb testing.TB, chunk []byte) (steps, timestamps, values int) {
	tb.Helper()
	h, err := parseChunk(chunk)
	if err != nil {
		tb.Fatal(err)
	}
	return len(h.steps), len(h.timestamps), len(h.values)
}

// TestChunkSize measures the encoding against the budget: SQLite must store
// a point in at most 10 bytes with row overhead, so the chunk itself must
// stay well below that.
func TestChunkSize(t *testing.T) {
	const n = 4096
	for name, tc := range map[string]struct {
		kind         string
		maxPerPoint  float64 // bytes per point, whole chunk
		maxValueBits float64 // bits per point, value stream alone
	}{
		"Float32":  {"float32", 5, 32},
		"Float64":  {"float64", 9.5, 64},
		"Constant": {"const", 0.5, 1.01},
		"Loss32":   {"loss32", 4, 26},
		"Mixed":    {"mixed", 6, 40},
		// Smooth curves: delta coding (chunk version 2). XOR coding
		// takes 40 to 50 bits a value on these.
		"Smooth64": {"smooth64", 4.5, 28},
		"Smooth32": {"smooth32", 1.5, 6},
		"Cosine":   {"cosine", 2, 8},
		"Linear":   {"linear", 1.5, 8},
	} {
		t.Run(name, func(t *testing.T) {
			chunk := checkRoundTrip(t, genSeries(tc.kind, n, 42))
			s, ts, v := streamSizes(t, chunk)
			per := float64(len(chunk)) / n
			t.Logf("%s: %.3f B/point (steps %.3f, timestamps %.3f, values %.3f bits/point)",
				tc.kind, per, 8*float64(s)/n, 8*float64(ts)/n, 8*float64(v)/n)
			if per >= tc.maxPerPoint {
				t.Errorf("%.3f bytes/point, want < %v", per, tc.maxPerPoint)
			}
			if vb := 8 * float64(v) / n; vb >= tc.maxValueBits {
				t.Errorf("values take %.2f bits/point, want < %v", vb, tc.maxValueBits)
			}
			if sb := 8 * float64(s) / n; sb > 1.01 {
				t.Errorf("steps 0..n-1 take %.3f bits/point, want about 1", sb)
			}
		})
	}
}

func TestDecodeChunkCorrupt(t *testing.T) {
	valid := mustAppendChunk(t, nil, genSeries("float32", 10, 1))
	// header returns a chunk of count points whose step and timestamp
	// streams claim 4 bytes each, followed by tail zero bytes.
	header := func(count uint64, tail int) []byte {
		b := []byte{ChunkVersion}
		b = binary.AppendUvarint(b, count)
		b = append(b, 0) // flags
		b = binary.AppendVarint(b, 0)
		b = binary.AppendVarint(b, 0)
		b = append(b, make([]byte, 8)...)
		b = binary.AppendUvarint(b, 4)
		b = binary.AppendUvarint(b, 4)
		return append(b, make([]byte, tail)...)
	}
	for name, src := range map[string][]byte{
		"ErrEmptyInput":        nil,
		"ErrVersion":           append([]byte{3}, valid[1:]...),
		"ErrDeltaFlagsInV1":    append([]byte{1, valid[1], valid[2] | 1<<2}, valid[3:]...),
		"ErrDeltaWithSignLow":  append([]byte{ChunkVersion, valid[1], flagSignLow | 1<<2}, valid[3:]...),
		"ErrVersionZero":       {0, 0},
		"ErrCountVarint":       {ChunkVersion, 0x80},
		"ErrCountOverflow":     {ChunkVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"ErrTrailingEmpty":     {ChunkVersion, 0, 0},
		"ErrCount2Pow40":       header(1<<40, 12),
		"ErrCountMax":          header(math.MaxUint64, 12),
		"ErrCountJustTooBig":   header(4*8+2, 12),
		"ErrTrailingByte":      append(slices.Clone(valid), 0),
		"ErrSpareBits":         header(2, 12),
		"ErrOnePointStreams":   header(1, 12),
		"ErrStreamLenTooLarge": header(1, 7),
		"ErrNoValueStream":     header(2, 8),
		"ErrShortFirstValue":   header(1, 0)[:12],
		"ErrFlags": func() []byte {
			b := slices.Clone(valid)
			b[2] |= 16 // valid[1] is the count, 10
			return b
		}(),
		"ErrStepsLenHuge": func() []byte {
			b := []byte{ChunkVersion, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			b = binary.AppendUvarint(b, math.MaxUint64)
			return binary.AppendUvarint(b, 1)
		}(),
		"ErrNonzeroPadding": func() []byte {
			b := slices.Clone(valid)
			b[len(b)-1] |= 1 // the value stream's last byte ends in padding here
			return b
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeChunk([]Point{{Step: 1}}, src)
			if !errors.Is(err, ErrCorruptChunk) {
				t.Fatalf("DecodeChunk error = %v, want ErrCorruptChunk", err)
			}
			if len(got) != 1 {
				t.Fatalf("DecodeChunk changed dst on error: %d points", len(got))
			}
			// DecodeChunkSteps reads only the header and the step stream.
			valuesOnly := name == "ErrNonzeroPadding" || name == "ErrTrailingByte"
			if _, err := DecodeChunkSteps(nil, src); err == nil && !valuesOnly {
				t.Fatalf("DecodeChunkSteps accepted corrupt chunk")
			}
		})
	}
}

func TestDecodeChunkPaddingCheckIsReal(t *testing.T) {
	// ErrNonzeroPadding above assumes the last byte has a spare bit. Make
	// sure it does for that chunk, so the test does not pass by accident.
	h, err := parseChunk(mustAppendChunk(t, nil, genSeries("float32", 10, 1)))
	if err != nil {
		t.Fatal(err)
	}
	vd := newXORDecoder(h.values, h.first.Value, h.codec)
	vd.decode(make([]uint64, 9))
	if rest := vd.r.n - vd.r.pad + 8*uint(len(h.values)-vd.r.pos); rest == 0 {
		t.Fatal("value stream has no padding bits; pick another chunk for ErrNonzeroPadding")
	}
}

func TestDecodeChunkHugeCountAllocs(t *testing.T) {
	b := []byte{ChunkVersion}
	b = binary.AppendUvarint(b, 1<<40)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4)
	b = append(b, make([]byte, 4096)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeChunk(nil, b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorruptChunk) {
		t.Fatalf("DecodeChunk error = %v, want ErrCorruptChunk", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("DecodeChunk allocated %d bytes for a chunk of %d bytes", n, len(b))
	}
}

func TestDecodeChunkTruncated(t *testing.T) {
	for name, pts := range map[string][]Point{
		"Empty":    nil,
		"OnePoint": {{Step: 1, TimestampMs: 2, Value: 3}},
		"Float32":  genSeries("float32", 200, 1),
		"Float64":  genSeries("float64", 200, 2),
		"Const":    genSeries("const", 200, 3),
	} {
		t.Run(name, func(t *testing.T) {
			chunk := mustAppendChunk(t, nil, pts)
			for n := range len(chunk) {
				got, err := DecodeChunk(nil, chunk[:n])
				if !errors.Is(err, ErrCorruptChunk) {
					t.Fatalf("prefix of %d of %d bytes: err = %v, %d points", n, len(chunk), err, len(got))
				}
			}
		})
	}
}

// decodeBounded decodes src, which may be corrupt, and fails the test if
// DecodeChunk returns more points than the bound it promises.
func decodeBounded(tb testing.TB, src []byte) {
	tb.Helper()
	got, err := DecodeChunk(nil, src)
	if err != nil {
		if !errors.Is(err, ErrCorruptChunk) {
			tb.Fatalf("error %v does not wrap ErrCorruptChunk", err)
		}
		if len(got) != 0 {
			tb.Fatalf("%d points returned with error", len(got))
		}
		return
	}
	if len(got) > 8*len(src)+1 {
		tb.Fatalf("%d points from %d bytes", len(got), len(src))
	}
	if n, err := ChunkLen(src); err != nil || n != len(got) {
		tb.Fatalf("ChunkLen = %d, %v after decoding %d points", n, err, len(got))
	}
	steps, err := DecodeChunkSteps(nil, src)
	if err != nil || len(steps) != len(got) {
		tb.Fatalf("DecodeChunkSteps = %d steps, %v after decoding %d points", len(steps), err, len(got))
	}
	for i := range steps {
		if steps[i] != got[i].Step {
			tb.Fatalf("DecodeChunkSteps step %d = %d, DecodeChunk says %d", i, steps[i], got[i].Step)
		}
	}
}

func TestDecodeChunkBitFlips(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for name, pts := range map[string][]Point{
		"Float32": genSeries("float32", 64, 1),
		"Float64": genSeries("float64", 64, 2),
		"Const":   genSeries("const", 64, 3),
		"Mixed": {
			{0, 0, math.NaN()}, {1, 10, posInf}, {1, 11, negInf}, {5, 11, negZ},
			{math.MaxInt64, math.MinInt64, 1e300},
		},
	} {
		t.Run(name, func(t *testing.T) {
			chunk := mustAppendChunk(t, nil, pts)
			// Every single-bit flip.
			for bit := range 8 * len(chunk) {
				b := slices.Clone(chunk)
				b[bit/8] ^= 1 << (bit % 8)
				decodeBounded(t, b)
			}
			// Many random multi-bit flips.
			rounds := 2000
			if testing.Short() {
				rounds = 200
			}
			for range rounds {
				b := slices.Clone(chunk)
				for range 1 + r.IntN(8) {
					b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
				}
				decodeBounded(t, b)
			}
		})
	}
}

// TestChunkFormatExample pins the example in docs/format/chunk.md. The
// format is persisted: if this test fails, a stored chunk would no longer
// decode the same, so the change needs a new ChunkVersion, not a new
// expected value.
func TestChunkFormatExample(t *testing.T) {
	pts := []Point{
		{0, startMs, 0.5}, {1, startMs + 10, 0.5}, {2, startMs + 21, 0.25}, {3, startMs + 31, 0.25},
	}
	want := []byte{
		0x02, 0x04, 0x01, 0x00, 0x80, 0xa0, 0xab, 0xfe, 0xf9, 0x62,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f, 0x02, 0x03,
		0x81, 0x00, 0xc1, 0x50, 0xde, 0x67, 0x16,
	}
	if got := checkRoundTrip(t, pts); !slices.Equal(got, want) {
		t.Fatalf("chunk = % x\nwant    % x", got, want)
	}
	got, err := DecodeChunk(nil, want)
	if err != nil || !pointsEqual(got, pts) {
		t.Fatalf("DecodeChunk(example) = %v, %v; want %v", got, err, pts)
	}
	// The same chunk as version 1 wrote it: only the version byte differs.
	v1 := append([]byte{1}, want[1:]...)
	got, err = DecodeChunk(nil, v1)
	if err != nil || !pointsEqual(got, pts) {
		t.Fatalf("DecodeChunk(version 1 example) = %v, %v; want %v", got, err, pts)
	}
}
