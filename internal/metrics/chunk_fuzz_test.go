package metrics

import (
	"encoding/binary"
	"math"
	"testing"
)

// fuzzSeeds are chunks that cover every code of every stream.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	for _, pts := range [][]Point{
		nil,
		{{Step: 1, TimestampMs: 2, Value: 3}},
		genSeries("float32", 40, 1),
		genSeries("float64", 40, 2),
		genSeries("const", 40, 3),
		genSeries("smooth64", 40, 4),
		genSeries("smooth32", 40, 5),
		genSeries("linear", 40, 6),
		negativeStepSeries()["warmup"],
		negativeStepSeries()["sparse"],
		{
			{math.MinInt64, math.MaxInt64, math.NaN()}, {-5, 0, negInf}, {-5, 1, negZ},
			{0, 1 << 40, 0}, {7, -3, 1e-300}, {1 << 50, 9, posInf}, {math.MaxInt64, math.MinInt64, 1},
		},
	} {
		seeds = append(seeds, mustAppendChunk(tb, nil, pts))
	}
	return seeds
}

// FuzzDecodeChunk feeds arbitrary bytes to the decoders, which must never
// panic, must agree with each other, and must stay within their promised
// allocation bound.
//
//	go test -run '^$' -fuzz FuzzDecodeChunk -fuzztime 1m ./internal/metrics/
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		decodeBounded(t, src)
	})
}

// FuzzRoundTrip builds sorted points from the fuzzer's bytes, encodes and
// decodes them, and checks that they come back bit for bit.
//
//	go test -run '^$' -fuzz FuzzRoundTrip -fuzztime 1m ./internal/metrics/
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add(make([]byte, 200))
	// Negative steps: small negative deltas (mode 0), then an arbitrary
	// negative step (mode 1).
	f.Add([]byte{0, 0xff, 1, 0, 0xfe, 2, 1, 0x9c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		pts := pointsFromBytes(data)
		SortPoints(pts)
		checkRoundTrip(t, pts)
	})
}

// pointsFromBytes turns fuzz input into points. Each point takes a mode
// byte and then as many bytes as the mode asks for, so that short inputs
// give small deltas and repeats and long ones reach the 64-bit codes.
func pointsFromBytes(data []byte) []Point {
	var pts []Point
	var prev Point
	next := func(n int) uint64 {
		var b [8]byte
		n = copy(b[:n], data)
		data = data[n:]
		return binary.LittleEndian.Uint64(b[:])
	}
	specials := []float64{math.NaN(), otherNaN, posInf, negInf, negZ, 0, 1, -1,
		math.MaxFloat64, math.SmallestNonzeroFloat64, float64(float32(0.1))}
	for len(data) > 0 && len(pts) < 4096 {
		mode := data[0]
		data = data[1:]
		p := prev
		switch mode & 3 {
		case 0: // small step and timestamp deltas
			p.Step += int64(int8(next(1)))
			p.TimestampMs += int64(int8(next(1)))
		case 1: // arbitrary step and timestamp
			p.Step = int64(next(8))
			p.TimestampMs = int64(next(8))
		case 2: // same step, next timestamp
			p.TimestampMs++
		}
		switch (mode >> 2) & 3 {
		case 0: // same value
		case 1:
			p.Value = specials[int(next(1))%len(specials)]
		case 2:
			p.Value = float64(math.Float32frombits(uint32(next(4))))
		case 3:
			p.Value = math.Float64frombits(next(8))
		}
		pts = append(pts, p)
		prev = p
	}
	return pts
}

// FuzzChunkIterResume resumes valid and corrupt chunks at arbitrary marks:
// Resume and Next must never panic, and a resumed iterator must never
// return more points than the chunk has.
//
//	go test -run '^$' -fuzz FuzzChunkIterResume -fuzztime 1m ./internal/metrics/
func FuzzChunkIterResume(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		var it ChunkIter
		if it.Reset(s) == nil {
			f.Add(s, it.AppendMark(nil))
			it.Next(nil, it.Len()/2)
			f.Add(s, it.AppendMark(nil))
		}
	}
	f.Fuzz(func(t *testing.T, src, mark []byte) {
		var it ChunkIter
		if it.Resume(src, mark) != nil {
			return
		}
		got, _ := it.Next(nil, 1<<30)
		if len(got) > it.Len() {
			t.Fatalf("%d points from a chunk of %d", len(got), it.Len())
		}
	})
}
