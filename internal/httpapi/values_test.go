package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/httpapi"
)

// TestParamAndTagValueRequired checks that log-parameter, set-tag and
// log-batch agree: a param or tag without a value (absent or null) is
// refused with a 400 naming the field, and nothing of the request is
// stored; an empty string, which the mlflow client sends for "", is a
// value. Before the fix log-batch stored a missing value as "".
func TestParamAndTagValueRequired(t *testing.T) {
	s := MustServer(t)
	r := do(t, s, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": "0"})
	if r.status != 200 {
		t.Fatalf("create run: %d %s", r.status, r.raw)
	}
	run := r.body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
	refused := map[string]struct {
		path, body, field string
	}{
		"ErrLogParameter":     {"/api/2.0/mlflow/runs/log-parameter", `{"run_id":"RUN","key":"p"}`, "value"},
		"ErrLogParameterNull": {"/api/2.0/mlflow/runs/log-parameter", `{"run_id":"RUN","key":"p","value":null}`, "value"},
		"ErrSetTag":           {"/api/2.0/mlflow/runs/set-tag", `{"run_id":"RUN","key":"t"}`, "value"},
		"ErrBatchParam":       {"/api/2.0/mlflow/runs/log-batch", `{"run_id":"RUN","params":[{"key":"a","value":"1"},{"key":"p"}]}`, "params[1].value"},
		"ErrBatchParamNull":   {"/api/2.0/mlflow/runs/log-batch", `{"run_id":"RUN","params":[{"key":"p","value":null}]}`, "params[0].value"},
		"ErrBatchTag":         {"/api/2.0/mlflow/runs/log-batch", `{"run_id":"RUN","tags":[{"key":"t"}],"params":[{"key":"b","value":"1"}]}`, "tags[0].value"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			wantFieldError(t, do(t, s, "POST", tc.path, strings.ReplaceAll(tc.body, "RUN", run)), 400, tc.field)
		})
	}
	for _, req := range []struct{ path, body string }{
		{"/api/2.0/mlflow/runs/log-parameter", `{"run_id":"RUN","key":"p1","value":""}`},
		{"/api/2.0/mlflow/runs/set-tag", `{"run_id":"RUN","key":"t1","value":""}`},
		{"/api/2.0/mlflow/runs/log-batch", `{"run_id":"RUN","params":[{"key":"p2","value":""}],"tags":[{"key":"t2","value":""}]}`},
	} {
		if r := do(t, s, "POST", req.path, strings.ReplaceAll(req.body, "RUN", run)); r.status != 200 {
			t.Fatalf("%s with an empty value: %d %s", req.path, r.status, r.raw)
		}
	}
	r = do(t, s, "GET", "/api/2.0/mlflow/runs/get?run_id="+run, nil)
	data := r.body["run"].(map[string]any)["data"].(map[string]any)
	got := map[string]any{}
	for _, kind := range []string{"params", "tags"} {
		items, _ := data[kind].([]any)
		for _, it := range items {
			kv := it.(map[string]any)
			if k := kv["key"].(string); !strings.HasPrefix(k, "mlflow.") {
				got[kind+":"+k] = kv["value"]
			}
		}
	}
	want := map[string]any{"params:p1": "", "params:p2": "", "tags:t1": "", "tags:t2": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored params and tags: %v, want %v (nothing of the refused requests)", got, want)
	}
}

// TestGPUReadingOutOfRange checks that a GPU reading beyond float64's
// range (1e400) is refused with a 400 naming the field, where it used to
// be stored as a missing reading without a word; null and the strings
// "NaN" and "Infinity" still mean no reading (docs/gpu.md).
func TestGPUReadingOutOfRange(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOff)
	sample := func(gpuFields, procFields string) string {
		return fmt.Sprintf(`{"node":"n1","samples":[{"ts_ms":%d,"gpus":[{"index":0,"uuid":"GPU-0"%s}],"processes":[{"gpu":0,"pid":1%s}]}]}`, time.Now().UnixMilli(), gpuFields, procFields)
	}
	for name, tc := range map[string]struct{ body, field string }{
		"ErrUtil":        {sample(`,"util":1e400`, ""), "samples[0].gpus[0].util"},
		"ErrPowerNeg":    {sample(`,"power":-1e400`, ""), "samples[0].gpus[0].power"},
		"ErrMemUsed":     {sample(`,"mem_used":1e999`, ""), "samples[0].gpus[0].mem_used"},
		"ErrProcMemUsed": {sample("", `,"mem_used":1e400`), "samples[0].processes[0].mem_used"},
	} {
		t.Run(name, func(t *testing.T) {
			wantFieldError(t, s.as(t, "", "POST", gpuAPI+"/samples", tc.body), 400, tc.field)
		})
	}
	if r := s.as(t, "", "POST", gpuAPI+"/samples", sample(`,"util":null,"power":"NaN","temp":"Infinity","sm_clock":1e300`, "")); r.status != 200 {
		t.Fatalf("null, NaN, Infinity and a large finite reading: %d %s", r.status, r.raw)
	}
}
