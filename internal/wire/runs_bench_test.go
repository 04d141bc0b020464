package wire

import (
	"strconv"
	"testing"

	"github.com/sextant/sextant/internal/metrics"

	"github.com/sextant/sextant/internal/tracking"
)

// BenchmarkAppendRuns encodes a page of 1,000 runs shaped like the reads
// benchmark's (3 params, 4 tags, 3 metrics), hot in the cache.
func BenchmarkAppendRuns(b *testing.B) {
	var page tracking.RunPage
	for i := range 1000 {
		id := strconv.FormatInt(int64(i)*7919+1_000_000_000_000, 16) + "0123456789abcdef"
		page.Runs = append(page.Runs, &tracking.Run{
			Info: tracking.RunInfo{RunID: id, RunName: "run-" + strconv.Itoa(i), ExperimentID: "1", UserID: "unknown",
				Status: tracking.StatusFinished, StartTimeMs: 1_700_000_000_000 + int64(i), EndTimeMs: 1_700_000_060_000 + int64(i),
				ArtifactURI: "mlflow-artifacts:/1/" + id + "/artifacts", LifecycleStage: tracking.Active},
			Data: tracking.RunData{
				Metrics: []tracking.Metric{{Key: "accuracy", Point: metrics.Point{Value: 0.9999113624172874, TimestampMs: 1_700_000_009_720, Step: 10}},
					{Key: "loss", Point: metrics.Point{Value: 0.1541686312896864, TimestampMs: 1_700_000_009_720, Step: 10}},
					{Key: "val_loss", Point: metrics.Point{Value: 0.06668613050734717, TimestampMs: 1_700_000_009_720, Step: 10}}},
				Params: []tracking.Param{{Key: "batch_size", Value: "16"}, {Key: "lr", Value: "0.001"}, {Key: "optimizer", Value: "adamw"}},
				Tags: []tracking.Tag{{Key: "mlflow.runName", Value: "run-" + strconv.Itoa(i)}, {Key: "mlflow.user", Value: "unknown"},
					{Key: "sweep", Value: "sweep-48"}, {Key: "team", Value: "nlp"}},
			},
		})
	}
	buf := AppendRuns(nil, page)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for b.Loop() {
		buf = AppendRuns(buf[:0], page)
	}
}
