package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// pySearchScript times MlflowClient.search_runs as a user calls it: one
// page of max_results runs, parsed into Run objects by the client. argv:
// tracking URI, experiment id, the second experiment's, timed repetitions; stdin: the shapes, each
// with the number of runs it must return. It prints one JSON object.
const pySearchScript = `
import json, sys, time
import mlflow
from mlflow import MlflowClient

uri, exp, exp2, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
shapes = json.load(sys.stdin)
client = MlflowClient(tracking_uri=uri)
out = {}
for sh in shapes:
    def search():
        return client.search_runs([exp, exp2] if sh["both"] else [exp], filter_string=sh["filter"], order_by=[sh["order_by"]], max_results=sh["max_results"])
    runs = search()  # warm-up, checked
    if len(runs) != sh["want"]:
        print(json.dumps({"error": "%s: got %d runs, want %d" % (sh["name"], len(runs), sh["want"])}))
        sys.exit(1)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        runs = search()
        times.append((time.perf_counter() - t) * 1000)
        assert len(runs) == sh["want"]
    out[sh["name"]] = times
print(json.dumps({"ms": out, "mlflow": mlflow.__version__, "python": sys.version.split()[0]}))
`

// pythonSearch runs pySearchScript against each server of on, one after
// the other, and returns each shape's times by server; want is the
// number of runs each shape returns (Sextant's page, which the peers'
// pages equal). It returns nil times and why when there is no Python.
func pythonSearch(ctx context.Context, c config, specs []peerSpec, on []*livePeer, want map[string]int) (map[string]map[string][]float64, map[string]any, error) {
	py := pythonWithMLflow(c, specs)
	if py == "" {
		return nil, map[string]any{"skipped": noPython}, nil
	}
	script := filepath.Join(os.TempDir(), fmt.Sprintf("sextant-bench-search-%d.py", os.Getpid()))
	if err := os.WriteFile(script, []byte(pySearchScript), 0o644); err != nil {
		return nil, nil, err
	}
	defer os.Remove(script)
	type shape struct {
		Name       string `json:"name"`
		Filter     string `json:"filter"`
		OrderBy    string `json:"order_by"`
		MaxResults int    `json:"max_results"`
		Want       int    `json:"want"`
		Both       bool   `json:"both"`
	}
	var shapes []shape
	for _, sh := range searchShapes {
		shapes = append(shapes, shape{sh.Name, sh.Filter, sh.OrderBy, searchPage, want[sh.Name], sh.Both})
	}
	in, _ := json.Marshal(shapes)
	byShape := map[string]map[string][]float64{}
	about := map[string]any{"python": py}
	reps := min(c.readsRounds, 5)
	for _, p := range on {
		r := reps
		if p.name != "sextant" {
			r = min(reps, 3)
		}
		cmd := exec.CommandContext(ctx, py, script, p.cl.base, p.exp, p.exp2, strconv.Itoa(r))
		cmd.Env = append(os.Environ(), "MLFLOW_DISABLE_TELEMETRY=true", "DO_NOT_TRACK=true")
		cmd.Stdin = bytes.NewReader(in)
		b, err := cmd.Output()
		if err != nil {
			return nil, nil, fmt.Errorf("python search_runs against %s: %w: %s", p.name, err, truncateBytes(b, 300))
		}
		var res struct {
			MS     map[string][]float64 `json:"ms"`
			MLflow string               `json:"mlflow"`
			Python string               `json:"python"`
			Error  string               `json:"error"`
		}
		if err := json.Unmarshal(b, &res); err != nil || res.Error != "" {
			return nil, nil, fmt.Errorf("python search_runs against %s: %v %s", p.name, err, res.Error)
		}
		for name, ts := range res.MS {
			if byShape[name] == nil {
				byShape[name] = map[string][]float64{}
			}
			byShape[name][p.name] = ts
		}
		about["mlflow_client_version"] = res.MLflow
		about["python_version"] = res.Python
	}
	return byShape, about, nil
}
