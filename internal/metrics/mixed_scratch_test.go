package metrics

import "testing"

func TestScratchMixed(t *testing.T) {
	pts := genSeries("float32", 4096, 42)
	c1 := mustAppendChunk(t, nil, pts)
	pts[100].Value = 0.1
	c2 := mustAppendChunk(t, nil, pts)
	t.Logf("float32 %.3f B/pt; with one float64 %.3f B/pt", float64(len(c1))/4096, float64(len(c2))/4096)
}
