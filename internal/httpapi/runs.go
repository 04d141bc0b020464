package httpapi

import (
	"bytes"
	"net/http"
	"slices"
	"sync"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

var runStatuses = map[string]int64{"RUNNING": 1, "SCHEDULED": 2, "FINISHED": 3, "FAILED": 4, "KILLED": 5}

func (s *Server) registerRunRoutes() {
	s.handle("POST", "/mlflow/runs/create", EditExperiment, s.createRun, refParentRunTag)
	s.handle("GET", "/mlflow/runs/get", ReadExperiment, s.getRun)
	s.handle("POST", "/mlflow/runs/update", EditExperiment, s.updateRun)
	s.handle("POST", "/mlflow/runs/delete", ManageExperiment, s.deleteRun)
	s.handle("POST", "/mlflow/runs/restore", ManageExperiment, s.restoreRun)
	s.handle("POST", "/mlflow/runs/log-metric", EditExperiment, s.logMetric, refMetricModel)
	s.handle("POST", "/mlflow/runs/log-parameter", EditExperiment, s.logParam)
	s.handle("POST", "/mlflow/runs/set-tag", EditExperiment, s.setTag, refParentRunSet)
	s.handle("POST", "/mlflow/runs/delete-tag", EditExperiment, s.deleteTag)
	s.handle("POST", "/mlflow/runs/log-batch", EditExperiment, s.logBatch, refBatchMetricModel, refParentRunTag)
	s.handle("POST", "/mlflow/runs/log-inputs", EditExperiment, s.logInputs, refInputModel)
	s.handle("POST", "/mlflow/runs/outputs", EditExperiment, s.logOutputs, refOutputModel)
	s.handle("POST", "/mlflow/runs/search", Authenticated, s.searchRuns, refSearchExperiments)
}

// runID returns run_id, falling back to the legacy run_uuid. A request
// that sets both to different runs is refused: only one of them would be
// checked and acted on.
func runID(id, uuid string) (string, error) {
	if id != "" && uuid != "" && id != uuid {
		return "", invalid("run_id '%s' and run_uuid '%s' name different runs: send one of them", errs.Truncate(id, 80), errs.Truncate(uuid, 80))
	}
	if id != "" {
		return id, nil
	}
	return uuid, nil
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateRunRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	exp := req.ExperimentID
	if exp == "" {
		exp = tracking.DefaultExperimentID
	}
	if err := s.allowExperimentID(r, exp); err != nil {
		return err
	}
	if err := s.allowParentTags(r, req.Tags); err != nil {
		return err
	}
	if sub := SubjectFromContext(r.Context()); s.multiUser() && sub != nil && sub.User != nil {
		req.UserID = sub.User.Email // who logs is who signed in
	}
	run, err := s.tr.CreateRun(r.Context(), tracking.CreateRunRequest{
		ExperimentID: req.ExperimentID, UserID: req.UserID, RunName: req.RunName,
		StartTimeMs: req.StartTime.V, Tags: kvTags(req.Tags),
	})
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"run": wire.ToRun(run)})
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "run_id", "run_uuid")
	if err != nil {
		return err
	}
	id, err := runID(q.str("run_id"), q.str("run_uuid"))
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	run, err := s.tr.GetRun(r.Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"run": wire.ToRun(run)})
}

func (s *Server) updateRun(w http.ResponseWriter, r *http.Request) error {
	var req wire.UpdateRunRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	var u tracking.RunUpdate
	if req.Status.Set {
		st, err := req.Status.Resolve("status", runStatuses)
		if err != nil {
			return err
		}
		rs := tracking.RunStatus(st)
		u.Status = &rs
	}
	if req.EndTime.Set {
		u.EndTimeMs = &req.EndTime.V
	}
	u.Name = req.RunName
	id, err := runID(req.RunID, req.RunUUID)
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	info, err := s.tr.UpdateRun(r.Context(), id, u)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"run_info": wire.ToRunInfo(info)})
}

type runIDRequest struct {
	RunID string `json:"run_id"`
}

