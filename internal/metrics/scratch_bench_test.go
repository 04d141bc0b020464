package metrics

import "testing"

func BenchmarkScratchTS(b *testing.B) {
	pts := genSeries("float32", benchPoints, 1)
	chunk := mustAppendChunk(b, nil, pts)
	h, _ := parseChunk(chunk)
	out := make([]int64, len(pts)-1)
	for b.Loop() {
		td := newDoDDecoder(h.timestamps, h.first.TimestampMs, &timestampCode)
		td.decode(out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchPoints, "ns/point")
}
func BenchmarkScratchVal(b *testing.B) {
	pts := genSeries("float32", benchPoints, 1)
	chunk := mustAppendChunk(b, nil, pts)
	h, _ := parseChunk(chunk)
	out := make([]uint64, len(pts)-1)
	for b.Loop() {
		vd := newXORDecoder(h.values, h.first.Value, h.codec)
		vd.decode(out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchPoints, "ns/point")
}
