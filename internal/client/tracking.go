package client

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// The MLflow tracking calls `sextant run` and `sextant logs` need, in the
// MLflow REST API's JSON shape.

type wireTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type wireExperiment struct {
	ExperimentID     string    `json:"experiment_id"`
	Name             string    `json:"name"`
	ArtifactLocation string    `json:"artifact_location"`
	LifecycleStage   string    `json:"lifecycle_stage"`
	Tags             []wireTag `json:"tags"`
}

func (w *wireExperiment) domain() *tracking.Experiment {
	e := &tracking.Experiment{ID: w.ExperimentID, Name: w.Name, ArtifactLocation: w.ArtifactLocation, LifecycleStage: tracking.LifecycleStage(w.LifecycleStage)}
	for _, t := range w.Tags {
		e.Tags = append(e.Tags, tracking.Tag(t))
	}
	return e
}

type wireRun struct {
	Info struct {
		RunID          string `json:"run_id"`
		RunName        string `json:"run_name"`
		ExperimentID   string `json:"experiment_id"`
		UserID         string `json:"user_id"`
		Status         string `json:"status"`
		StartTime      int64  `json:"start_time"`
		EndTime        int64  `json:"end_time"`
		ArtifactURI    string `json:"artifact_uri"`
		LifecycleStage string `json:"lifecycle_stage"`
	} `json:"info"`
	Data struct {
		Metrics []wireMetric `json:"metrics"`
		Params  []wireTag    `json:"params"`
		Tags    []wireTag    `json:"tags"`
	} `json:"data"`
}

// wireMetric is a metric's latest point; the value is a JSON number, or
// one of the strings "NaN", "Infinity" and "-Infinity".
type wireMetric struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Timestamp int64           `json:"timestamp"`
	Step      int64           `json:"step"`
}

func (m wireMetric) value() float64 {
	var s string
	if json.Unmarshal(m.Value, &s) == nil {
		switch s {
		case "Infinity":
			return math.Inf(1)
		case "-Infinity":
			return math.Inf(-1)
		}
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v
		}
		return math.NaN()
	}
	var v float64
	if json.Unmarshal(m.Value, &v) != nil {
		return math.NaN()
	}
	return v
}

func (w *wireRun) domain() *tracking.Run {
	i := w.Info
	st, _ := tracking.ParseRunStatus(i.Status)
	r := &tracking.Run{Info: tracking.RunInfo{
		RunID: i.RunID, RunName: i.RunName, ExperimentID: i.ExperimentID, UserID: i.UserID, Status: st,
		StartTimeMs: i.StartTime, EndTimeMs: i.EndTime, ArtifactURI: i.ArtifactURI, LifecycleStage: tracking.LifecycleStage(i.LifecycleStage),
	}}
	for _, m := range w.Data.Metrics {
		r.Data.Metrics = append(r.Data.Metrics, tracking.Metric{Key: m.Key, Point: metrics.Point{Step: m.Step, TimestampMs: m.Timestamp, Value: m.value()}})
	}
	for _, p := range w.Data.Params {
		r.Data.Params = append(r.Data.Params, tracking.Param(p))
	}
	for _, t := range w.Data.Tags {
		r.Data.Tags = append(r.Data.Tags, tracking.Tag(t))
	}
	return r
}

// Identity is who the server takes the client for.
type Identity struct {
	// Email is the signed-in user's email; in single-user mode the
	// server's stand-in for everybody ("local").
	Email string
	Admin bool
	// MultiUser says whether the server requires authentication, and so
	// whether experiment names must be absolute workspace paths.
	MultiUser bool
}

// WhoAmI asks a Sextant server who the credentials belong to (GET
// /api/2.0/sextant/auth/whoami). A server without that route (an MLflow
// server) answers errs.NotFound.
func (c *Client) WhoAmI(ctx context.Context) (*Identity, error) {
	var out struct {
		User struct {
			Email string `json:"email"`
			Admin bool   `json:"admin"`
		} `json:"user"`
		MultiUser bool `json:"multi_user"`
	}
	if err := c.call(ctx, &request{method: "GET", path: "/api/2.0/sextant/auth/whoami"}, &out); err != nil {
		return nil, err
	}
	return &Identity{Email: out.User.Email, Admin: out.User.Admin, MultiUser: out.MultiUser}, nil
}

