package client

import (
	"context"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

// The MLflow tracking calls `sextant run` and `sextant logs` need, in the
// MLflow REST API's JSON shape.

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
	var out wire.WhoAmI
	if err := c.call(ctx, &request{method: "GET", path: sxAPI + "/auth/whoami"}, &out); err != nil {
		return nil, err
	}
	return &Identity{Email: out.User.Email, Admin: out.User.Admin, MultiUser: out.MultiUser}, nil
}

// GetExperimentByName returns the experiment with the exact name;
// errs.NotFound when there is none.
func (c *Client) GetExperimentByName(ctx context.Context, name string) (*tracking.Experiment, error) {
	var out struct {
		Experiment wire.Experiment `json:"experiment"`
	}
	r := &request{method: "GET", path: "/api/2.0/mlflow/experiments/get-by-name", query: url.Values{"experiment_name": {name}}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Experiment.Domain(), nil
}

// GetExperiment returns an experiment by id.
func (c *Client) GetExperiment(ctx context.Context, id string) (*tracking.Experiment, error) {
	var out struct {
		Experiment wire.Experiment `json:"experiment"`
	}
	r := &request{method: "GET", path: "/api/2.0/mlflow/experiments/get", query: url.Values{"experiment_id": {id}}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Experiment.Domain(), nil
}

// CreateExperiment creates an experiment and returns its id;
// errs.AlreadyExists when the name is taken.
func (c *Client) CreateExperiment(ctx context.Context, name string) (string, error) {
	r, err := jsonRequest("POST", "/api/2.0/mlflow/experiments/create", wire.CreateExperimentRequest{Name: name})
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
	tags := make([]wire.KV, len(req.Tags))
	for i, t := range req.Tags {
		tags[i] = wire.KV(t)
	}
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/create", wire.CreateRunRequest{
		ExperimentID: req.ExperimentID, UserID: req.UserID, RunName: req.RunName,
		StartTime: wire.NewInt(req.StartTimeMs), Tags: tags,
	})
	if err != nil {
		return nil, err
	}
	var out struct {
		Run wire.Run `json:"run"`
	}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Run.Domain(), nil
}

// GetRun returns a run with its params and tags.
func (c *Client) GetRun(ctx context.Context, id string) (*tracking.Run, error) {
	var out struct {
		Run wire.Run `json:"run"`
	}
	r := &request{method: "GET", path: "/api/2.0/mlflow/runs/get", query: url.Values{"run_id": {id}}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Run.Domain(), nil
}

// UpdateRun changes a run's status, end time or name.
func (c *Client) UpdateRun(ctx context.Context, id string, u tracking.RunUpdate) error {
	body := wire.UpdateRunRequest{RunID: id, RunName: u.Name}
	if u.Status != nil {
		body.Status = wire.Enum{Name: u.Status.String(), Set: true}
	}
	if u.EndTimeMs != nil {
		body.EndTime = wire.NewInt(*u.EndTimeMs)
	}
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/update", body)
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// SetTags sets run tags in one log-batch request.
func (c *Client) SetTags(ctx context.Context, runID string, tags ...tracking.Tag) error {
	wt := make([]wire.KVIn, len(tags))
	for i, t := range tags {
		wt[i] = wire.KVIn{Key: t.Key, Value: &tags[i].Value}
	}
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/log-batch", wire.LogBatchRequest{RunID: runID, Tags: wt})
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// DeleteTag deletes a run tag (MLflow's runs/delete-tag); deleting a tag
// the run does not have is an error from the server.
func (c *Client) DeleteTag(ctx context.Context, runID, key string) error {
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/delete-tag", struct {
		RunID string `json:"run_id"`
		Key   string `json:"key"`
	}{runID, key})
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
		r, err := jsonRequest("POST", "/api/2.0/mlflow/experiments/search", wire.SearchExperimentsRequest{Filter: filter, MaxResults: wire.NewInt(1000), PageToken: token})
		if err != nil {
			return nil, err
		}
		var out struct {
			Experiments []wire.Experiment `json:"experiments"`
			Next        string            `json:"next_page_token"`
		}
		if err := c.call(ctx, r, &out); err != nil {
			return nil, err
		}
		for i := range out.Experiments {
			all = append(all, out.Experiments[i].Domain())
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
	r, err := jsonRequest("POST", "/api/2.0/mlflow/runs/search", wire.SearchRunsRequest{
		ExperimentIDs: experimentIDs, Filter: filter, OrderBy: orderBy, MaxResults: wire.NewInt(int64(max)),
	})
	if err != nil {
		return nil, err
	}
	var out struct {
		Runs []wire.Run `json:"runs"`
	}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	runs := make([]*tracking.Run, len(out.Runs))
	for i := range out.Runs {
		runs[i] = out.Runs[i].Domain()
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

// PutRunArtifact uploads size bytes from body as the artifact at path
// (relative, such as "sextant/hang/x.json") of the run whose artifact URI
// is artifactURI; the run's artifacts must be served by the proxy.
func (c *Client) PutRunArtifact(ctx context.Context, artifactURI, path string, body io.ReadSeeker, size int64) error {
	base, err := ArtifactPath(artifactURI)
	if err != nil {
		return err
	}
	return c.PutArtifact(ctx, base+"/"+strings.TrimLeft(path, "/"), body, size)
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
