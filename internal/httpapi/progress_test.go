package httpapi_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestProgressRoutes: reports of two ranks land as per-rank metrics of the
// run and come back per rank with their node and GPU; bad reports are 400
// naming the report and the field, never 5xx.
func TestProgressRoutes(t *testing.T) {
	h := MustEventServer(t)
	run := newRun(t, h)
	body := `{"run_id":"` + run + `","node":"node-a","reports":[
		{"rank":0,"gpu":0,"step":1,"time_ms":1800000000000,"step_time_s":0.1,"data_wait_s":0.01,"samples":32,"tokens":4096},
		{"rank":1,"gpu":1,"step":1,"time_ms":1800000000010,"step_time_s":0.5},
		{"rank":0,"gpu":0,"step":2,"time_ms":1800000000100,"step_time_s":0.12,"data_wait_s":0.02,"samples":32}]}`
	if r := do(t, h, "POST", "/api/2.0/sextant/progress", body); r.status != 200 {
		t.Fatalf("report: %d %s", r.status, r.raw)
	}
	// Sending the same reports again stores nothing twice.
	if r := do(t, h, "POST", "/ajax-api/2.0/sextant/progress", body); r.status != 200 {
		t.Fatalf("report again: %d %s", r.status, r.raw)
	}
	r := do(t, h, "GET", "/api/2.0/sextant/progress?run_id="+run, nil)
	if r.status != 200 {
		t.Fatalf("get: %d %s", r.status, r.raw)
	}
	want := `{"ranks":[{"rank":0,"node":"node-a","gpu":0,"step_time_s":[[1,1800000000000,0.1],[2,1800000000100,0.12]],"data_wait_s":[[1,1800000000000,0.01],[2,1800000000100,0.02]]},` +
		`{"rank":1,"node":"node-a","gpu":1,"step_time_s":[[1,1800000000010,0.5]]}]}`
	if strings.TrimSpace(r.raw) != want {
		t.Fatalf("get:\n%s\nwant\n%s", r.raw, want)
	}
	// The metrics are the run's, under the reserved keys.
	m := do(t, h, "GET", "/api/2.0/mlflow/metrics/get-history?metric_key=sextant/progress/rank_0/samples&run_id="+run, nil)
	if m.status != 200 || strings.Count(m.raw, `"value":32`) != 2 {
		t.Fatalf("samples history: %d %s", m.status, m.raw)
	}

	rep := func(fields string) string {
		return `{"run_id":"` + run + `","reports":[{"rank":0,"step":3,"step_time_s":0.1},{` + fields + `}]}`
	}
	bad := map[string]struct {
		method, target, body string
		msg                  string
	}{
		"ErrRankNegative": {"POST", "/api/2.0/sextant/progress", rep(`"rank":-1,"step":1,"step_time_s":1`), "reports[1]: rank -1 is out of range"},
		"ErrRankHuge":     {"POST", "/api/2.0/sextant/progress", rep(`"rank":99999999,"step":1,"step_time_s":1`), "reports[1]: rank 99999999 is out of range"},
		"ErrRankMissing":  {"POST", "/api/2.0/sextant/progress", rep(`"step":1,"step_time_s":1`), "reports[1]: Missing value for required parameter 'rank'"},
		"ErrRankFloat":    {"POST", "/api/2.0/sextant/progress", rep(`"rank":1.5,"step":1,"step_time_s":1`), "rank"},
		"ErrStepNegative": {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":-3,"step_time_s":1`), "reports[1]: step -3 is out of range"},
		"ErrStepMissing":  {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step_time_s":1`), "reports[1]: Missing value for required parameter 'step'"},
		"ErrStepString":   {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":"x","step_time_s":1`), "step"},
		"ErrStepTime":     {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":1,"step_time_s":-1`), "reports[1]: step_time_s -1 must be 0 to 86400 seconds"},
		"ErrNoStepTime":   {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":1`), "'step_time_s'"},
		"ErrSamples":      {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":1,"step_time_s":1,"samples":-2`), "reports[1]: samples -2 must be 0 or more"},
		"ErrTime":         {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":1,"step_time_s":1,"time_ms":-4`), "reports[1]: time_ms -4 is not a time"},
		"ErrField":        {"POST", "/api/2.0/sextant/progress", rep(`"rank":1,"step":1,"step_time_s":1,"loss":2`), "loss"},
		"ErrNoReports":    {"POST", "/api/2.0/sextant/progress", `{"run_id":"` + run + `"}`, "'reports'"},
		"ErrNoRun":        {"POST", "/api/2.0/sextant/progress", `{"reports":[{"rank":0,"step":1,"step_time_s":1}]}`, "'run_id'"},
		"ErrNode":         {"POST", "/api/2.0/sextant/progress", `{"run_id":"` + run + `","node":"a\u0001b","reports":[{"rank":0,"step":1,"step_time_s":1}]}`, "node must be"},
		"ErrMaxPoints":    {"GET", "/api/2.0/sextant/progress?max_points=1&run_id=" + run, "", "max_points must be between 2 and 2500"},
		"ErrParam":        {"GET", "/api/2.0/sextant/progress?rank=1&run_id=" + run, "", "unknown query parameter 'rank'"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := do(t, h, tc.method, tc.target, body)
			if r.status != 400 || !strings.Contains(r.raw, tc.msg) {
				t.Errorf("%d %s, want 400 with %q", r.status, r.raw, tc.msg)
			}
		})
	}
	// A refused request stored nothing: rank 0 still has steps 1 and 2.
	if r := do(t, h, "GET", "/api/2.0/sextant/progress?run_id="+run, nil); strings.TrimSpace(r.raw) != want {
		t.Fatalf("after refused requests:\n%s", r.raw)
	}
	if r := do(t, h, "GET", "/api/2.0/sextant/progress?run_id=0123456789abcdef0123456789abcdef", nil); r.status != 404 {
		t.Fatalf("missing run: %d %s", r.status, r.raw)
	}
}

// TestProgressConcurrentRequests sends progress requests from several
// nodes at once, refused ones among them, and reads every report back:
// a request's body, decoded reports and domain reports go back to a pool
// when it ends, so a report seen by another request, or a value of one
// body surviving into the next, would show here.
func TestProgressConcurrentRequests(t *testing.T) {
	h := MustEventServer(t)
	run := newRun(t, h)
	const nodes, requests, perReq = 6, 10, 40
	var wg sync.WaitGroup
	errs := make(chan string, nodes*requests*2)
	for n := range nodes {
		wg.Go(func() {
			for q := range requests {
				var body strings.Builder
				fmt.Fprintf(&body, `{"run_id": %q, "node": "node-%d", "reports": [`, run, n)
				for i := range perReq {
					if i > 0 {
						body.WriteString(", ")
					}
					step := q*perReq + i
					// Each node's rank and values are its own; every other
					// request leaves data_wait_s out.
					fmt.Fprintf(&body, `{"rank": %d, "gpu": %d, "step": %d, "time_ms": %d, "step_time_s": %d.%d`, n, n, step, 1_800_000_000_000+step, n, step)
					if q%2 == 0 {
						fmt.Fprintf(&body, `, "data_wait_s": 0.%d`, step+1)
					}
					body.WriteString("}")
				}
				body.WriteString("]}")
				if r := do(t, h, "POST", "/api/2.0/sextant/progress", body.String()); r.status != 200 {
					errs <- fmt.Sprintf("node %d request %d: %d %s", n, q, r.status, r.raw)
				}
				bad := `{"run_id": "` + run + `", "node": "x", "reports": [{"rank": 99, "step": 1, "step_time_s": 1}, {"rank": 98, "step": 1, "step_time_s": -1}]}`
				if r := do(t, h, "POST", "/api/2.0/sextant/progress", bad); r.status != 400 || !strings.Contains(r.raw, "reports[1]") {
					errs <- fmt.Sprintf("node %d bad request: %d %s", n, r.status, r.raw)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for n := range nodes {
		for _, f := range []string{"step_time_s", "data_wait_s"} {
			key := fmt.Sprintf("sextant/progress/rank_%d/%s", n, f)
			r := do(t, h, "GET", "/api/2.0/mlflow/metrics/get-history?run_id="+run+"&metric_key="+key+"&max_results=25000", nil)
			pts, _ := r.body["metrics"].([]any)
			want := requests * perReq
			if f == "data_wait_s" {
				want /= 2
			}
			if r.status != 200 || len(pts) != want {
				t.Fatalf("%s: %d, %d points, want %d", key, r.status, len(pts), want)
			}
			for _, p := range pts {
				m := p.(map[string]any)
				step := int(m["step"].(float64))
				v, _ := strconv.ParseFloat(fmt.Sprintf("%d.%d", n, step), 64)
				if f == "data_wait_s" {
					v, _ = strconv.ParseFloat(fmt.Sprintf("0.%d", step+1), 64)
				}
				if m["value"].(float64) != v || m["timestamp"].(float64) != float64(1_800_000_000_000+step) || f == "data_wait_s" && step/perReq%2 != 0 {
					t.Fatalf("%s: point %v, want value %v", key, m, v)
				}
			}
		}
	}
	if r := do(t, h, "GET", "/api/2.0/mlflow/metrics/get-history?run_id="+run+"&metric_key=sextant/progress/rank_99/step_time_s", nil); r.status != 200 || strings.Contains(r.raw, `"value"`) {
		t.Fatalf("a refused request's rank: %d %s", r.status, r.raw)
	}
}
