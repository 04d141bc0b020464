package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// TestAppendRuns checks the hand-written runs/search encoder against
// encoding/json's encoding of Run: the same JSON value.
func TestAppendRuns(t *testing.T) {
	full := &tracking.Run{
		Info: tracking.RunInfo{RunID: "0123456789abcdef0123456789abcdef", RunName: "a \"quoted\" <name>\n", ExperimentID: "7", UserID: "ü@x",
			Status: tracking.RunStatus(3), StartTimeMs: 1_700_000_000_000, EndTimeMs: 1_700_000_000_999, ArtifactURI: "s3://b/k", LifecycleStage: tracking.Active},
		Data: tracking.RunData{
			Metrics: []tracking.Metric{
				{Key: "loss", Point: metricPoint(1, 2, 0.125)},
				{Key: "nan", Point: metricPoint(-1, 0, math.NaN()), MetricContext: tracking.MetricContext{ModelID: "m-1", DatasetName: "train", DatasetDigest: "d"}},
				{Key: "inf", Point: metricPoint(3, 4, math.Inf(-1))},
			},
			Params: []tracking.Param{{Key: "lr", Value: "0.1"}, {Key: "tab", Value: "a\tb\\c"}},
			Tags:   []tracking.Tag{{Key: "mlflow.runName", Value: "x"}},
		},
		Inputs: tracking.RunInputs{
			Datasets: []tracking.DatasetInput{
				{Tags: []tracking.Tag{{Key: "mlflow.data.context", Value: "train"}}, Dataset: tracking.Dataset{Name: "d", Digest: "g", SourceType: "local", Source: "{}", Schema: "s", Profile: "p"}},
				{Dataset: tracking.Dataset{Name: "e", Digest: "h", SourceType: "local", Source: "{}"}},
			},
			Models: []tracking.ModelInput{{ModelID: "m-2"}},
		},
		Outputs: tracking.RunOutputs{Models: []tracking.ModelOutput{{ModelID: "m-3", Step: 9}}},
	}
	bare := &tracking.Run{Info: tracking.RunInfo{RunID: "ff", Status: tracking.RunStatus(1), LifecycleStage: tracking.Deleted}}
	for name, page := range map[string]tracking.RunPage{
		"Empty":     {},
		"TokenOnly": {NextPageToken: "abc"},
		"Runs":      {Runs: []*tracking.Run{full, bare}, NextPageToken: "tok"},
		"OneBare":   {Runs: []*tracking.Run{bare}},
	} {
		t.Run(name, func(t *testing.T) {
			want := struct {
				Runs          []*Run `json:"runs,omitempty"`
				NextPageToken string `json:"next_page_token,omitempty"`
			}{NextPageToken: page.NextPageToken}
			for _, r := range page.Runs {
				want.Runs = append(want.Runs, ToRun(r))
			}
			wb, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			gb := AppendRuns(nil, page)
			var w, g any
			if err := json.Unmarshal(wb, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(gb, &g); err != nil {
				t.Fatalf("%v:\n%s", err, gb)
			}
			if !reflect.DeepEqual(w, g) {
				t.Fatalf("got  %s\nwant %s", gb, wb)
			}
		})
	}
}

func metricPoint(step, ts int64, v float64) metrics.Point {
	return metrics.Point{Step: step, TimestampMs: ts, Value: v}
}

// TestAppendRunsMemo checks that a run with a memo is encoded once, the
// same as without, and answered from the memo after; a retired memo keeps
// nothing.
func TestAppendRunsMemo(t *testing.T) {
	run := func(m *tracking.Memo) *tracking.Run {
		return &tracking.Run{
			Info: tracking.RunInfo{RunID: "ab", RunName: "n\"x", ExperimentID: "1", Status: tracking.StatusFinished, StartTimeMs: 5, LifecycleStage: tracking.Active},
			Data: tracking.RunData{Metrics: []tracking.Metric{{Key: "loss", Point: metricPoint(1, 2, 0.1)}}, Params: []tracking.Param{{Key: "lr", Value: "0.1"}}},
			Memo: m,
		}
	}
	want := AppendRuns(nil, tracking.RunPage{Runs: []*tracking.Run{run(nil), run(nil)}})
	held := tracking.NewMemoBytes(1 << 20)
	m := tracking.NewMemo(held)
	page := tracking.RunPage{Runs: []*tracking.Run{run(m), run(nil)}}
	for range 2 {
		if got := AppendRuns(nil, page); string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
	one := len(AppendRuns(nil, tracking.RunPage{Runs: []*tracking.Run{run(nil)}})) - len(`{"runs":[]}`)
	if held.Used() != int64(one) || len(m.Load()) != one {
		t.Fatalf("memo keeps %d bytes, counted %d; a run is %d", len(m.Load()), held.Used(), one)
	}
	// What the memo keeps is what is sent.
	m2 := tracking.NewMemo(nil)
	m2.Store([]byte(`{"kept":1}`))
	if got := AppendRuns(nil, tracking.RunPage{Runs: []*tracking.Run{run(m2)}}); string(got) != `{"runs":[{"kept":1}]}` {
		t.Fatalf("got %s", got)
	}
	// Over the holder's bound, a memo keeps nothing.
	small := tracking.NewMemo(tracking.NewMemoBytes(int64(one - 1)))
	if got := AppendRuns(nil, tracking.RunPage{Runs: []*tracking.Run{run(small)}}); small.Load() != nil || string(got) != `{"runs":[`+string(m.Load())+`]}` {
		t.Fatalf("over the bound: got %s, memo %q", got, small.Load())
	}
	m.Retire()
	if held.Used() != 0 || m.Load() != nil {
		t.Fatalf("a retired memo keeps %d bytes, counted %d", len(m.Load()), held.Used())
	}
	if got := AppendRuns(nil, page); string(got) != string(want) || m.Load() != nil {
		t.Fatalf("after retiring: got %s, memo %q", got, m.Load())
	}
}