func (s *Server) deleteRun(w http.ResponseWriter, r *http.Request) error {
	var req runIDRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	if err := s.tr.DeleteRun(r.Context(), req.RunID); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) restoreRun(w http.ResponseWriter, r *http.Request) error {
	var req runIDRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	if err := s.tr.RestoreRun(r.Context(), req.RunID); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) logMetric(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		RunID   string `json:"run_id"`
		RunUUID string `json:"run_uuid"`
		wire.MetricIn
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	m, err := req.MetricIn.Domain("", 0)
	if err != nil {
		return err
	}
	id, err := runID(req.RunID, req.RunUUID)
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	if err := s.allowRef(r, refMetricModel, m.ModelID); err != nil {
		return err
	}
	if err := s.tr.LogMetric(r.Context(), id, m); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

type kvRunRequest struct {
	RunID   string  `json:"run_id"`
	RunUUID string  `json:"run_uuid"`
	Key     string  `json:"key"`
	Value   *string `json:"value"`
}

func (s *Server) logParam(w http.ResponseWriter, r *http.Request) error {
	var req kvRunRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Value == nil {
		return invalid("Missing value for required parameter 'value'. See the API docs for more information about request parameters.")
	}
	id, err := runID(req.RunID, req.RunUUID)
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	if err := s.tr.LogParam(r.Context(), id, tracking.Param{Key: req.Key, Value: *req.Value}); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) setTag(w http.ResponseWriter, r *http.Request) error {
	var req kvRunRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Value == nil {
		return invalid("Missing value for required parameter 'value'. See the API docs for more information about request parameters.")
	}
	id, err := runID(req.RunID, req.RunUUID)
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	if req.Key == tracking.TagParentRunID {
		if err := s.allowRef(r, refParentRunSet, *req.Value); err != nil {
			return err
		}
	}
	if err := s.tr.SetTag(r.Context(), id, tracking.Tag{Key: req.Key, Value: *req.Value}); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) deleteTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		RunID string `json:"run_id"`
		Key   string `json:"key"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	if err := s.tr.DeleteTag(r.Context(), req.RunID, req.Key); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) logBatch(w http.ResponseWriter, r *http.Request) error {
	sc := logBatchPool.Get().(*logBatchScratch)
	defer sc.release()
	body, err := s.readBodyInto(w, r, &sc.body, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	req := &sc.req
	if err := wire.DecodeLogBatch(body, req); err != nil {
		return err
	}
	sc.metrics = slices.Grow(sc.metrics[:0], len(req.Metrics))[:len(req.Metrics)]
	b := tracking.Batch{
		Metrics: sc.metrics,
		Params:  make([]tracking.Param, len(req.Params)),
		Tags:    make([]tracking.Tag, len(req.Tags)),
	}
	for i := range req.Metrics {
		m, err := req.Metrics[i].Domain("metrics", i)
		if err != nil {
			return err
		}
		// A metric's run_id (MLflow 3's Metric carries one) can only be the
		// run the batch is logged to: it names no other object.
		if id := req.Metrics[i].RunID; id != "" && id != req.RunID {
			return invalid("Invalid value '%s' for parameter '%srun_id': a metric of a batch belongs to the batch's run %s", errs.Truncate(id, 80), indexed("metrics", i), errs.Truncate(req.RunID, 80))
		}
		b.Metrics[i] = m
	}
	for i, p := range req.Params {
		if p.Key == "" {
			return invalid("Missing value for required parameter '%skey'. See the API docs for more information about request parameters.", indexed("params", i))
		}
		if p.Value == nil {
			return invalid("Missing value for required parameter '%svalue'. See the API docs for more information about request parameters.", indexed("params", i))
		}
		b.Params[i] = tracking.Param{Key: p.Key, Value: *p.Value}
	}
	for i, t := range req.Tags {
		if t.Key == "" {
			return invalid("Missing value for required parameter '%skey'. See the API docs for more information about request parameters.", indexed("tags", i))
		}
		if t.Value == nil {
			return invalid("Missing value for required parameter '%svalue'. See the API docs for more information about request parameters.", indexed("tags", i))
		}
		b.Tags[i] = tracking.Tag{Key: t.Key, Value: *t.Value}
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	checkedModels := map[string]bool{}
	for _, m := range b.Metrics {
		if id := m.ModelID; id != "" && !checkedModels[id] {
			if err := s.allowRef(r, refBatchMetricModel, id); err != nil {
				return err
			}
			checkedModels[id] = true
		}
	}
	tags := make([]wire.KV, len(b.Tags))
	for i, t := range b.Tags {
		tags[i] = wire.KV(t)
	}
	if err := s.allowParentTags(r, tags); err != nil {
		return err
	}
	if err := s.tr.LogBatch(r.Context(), req.RunID, b); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

// logBatchScratch is the memory a log-batch request needs besides what it
// stores: its body, the decoded request and the converted metrics, about
// 300 KB for 1,000 metrics. Hundreds of requests a second allocated,
// zeroed and collected them (a fifth of the server's CPU under ingestion);
// the pool keeps them. Nothing of them outlives the request: the parser
// copies every string out of the body, and the store copies the points
// before it returns (it returns once its write is done).
type logBatchScratch struct {
	body    bytes.Buffer
	req     wire.LogBatchRequest
	metrics []tracking.Metric
}

var logBatchPool = sync.Pool{New: func() any { return new(logBatchScratch) }}

// logBatchScratchMax bounds what goes back to the pool: a rare huge body
// (the limit is configurable) is left to the collector.
const logBatchScratchMax = 4 << 20

func (sc *logBatchScratch) release() {
	if sc.body.Cap() > logBatchScratchMax {
		return
	}
	sc.body.Reset()
	sc.req = wire.LogBatchRequest{Metrics: sc.req.Metrics[:0]}
	clear(sc.metrics) // drop the strings it points to
	sc.metrics = sc.metrics[:0]
	logBatchPool.Put(sc)
}

func indexed(field string, i int) string {
	return field + "[" + itoa(i) + "]."
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	if i == 0 {
		return "0"
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}

func (s *Server) logInputs(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		RunID    string `json:"run_id"`
		Datasets []struct {
			Tags    []wire.KV    `json:"tags"`
			Dataset wire.Dataset `json:"dataset"`
		} `json:"datasets"`
		Models []wire.ModelInput `json:"models"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	ds := make([]tracking.DatasetInput, len(req.Datasets))
	for i, d := range req.Datasets {
		ds[i] = tracking.DatasetInput{Tags: kvTags(d.Tags), Dataset: tracking.Dataset(d.Dataset)}
	}
	ms := make([]tracking.ModelInput, len(req.Models))
	for i, m := range req.Models {
		ms[i] = tracking.ModelInput(m)
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	for _, m := range ms {
		if err := s.allowRef(r, refInputModel, m.ModelID); err != nil {
			return err
		}
	}
	if err := s.tr.LogInputs(r.Context(), req.RunID, ds, ms); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) logOutputs(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		RunID  string `json:"run_id"`
		Models []struct {
			ModelID string   `json:"model_id"`
			Step    wire.Int `json:"step"`
		} `json:"models"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	ms := make([]tracking.ModelOutput, len(req.Models))
	for i, m := range req.Models {
		ms[i] = tracking.ModelOutput{ModelID: m.ModelID, Step: m.Step.V}
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	for _, m := range ms {
		if err := s.allowRef(r, refOutputModel, m.ModelID); err != nil {
			return err
		}
	}
	if err := s.tr.LogOutputs(r.Context(), req.RunID, ms); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) searchRuns(w http.ResponseWriter, r *http.Request) error {
	var req wire.SearchRunsRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	vt, err := req.RunViewType.Resolve("run_view_type", viewTypes)
	if err != nil {
		return err
	}
	// MLflow's handler refuses more than its limit, its store less than 1.
	if req.MaxResults.Set && req.MaxResults.V <= 0 {
		return invalid("Invalid value %d for parameter 'max_results' supplied. It must be a positive integer", req.MaxResults.V)
	}
	if req.MaxResults.V > int64(s.tr.Limits().SearchMaxResults) {
		return wire.InvalidValue("max_results", req.MaxResults.V)
	}
	page, err := s.tr.SearchRuns(r.Context(), tracking.RunSearch{
		ExperimentIDs: s.readableExperiments(r.Context(), req.ExperimentIDs), Filter: req.Filter, OrderBy: req.OrderBy,
		ViewType: tracking.ViewType(vt), MaxResults: clampInt(req.MaxResults.V), PageToken: req.PageToken,
	})
	if err != nil {
		return err
	}
	return writeRuns(w, page)
}

// runsPerPart is the least number of runs worth a goroutine of their own
// when a page is encoded (a run is a few microseconds of strings read
// from all over the heap), for runs of up to keysPerRun metrics, params
// and tags; runs with more make a part with fewer (the chart board reads
// 100 runs of 3,000 metrics each: 24 MB).
const (
	runsPerPart = 128
	keysPerRun  = 16
)

// runsPerPartOf returns the least number of page's runs worth a part.
func runsPerPartOf(page tracking.RunPage) int {
	keys := 0
	for _, r := range page.Runs {
		keys += len(r.Data.Metrics) + len(r.Data.Params) + len(r.Data.Tags)
	}
	avg := keys / max(1, len(page.Runs))
	if avg <= keysPerRun {
		return runsPerPart
	}
	return max(1, runsPerPart*keysPerRun/avg)
}

// writeRuns writes page as runs/search answers it, encoded in parts on
// the idle cores into pooled buffers: a page of 1,000 runs is a megabyte,
// and with 100,000 runs in the search index (a heap of hundreds of
// megabytes that the collector marks every cycle) allocating it on every
// search made garbage collection a fifth of the search.
func writeRuns(w http.ResponseWriter, page tracking.RunPage) error {
	parts := encodeParts(len(page.Runs), runsPerPartOf(page), func(dst []byte, from, to int) []byte {
		return wire.AppendRunRange(dst, page.Runs, from, to)
	})
	defer putEncodeBuffers(parts)
	return writeParts(w, wire.AppendRunsHead(nil, page), parts, wire.AppendRunsTail(nil, page))
}

// allowParentTags checks the parent a mlflow.parentRunId tag names.
func (s *Server) allowParentTags(r *http.Request, tags []wire.KV) error {
	for _, t := range tags {
		if t.Key == tracking.TagParentRunID {
			if err := s.allowRef(r, refParentRunTag, t.Value); err != nil {
				return err
			}
		}
	}
	return nil
}
