package httpapi_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestLogBatchConcurrentRequests sends log-batch requests from several
// clients at once, refused ones among them, and reads every point back:
// the memory a request borrows (body, decoded request, converted metrics)
// goes back to a pool when it ends, so a point seen by another request, or
// a string of one body surviving into the next, would show here.
func TestLogBatchConcurrentRequests(t *testing.T) {
	s := MustServer(t)
	const clients, batches, perBatch = 6, 12, 500
	runs := make([]string, clients)
	for c := range runs {
		runs[c] = do(t, s, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": "0"}).body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
	}
	var wg sync.WaitGroup
	errs := make(chan string, clients*batches*2)
	for c := range clients {
		wg.Go(func() {
			for b := range batches {
				var body strings.Builder
				fmt.Fprintf(&body, `{"run_id":%q,"metrics":[`, runs[c])
				for i := range perBatch {
					if i > 0 {
						body.WriteByte(',')
					}
					step := b*perBatch + i
					// Each client's keys and values are its own.
					fmt.Fprintf(&body, `{"key":"c%d/k%d","value":%d.%d,"timestamp":%d,"step":%d,"dataset_name":"d%d"}`, c, i%3, c, step, 1000+step, step, c)
				}
				body.WriteString("]}")
				if r := do(t, s, "POST", "/api/2.0/mlflow/runs/log-batch", body.String()); r.status != 200 {
					errs <- fmt.Sprintf("client %d batch %d: %d %s", c, b, r.status, r.raw)
				}
				// A refused request between good ones.
				bad := `{"run_id":"` + runs[c] + `","metrics":[{"key":"c` + strconv.Itoa(c) + `","value":1,"timestamp":1},{"key":"x","value":1}]}`
				if r := do(t, s, "POST", "/api/2.0/mlflow/runs/log-batch", bad); r.status != 400 || !strings.Contains(r.raw, "metrics[1].timestamp") {
					errs <- fmt.Sprintf("client %d bad batch: %d %s", c, r.status, r.raw)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for c := range clients {
		for k := range 3 {
			key := fmt.Sprintf("c%d/k%d", c, k)
			r := do(t, s, "GET", "/api/2.0/mlflow/metrics/get-history?run_id="+runs[c]+"&metric_key="+key+"&max_results=25000", nil)
			pts, _ := r.body["metrics"].([]any)
			want := batches * ((perBatch - k + 2) / 3) // i%3 == k of each batch
			if r.status != 200 || len(pts) != want {
				t.Fatalf("%s: %d, %d points, want %d", key, r.status, len(pts), want)
			}
			for _, p := range pts {
				m := p.(map[string]any)
				step := int(m["step"].(float64))
				v, _ := strconv.ParseFloat(fmt.Sprintf("%d.%d", c, step), 64)
				if m["key"] != key || m["value"].(float64) != v || m["timestamp"].(float64) != float64(1000+step) || step%perBatch%3 != k {
					t.Fatalf("%s: point %v, want value %v", key, m, v)
				}
			}
		}
	}
}
