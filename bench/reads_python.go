package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// pyHistoryScript times MlflowClient.get_metric_history, the Python
// client's own paging included (max_results=25000 per page, following
// next_page_token, building a Metric per point). argv: tracking URI, run
// id, key, expected points, timed repetitions. It prints one JSON object.
const pyHistoryScript = `
import json, sys, time
import mlflow
from mlflow import MlflowClient

uri, run_id, key, n, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
client = MlflowClient(tracking_uri=uri)
hist = client.get_metric_history(run_id, key)  # warm-up, checked
if len(hist) != n:
    print(json.dumps({"error": "got %d points, want %d" % (len(hist), n)}))
    sys.exit(1)
times = []
for _ in range(reps):
    t = time.perf_counter()
    hist = client.get_metric_history(run_id, key)
    times.append((time.perf_counter() - t) * 1000)
    assert len(hist) == n
print(json.dumps({"ms": times, "mlflow": mlflow.__version__, "python": sys.version.split()[0]}))
`

// noPython says why a Python client's figures are missing.
const noPython = "no Python with mlflow: give -python, -mlflow or -mlflow-venv"

// pythonWithMLflow returns -python, or else the Python beside the mlflow
// executable, or "" when there is neither.
func pythonWithMLflow(c config, specs []peerSpec) string {
	if c.python != "" {
		return c.python
	}
	for _, sp := range specs {
		if sp.name == "mlflow" && sp.absent == "" {
			return sp.python
		}
	}
	return ""
}

// pythonHistory runs pyHistoryScript against every server, one after the
// other, with the Python of -python or the one beside the mlflow
// executable. Without either it says why it was skipped.
func pythonHistory(ctx context.Context, c config, specs []peerSpec, peers []*livePeer, runs map[string]string, n int) (map[string]any, error) {
	py := pythonWithMLflow(c, specs)
	if py == "" {
		return map[string]any{"skipped": noPython}, nil
	}
	script := filepath.Join(os.TempDir(), fmt.Sprintf("sextant-bench-history-%d.py", os.Getpid()))
	if err := os.WriteFile(script, []byte(pyHistoryScript), 0o644); err != nil {
		return nil, err
	}
	defer os.Remove(script)
	out := map[string]any{
		"how":    "MlflowClient(tracking_uri).get_metric_history(run_id, 'loss') in a Python process of its own, after one untimed call; wall time per call",
		"python": py,
	}
	times := map[string][]float64{}
	reps := min(c.readsRounds, 5)
	probe := startLoadProbe(peers)
	for _, p := range peers {
		r := reps
		if p.name != "sextant" {
			r = min(reps, 3)
		}
		cmd := exec.CommandContext(ctx, py, script, p.s.url, runs[p.name], "loss", strconv.Itoa(n), strconv.Itoa(r))
		cmd.Env = append(os.Environ(), "MLFLOW_DISABLE_TELEMETRY=true", "DO_NOT_TRACK=true")
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("python client against %s: %w: %s", p.name, err, truncateBytes(b, 300))
		}
		var res struct {
			MS     []float64 `json:"ms"`
			MLflow string    `json:"mlflow"`
			Python string    `json:"python"`
			Error  string    `json:"error"`
		}
		if err := json.Unmarshal(b, &res); err != nil || res.Error != "" {
			return nil, fmt.Errorf("python client against %s: %v %s", p.name, err, res.Error)
		}
		times[p.name] = res.MS
		out["mlflow_client_version"] = res.MLflow
		out["python_version"] = res.Python
	}
	m := medians(times)
	for k, v := range m {
		out[k] = v
	}
	out["load"] = probe.stop()
	return out, nil
}
