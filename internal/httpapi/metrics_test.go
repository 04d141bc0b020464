package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// TestEncodeHistory checks the parallel encoder against encoding/json's
// reading of it, contexts and part boundaries included.
func TestEncodeHistory(t *testing.T) {
	ctxA := &tracking.MetricContext{ModelID: "m-1"}
	ctxB := &tracking.MetricContext{DatasetName: "train \"set\"", DatasetDigest: "abc"}
	for _, n := range []int{0, 1, pointsPerPart, 3*pointsPerPart + 17} {
		hb := &tracking.HistoryBuffer{}
		for i := range n {
			hb.Points = append(hb.Points, metrics.Point{Step: int64(i), TimestampMs: 1_700_000_000_000 + int64(i)*7, Value: float64(i) / 3})
		}
		if n > 10 {
			hb.Contexts = []tracking.ContextRun{{Start: 5, Context: ctxA}, {Start: n / 2, Context: nil}, {Start: n - 3, Context: ctxB}}
		}
		parts := encodeHistory("loss", hb)
		body := []byte("[")
		for _, p := range parts {
			body = append(body, *p...)
		}
		body = append(body, ']')
		var got []struct {
			Key           string  `json:"key"`
			Value         float64 `json:"value"`
			Timestamp     int64   `json:"timestamp"`
			Step          int64   `json:"step"`
			ModelID       string  `json:"model_id"`
			DatasetName   string  `json:"dataset_name"`
			DatasetDigest string  `json:"dataset_digest"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%d points: %v", n, err)
		}
		if len(got) != n {
			t.Fatalf("%d points decoded, want %d", len(got), n)
		}
		for i, g := range got {
			p := hb.Points[i]
			c, _ := hb.ContextAt(i, 0)
			wantModel, wantDS := "", ""
			if c != nil {
				wantModel, wantDS = c.ModelID, c.DatasetName
			}
			if g.Key != "loss" || g.Value != p.Value || g.Timestamp != p.TimestampMs || g.Step != p.Step || g.ModelID != wantModel || g.DatasetName != wantDS {
				t.Fatalf("%d points: point %d = %+v, want %+v context %+v", n, i, g, p, c)
			}
		}
	}
}