// GetExperimentByName returns the experiment with the exact name;
// errs.NotFound when there is none.
func (c *Client) GetExperimentByName(ctx context.Context, name string) (*tracking.Experiment, error) {
	var out struct {
		Experiment wireExperiment `json:"experiment"`
	}
	r := &request{method: "GET", path: "/api/2.0/mlflow/experiments/get-by-name", query: url.Values{"experiment_name": {name}}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Experiment.domain(), nil
}

// GetExperiment returns an experiment by id.
func (c *Client) GetExperiment(ctx context.Context, id string) (*tracking.Experiment, error) {
	var out struct {
		Experiment wireExperiment `json:"experiment"`
	}
	r := &request{method: "GET", path: "/api/2.0/mlflow/experiments/get", query: url.Values{"experiment_id": {id}}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Experiment.domain(), nil
}

// CreateExperiment creates an experiment and returns its id;
// errs.AlreadyExists when the name is taken.
func (c *Client) CreateExperiment(ctx context.Context, name string) (string, error) {
	r, err := jsonRequest("POST", "/api/2.0/mlflow/experiments/create", map[string]string{"name": name})
	if err != nil {
		return "", err
	}
	var out struct {
		ExperimentID string `json:"experiment_id"`
	}
	if err := c.call(ctx, r, &out); err != nil {
		return "", err
	}
	return out.ExperimentID, nil
}

// CreateRun creates a run.
func (c *Client) CreateRun(ctx context.Context, req tracking.CreateRunRequest) (*tracking.Run, error) {
	tags := make([]wireTag, len(req.Tags))
	for i, t := range req.Tags {
		tags[i] = wireTag(t)
	}
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/create", map[string]any{
		"experiment_id": req.ExperimentID, "user_id": req.UserID, "run_name": req.RunName,
		"start_time": req.StartTimeMs, "tags": tags,
	})
	if err != nil {
		return nil, err
	}
	var out struct {
		Run wireRun `json:"run"`
	}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Run.domain(), nil
}

// GetRun returns a run with its params and tags.
func (c *Client) GetRun(ctx context.Context, id string) (*tracking.Run, error) {
	var out struct {
		Run wireRun `json:"run"`
	}
	r := &request{method: "GET", path: "/api/2.0/mlflow/runs/get", query: url.Values{"run_id": {id}}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Run.domain(), nil
}

// UpdateRun changes a run's status, end time or name.
func (c *Client) UpdateRun(ctx context.Context, id string, u tracking.RunUpdate) error {
	body := map[string]any{"run_id": id}
	if u.Status != nil {
		body["status"] = u.Status.String()
	}
	if u.EndTimeMs != nil {
		body["end_time"] = *u.EndTimeMs
	}
	if u.Name != nil {
		body["run_name"] = *u.Name
	}
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/update", body)
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// SetTags sets run tags in one log-batch request.
func (c *Client) SetTags(ctx context.Context, runID string, tags ...tracking.Tag) error {
	wt := make([]wireTag, len(tags))
	for i, t := range tags {
		wt[i] = wireTag(t)
	}
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/log-batch", map[string]any{"run_id": runID, "tags": wt})
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// SearchExperiments returns the active experiments whose names match
// filter (MLflow's grammar; "" for all), following every page.
func (c *Client) SearchExperiments(ctx context.Context, filter string) ([]*tracking.Experiment, error) {
	var all []*tracking.Experiment
	token := ""
	for {
		r, err := jsonRequest("POST", "/api/2.0/mlflow/experiments/search", map[string]any{"filter": filter, "max_results": 1000, "page_token": token})
		if err != nil {
			return nil, err
		}
		var out struct {
			Experiments []wireExperiment `json:"experiments"`
			Next        string           `json:"next_page_token"`
		}
		if err := c.call(ctx, r, &out); err != nil {
			return nil, err
		}
		for i := range out.Experiments {
			all = append(all, out.Experiments[i].domain())
		}
		if out.Next == "" {
			return all, nil
		}
		token = out.Next
	}
}

// SearchRuns returns up to max runs of the experiments that match filter
// (MLflow's grammar), ordered by orderBy.
func (c *Client) SearchRuns(ctx context.Context, experimentIDs []string, filter string, orderBy []string, max int) ([]*tracking.Run, error) {
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/search", map[string]any{
		"experiment_ids": experimentIDs, "filter": filter, "order_by": orderBy, "max_results": max,
	})
	if err != nil {
		return nil, err
	}
	var out struct {
		Runs []wireRun `json:"runs"`
	}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	runs := make([]*tracking.Run, len(out.Runs))
	for i := range out.Runs {
		runs[i] = out.Runs[i].domain()
	}
	return runs, nil
}

// PutArtifact uploads size bytes from body as the artifact at path through
// the server's artifact proxy; path is relative to the proxy's root, such
// as "1/<run id>/artifacts/logs/output.txt" for a run whose artifact URI is
// mlflow-artifacts:/1/<run id>/artifacts.
func (c *Client) PutArtifact(ctx context.Context, path string, body io.ReadSeeker, size int64) error {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	r := &request{method: "PUT", path: "/api/2.0/mlflow-artifacts/artifacts/" + strings.Join(segs, "/"), body: body, size: size, ctype: "text/plain; charset=utf-8"}
	return c.call(ctx, r, nil)
}

// ArtifactPath returns the proxy path of a run's artifact URI
// (mlflow-artifacts:/1/<run>/artifacts -> 1/<run>/artifacts), or an error
// when the run's artifacts are not served by the proxy.
func ArtifactPath(artifactURI string) (string, error) {
	rest, ok := strings.CutPrefix(artifactURI, "mlflow-artifacts:")
	if !ok {
		return "", errs.Errorf(errs.Invalid, "the run's artifact location %q is not served by the server's artifact proxy (mlflow-artifacts:/...)", artifactURI)
	}
	if u, err := url.Parse(artifactURI); err == nil && u.Host != "" {
		// mlflow-artifacts://host:port/path names another server.
		rest = u.Path
	}
	return strings.Trim(rest, "/"), nil
}

// itoa is strconv.FormatInt for query values.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }
