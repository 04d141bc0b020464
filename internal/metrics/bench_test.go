package metrics

import (
	"fmt"
	"testing"
)

// benchKinds are the value shapes of genSeries, from hardest to easiest.
var benchKinds = []string{"float64", "float32", "const"}

// benchPoints is the chunk size of the benchmarks: a long history stored as
// one chunk, the worst case for a get-history read.
const benchPoints = 200_000

// BenchmarkAppendChunk measures encoding into a reused buffer.
//
//	go test -run '^$' -bench 'AppendChunk' -benchmem -count 6 ./internal/metrics/
func BenchmarkAppendChunk(b *testing.B) {
	for _, enc := range []struct {
		name   string
		append func([]byte, []Point) ([]byte, error)
		points int
	}{{"chosen", AppendChunk, benchPoints}, {"chosen", AppendChunk, 100}, {"quick", AppendChunkQuick, 100}} {
		for _, kind := range benchKinds {
			b.Run(fmt.Sprintf("codec=%s/points=%d/values=%s", enc.name, enc.points, kind), func(b *testing.B) {
				pts := genSeries(kind, enc.points, 1)
				buf, err := enc.append(nil, pts)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					buf, err = enc.append(buf[:0], pts)
					if err != nil {
						b.Fatal(err)
					}
				}
				reportPerPoint(b, len(pts), len(buf))
			})
		}
	}
}

// BenchmarkDecodeChunk measures decoding into a reused slice.
//
//	go test -run '^$' -bench 'DecodeChunk' -benchmem -count 6 ./internal/metrics/
func BenchmarkDecodeChunk(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run("values="+kind, func(b *testing.B) {
			pts := genSeries(kind, benchPoints, 1)
			chunk := mustAppendChunk(b, nil, pts)
			out := make([]Point, 0, len(pts))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				out, err = DecodeChunk(out[:0], chunk)
				if err != nil {
					b.Fatal(err)
				}
			}
			reportPerPoint(b, len(pts), len(chunk))
		})
	}
}

// BenchmarkDecodeChunkSteps measures the steps-only path sampling uses.
//
//	go test -run '^$' -bench 'DecodeChunkSteps' -benchmem -count 6 ./internal/metrics/
func BenchmarkDecodeChunkSteps(b *testing.B) {
	pts := genSeries("float64", benchPoints, 1)
	chunk := mustAppendChunk(b, nil, pts)
	out := make([]int64, 0, len(pts))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		out, err = DecodeChunkSteps(out[:0], chunk)
		if err != nil {
			b.Fatal(err)
		}
	}
	reportPerPoint(b, len(pts), len(chunk))
}

// reportPerPoint reports time and chunk size per point.
func reportPerPoint(b *testing.B, points, chunkBytes int) {
	b.Helper()
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/float64(points), "ns/point")
	b.ReportMetric(float64(chunkBytes)/float64(points), "B/point")
}

// BenchmarkSampleSteps measures choosing 1000 of 10,000,000 steps, the
// largest history a get-history-bulk-interval call samples.
//
//	go test -run '^$' -bench 'SampleSteps' -benchmem -count 6 ./internal/metrics/
func BenchmarkSampleSteps(b *testing.B) {
	for _, tc := range []struct{ steps, max int }{{10_000_000, 1000}} {
		b.Run(fmt.Sprintf("steps=%d/max=%d", tc.steps, tc.max), func(b *testing.B) {
			steps := make([]int64, tc.steps)
			for i := range steps {
				steps[i] = int64(i) * 10
			}
			b.ReportAllocs()
			for b.Loop() {
				if got := SampleSteps(steps, tc.max); len(got) != tc.max+1 {
					b.Fatalf("got %d steps", len(got))
				}
			}
		})
	}
}

// BenchmarkUnionSteps measures the union of the step lists of 10 runs of
// 100,000 steps each, logged every 1 to 10 steps.
//
//	go test -run '^$' -bench 'UnionSteps' -benchmem -count 6 ./internal/metrics/
func BenchmarkUnionSteps(b *testing.B) {
	lists := make([][]int64, 10)
	total := 0
	for i := range lists {
		lists[i] = make([]int64, 100_000)
		for j := range lists[i] {
			lists[i][j] = int64(j * (i + 1))
		}
		total += len(lists[i])
	}
	dst := UnionSteps(nil, lists...)
	b.ReportAllocs()
	for b.Loop() {
		dst = UnionSteps(dst[:0], lists...)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/input-step")
}

// BenchmarkMinMaxBuckets measures downsampling 1,000,000 points to 500
// buckets.
//
//	go test -run '^$' -bench 'MinMaxBuckets' -benchmem -count 6 ./internal/metrics/
func BenchmarkMinMaxBuckets(b *testing.B) {
	pts := genSeries("float64", 1_000_000, 1)
	var dst []Point
	b.ReportAllocs()
	for b.Loop() {
		dst = MinMaxBuckets(dst[:0], pts, 500)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(pts)), "ns/point")
}
