package httpapi

import (
	"net/http"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
	"github.com/sextant/sextant/internal/workspace"
)

// GPU monitoring: agents post samples, the pane reads the latest sample
// of each node and downsampled history (docs/gpu.md).
//
// Access: every route needs an authenticated caller. Posting is the
// policy's (workspace.AuthorizeNodeReport): a node's samples come from a
// node token for it (the agent's); a user's samples must name a run they
// may edit (CAN_EDIT: sextant run's samples become the run's system
// metrics) and are the node's too only while no node token names the
// node. Reading a run's samples needs CAN_READ on the run's experiment; a
// run id that names no run guards nothing. Node-wide reads show the run
// id of a sample only to callers who may read that run.

// gpuPrefix is where the GPU routes live.
const gpuPrefix = "/api/2.0/sextant/gpu"

func (s *Server) registerGPURoutes() {
	if s.gpu == nil {
		return
	}
	s.handleNodeReport("POST", gpuPrefix+"/samples", s.ingestGPUSamples)
	s.handle("GET", gpuPrefix+"/latest", Authenticated, s.latestGPUSamples)
	s.handle("GET", gpuPrefix+"/series", Authenticated, s.gpuSeries)
}

func (s *Server) ingestGPUSamples(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	b, err := wire.DecodeGPUBatch(body)
	if err != nil {
		return err
	}
	if err := gpu.ValidateNode(b.Node); err != nil {
		return err
	}
	// Who may report for the node (node tokens, users' runs), and whether
	// the samples are the node's or only the run's: the policy's.
	report, err := s.ws.AuthorizeNodeReport(r.Context(), SubjectFromContext(r.Context()), b.Node, b.RunID != "")
	if err != nil {
		return err
	}
	b.RunOnly = report == workspace.ReportRunOnly
	if b.RunID != "" {
		if err := s.allowGPURun(r, b.RunID, workspace.CanEdit); err != nil {
			return err
		}
		// A user reports for a node through a run they may edit: a run
		// that does not exist (yet) edits nothing, so its samples are taken
		// for the run only and never stand as the node's.
		if !SubjectFromContext(r.Context()).IsActiveAdmin() {
			if _, err := s.runExperiment(r.Context(), b.RunID); errs.Is(err, errs.NotFound) {
				b.RunOnly = true
			} else if err != nil {
				return err
			}
		}
	}
	res, err := s.gpu.Ingest(r.Context(), b)
	if err != nil {
		return err
	}
	return writeRaw(w, wire.AppendGPUResult(nil, res))
}

// allowGPURun checks a level on a run's experiment. A run that does not
// exist protects nothing: samples may name it, and its system metrics then
// fail on their own with a message in the answer.
func (s *Server) allowGPURun(r *http.Request, runID string, l workspace.Level) error {
	if err := tracking.ValidateRunID(runID); err != nil {
		return err
	}
	exp, err := s.runExperiment(r.Context(), runID)
	switch {
	case errs.Is(err, errs.NotFound):
		return nil
	case err != nil:
		return err
	}
	return workspace.AsMissing(s.allowExperimentOp(r, exp, workspace.OperationFor(l)), tracking.RunNotFound(runID))
}

// readableRuns hides, in place, the run ids the caller may not read.
func (s *Server) readableRuns(r *http.Request, runIDs []*string) {
	ok := map[string]bool{}
	for _, id := range runIDs {
		if *id == "" {
			continue
		}
		allowed, seen := ok[*id]
		if !seen {
			allowed = s.allowGPURun(r, *id, workspace.CanRead) == nil
			ok[*id] = allowed
		}
		if !allowed {
			*id = ""
		}
	}
}

func (s *Server) gpuSelection(r *http.Request, q query) (gpu.Selection, error) {
	sel := gpu.Selection{RunID: q.str("run_id")}
	for _, n := range q.list("node") {
		for part := range strings.SplitSeq(n, ",") {
			if part = strings.TrimSpace(part); part != "" {
				sel.Nodes = append(sel.Nodes, part)
			}
		}
	}
	if sel.RunID != "" {
		if err := s.allowGPURun(r, sel.RunID, workspace.CanRead); err != nil {
			return sel, err
		}
	}
	return sel, nil
}

func (s *Server) latestGPUSamples(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "node", "run_id")
	if err != nil {
		return err
	}
	sel, err := s.gpuSelection(r, q)
	if err != nil {
		return err
	}
	nodes, err := s.gpu.Latest(r.Context(), sel)
	if err != nil {
		return err
	}
	if sel.RunID == "" {
		ids := make([]*string, len(nodes))
		for i := range nodes {
			ids[i] = &nodes[i].RunID
		}
		s.readableRuns(r, ids)
	}
	return writeRaw(w, wire.AppendGPULatest(nil, nodes))
}

// defaultGPUPoints is the number of points of a series when the request
// gives none: the pane's two hours at 20 s.
const defaultGPUPoints = 360

func (s *Server) gpuSeries(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "node", "run_id", "from_ms", "to_ms", "points", "fields", "agg")
	if err != nil {
		return err
	}
	sel, err := s.gpuSelection(r, q)
	if err != nil {
		return err
	}
	sq := gpu.SeriesQuery{Selection: sel, Points: defaultGPUPoints}
	if sq.FromMs, _, err = q.int("from_ms"); err != nil {
		return err
	}
	if sq.ToMs, _, err = q.int("to_ms"); err != nil {
		return err
	}
	if p, set, err := q.int("points"); err != nil {
		return err
	} else if set {
		if p < 0 || p > 1<<30 {
			return invalid("points must be between 0 (every sample) and %d, got %d", 1<<30, p)
		}
		sq.Points = int(p)
	}
	for _, list := range q.list("fields") {
		for name := range strings.SplitSeq(list, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			f, ok := gpu.ParseField(name)
			if !ok {
				return invalid("unknown field '%s' in fields: use %s", errs.Truncate(name, 60), strings.Join(gpu.FieldNames(), ", "))
			}
			sq.Fields = append(sq.Fields, f)
		}
	}
	agg, ok := gpu.ParseAgg(q.str("agg"))
	if !ok {
		return invalid("unknown agg '%s': use avg, min, max or minavgmax", errs.Truncate(q.str("agg"), 60))
	}
	sq.Agg = agg
	res, err := s.gpu.Series(r.Context(), sq)
	if err != nil {
		return err
	}
	if sel.RunID == "" {
		ids := make([]*string, len(res.GPUs))
		for i := range res.GPUs {
			ids[i] = &res.GPUs[i].RunID
		}
		s.readableRuns(r, ids)
	}
	return writeRaw(w, wire.AppendGPUSeries(make([]byte, 0, seriesSizeHint(res)), res))
}

// seriesSizeHint estimates the encoded size of a series response, so the
// buffer of a large one is allocated once instead of doubled up to it.
func seriesSizeHint(res *gpu.SeriesResult) int {
	per := 24 // [1796215660000,96.5],
	if res.BucketMs > 0 && res.Agg == gpu.AggMinAvgMax {
		per = 40
	}
	n := 256
	for i := range res.GPUs {
		n += 256
		for _, pts := range res.GPUs[i].Series {
			n += 16 + per*len(pts)
		}
	}
	return n
}
