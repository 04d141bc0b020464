package httpapi_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestGoodputRoute: the route joins each rank's step times with its
// samples, reads the FLOPs and peak from the run's params, and answers
// throughput and MFU as computed by hand; bad input is 4xx.
func TestGoodputRoute(t *testing.T) {
	h := MustEventServer(t)
	run := newRun(t, h)
	body := `{"run_id":"` + run + `","node":"node-a","reports":[
		{"rank":0,"step":1,"time_ms":1800000000000,"step_time_s":0.5,"data_wait_s":0.1,"samples":10},
		{"rank":0,"step":2,"time_ms":1800000000500,"step_time_s":0.5,"samples":10},
		{"rank":1,"step":1,"time_ms":1800000000000,"step_time_s":0.25,"samples":10},
		{"rank":1,"step":2,"time_ms":1800000000500,"step_time_s":0.75,"samples":30}]}`
	if r := do(t, h, "POST", "/api/2.0/sextant/progress", body); r.status != 200 {
		t.Fatalf("report: %d %s", r.status, r.raw)
	}
	for k, v := range map[string]string{"sextant.flops_per_sample": "1e9", "sextant.peak_tflops": "0.5"} {
		if r := do(t, h, "POST", "/api/2.0/mlflow/runs/log-parameter", `{"run_id":"`+run+`","key":"`+k+`","value":"`+v+`"}`); r.status != 200 {
			t.Fatalf("param: %d %s", r.status, r.raw)
		}
	}
	r := do(t, h, "GET", "/api/2.0/sextant/goodput?run_id="+run, nil)
	if r.status != 200 {
		t.Fatalf("get: %d %s", r.status, r.raw)
	}
	var got struct {
		ReferenceRank int `json:"reference_rank"`
		Throughput    struct {
			SamplesPerS *float64 `json:"samples_per_s"`
			TokensPerS  *float64 `json:"tokens_per_s"`
		} `json:"throughput"`
		MFU struct {
			MFU        *float64 `json:"mfu"`
			Devices    int      `json:"devices"`
			PeakSource string   `json:"peak_source"`
		} `json:"mfu"`
		Series []json.RawMessage `json:"series"`
	}
	if err := json.Unmarshal([]byte(r.raw), &got); err != nil {
		t.Fatal(err)
	}
	// Rank 0: 20 samples in 1 s; rank 1: 40 in 1 s.
	want := 20.0/1 + 40.0/1
	if got.Throughput.SamplesPerS == nil || math.Abs(*got.Throughput.SamplesPerS-want) > 1e-9 || got.Throughput.TokensPerS != nil {
		t.Fatalf("throughput: %s", r.raw)
	}
	if got.MFU.MFU == nil || math.Abs(*got.MFU.MFU-want*1e9/(2*0.5e12)) > 1e-12 || got.MFU.Devices != 2 || got.MFU.PeakSource != "param sextant.peak_tflops" {
		t.Fatalf("mfu: %s", r.raw)
	}
	if got.ReferenceRank != 0 || len(got.Series) != 2 {
		t.Fatalf("reference rank and series: %s", r.raw)
	}
	for name, tc := range map[string]struct {
		target string
		status int
		msg    string
	}{
		"ErrNoRunID":  {"/api/2.0/sextant/goodput", 400, "run_id"},
		"ErrBadRunID": {"/api/2.0/sextant/goodput?run_id=x%00", 400, ""},
		"ErrParam":    {"/api/2.0/sextant/goodput?rank=1&run_id=" + run, 400, "unknown query parameter 'rank'"},
		"ErrNotFound": {"/api/2.0/sextant/goodput?run_id=0123456789abcdef0123456789abcdef", 404, ""},
	} {
		t.Run(name, func(t *testing.T) {
			r := do(t, h, "GET", tc.target, nil)
			if r.status != tc.status || !strings.Contains(r.raw, tc.msg) {
				t.Errorf("%d %s, want %d with %q", r.status, r.raw, tc.status, tc.msg)
			}
		})
	}
}
