package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// Authentication and authorization at the edge.
//
// Every request to a non-public route is authenticated first: HTTP Basic
// (email and password, as the mlflow client sends MLFLOW_TRACKING_USERNAME
// and _PASSWORD), a bearer personal access token (MLFLOW_TRACKING_TOKEN),
// or a browser session cookie (which must also carry the session's CSRF
// token on every request that changes something). In single-user mode
// every request acts as the local administrator.
//
// Routes that act on an experiment, run, logged model, artifact or folder
// declare the operation they do (an Access; the level it needs is the
// permission policy's, internal/workspace/policy.go), and the handler
// names the resource with one of the allow* methods below once it knows
// it; services (volumes, workspace files) ask the same policy. A guard makes sure it did:
// a route that would answer success without a check answers 500 instead,
// so a forgotten check fails closed (and the route-matrix test catches it).

// AuthMode says whether requests must authenticate.
type AuthMode int

// The modes.
const (
	// AuthOff is single-user mode: every request is the local admin.
	AuthOff AuthMode = iota
	// AuthOn requires credentials on every non-public route.
	AuthOn
)

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "sextant_session"

// CSRFHeader carries a session's CSRF token.
const CSRFHeader = "X-Sextant-CSRF"

type authKey int

const (
	subjectKey authKey = iota
	guardKey
)

// guard records whether a resource-scoped route checked its resource:
// whether the policy allowed an operation needing at least the level of
// the route's own (op).
type guard struct {
	op      workspace.Operation
	checked bool
}

// SubjectFromContext returns the authenticated subject of a request.
func SubjectFromContext(ctx context.Context) *workspace.Subject {
	s, _ := ctx.Value(subjectKey).(*workspace.Subject)
	return s
}

// operation returns the policy's operation a route's access level names:
// the level it needs is the policy's (workspace.Operation.Level), and
// zero for routes that name no resource.
func (a Access) operation() workspace.Operation {
	switch a {
	case ReadExperiment:
		return workspace.OpReadExperiment
	case EditExperiment:
		return workspace.OpEditExperiment
	case ManageExperiment:
		return workspace.OpManageExperiment
	case ReadVolume:
		return workspace.OpReadSecurable
	case WriteVolume:
		return workspace.OpEditSecurable
	case ManageVolume:
		return workspace.OpManageSecurable
	}
	return 0
}

// authenticate returns the request's subject, or an Unauthenticated error.
func (s *Server) authenticate(r *http.Request) (*workspace.Subject, error) {
	if s.opts.Auth == AuthOff {
		return workspace.LocalAdmin(), nil
	}
	ctx := r.Context()
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		switch strings.ToLower(scheme) {
		case "basic":
			user, pass, ok := r.BasicAuth()
			if !ok {
				return nil, errs.E(errs.Unauthenticated, "malformed Basic credentials")
			}
			return s.ws.AuthenticateBasic(ctx, user, pass, s.clientIP(r))
		case "bearer":
			return s.ws.AuthenticateToken(ctx, strings.TrimSpace(cred))
		}
		return nil, errs.E(errs.Unauthenticated, "unsupported Authorization scheme: use Basic or Bearer")
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		sub, sess, err := s.ws.AuthenticateSession(ctx, c.Value)
		if err != nil {
			return nil, err
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := workspace.CheckCSRF(sess, r.Header.Get(CSRFHeader)); err != nil {
				return nil, err
			}
		}
		return sub, nil
	}
	return nil, errs.E(errs.Unauthenticated, "authentication required: set MLFLOW_TRACKING_TOKEN (or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD), or sign in")
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// guardedWriter refuses to send a success for a resource-scoped route
// whose handler never checked its resource: it sends a 500 instead.
type guardedWriter struct {
	http.ResponseWriter
	g       *guard
	s       *Server
	r       *http.Request
	started bool
	failed  bool
}

func (w *guardedWriter) WriteHeader(code int) {
	if w.failed || w.started {
		return
	}
	w.started = true
	if code < 300 && !w.g.checked {
		w.failed = true
		w.s.log.Error("route answered without checking its resource: refused", "method", w.r.Method, "path", w.r.URL.Path)
		w.s.writeError(w.ResponseWriter, w.r, errs.E(errs.Internal, "route did not check permissions"))
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *guardedWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *guardedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.failed {
		f.Flush()
	}
}

func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom keeps io.Copy of a file to the response on sendfile: without
// it io.Copy would move the file through a 32 KiB buffer.
func (w *guardedWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed {
		return io.Copy(io.Discard, r)
	}
	return io.Copy(w.ResponseWriter, r)
}

// checked marks the request's resource as checked.
func checked(r *http.Request) {
	if g, _ := r.Context().Value(guardKey).(*guard); g != nil {
		g.checked = true
	}
}

// routeOp is the operation the request's route declares (OpManageExperiment
// for callers outside a guarded route: they ask for the most).
func routeOp(r *http.Request) workspace.Operation {
	if g, _ := r.Context().Value(guardKey).(*guard); g != nil {
		return g.op
	}
	return workspace.OpManageExperiment
}

// authorize asks the policy whether the request's subject may do op to
// res, and marks the route checked when op needs at least the route's
// level.
func (s *Server) authorize(r *http.Request, op workspace.Operation, res workspace.Resource) error {
	if err := s.ws.Authorize(r.Context(), SubjectFromContext(r.Context()), op, res); err != nil {
		return err
	}
	if g, _ := r.Context().Value(guardKey).(*guard); g != nil && op.Level() >= g.op.Level() {
		g.checked = true
	}
	return nil
}

// allowExperiment checks the route's operation on an experiment.
func (s *Server) allowExperiment(r *http.Request, expID string) error {
	return s.allowExperimentOp(r, expID, routeOp(r))
}

// allowExperimentOp checks op on an experiment (for routes that need
// another operation than their own, or two).
func (s *Server) allowExperimentOp(r *http.Request, expID string, op workspace.Operation) error {
	return s.authorize(r, op, workspace.Resource{Kind: workspace.ResourceExperiment, Key: expID})
}

// allowExperimentID validates an experiment id's shape, then checks it.
func (s *Server) allowExperimentID(r *http.Request, expID string) error {
	if err := tracking.ValidateExperimentID(expID); err != nil {
		return err
	}
	return s.allowExperiment(r, expID)
}

// allowRunID validates a run id's shape, then checks its experiment.
func (s *Server) allowRunID(r *http.Request, runID string) error {
	if err := tracking.ValidateRunID(runID); err != nil {
		return err
	}
	return s.allowRun(r, runID)
}

// allowRun checks the route's operation on a run's experiment. A run the
// subject may not read answers as a missing run.
func (s *Server) allowRun(r *http.Request, runID string) error {
	exp, err := s.runExperiment(r.Context(), runID)
	if err != nil {
		return err
	}
	return workspace.AsMissing(s.allowExperiment(r, exp), tracking.RunNotFound(runID))
}

// allowModel checks the route's operation on a logged model's experiment.
// A model the subject may not read answers as a missing model.
func (s *Server) allowModel(r *http.Request, modelID string) error {
	exp, err := s.modelExperiment(r.Context(), modelID)
	if err != nil {
		return err
	}
	return workspace.AsMissing(s.allowExperiment(r, exp), tracking.LoggedModelNotFound(modelID))
}

// allowArtifactPath checks the route's operation on the experiment an
// artifact path belongs to (its first segment). Paths outside any
// experiment are the administrators' (OpReachArtifactStore).
func (s *Server) allowArtifactPath(r *http.Request, p string) error {
	exp := artifacts.ExperimentOf(p)
	if exp == "" {
		if err := s.ws.Authorize(r.Context(), SubjectFromContext(r.Context()), workspace.OpReachArtifactStore, workspace.Resource{}); err != nil {
			return err
		}
		checked(r)
		return nil
	}
	return s.allowExperiment(r, exp)
}

// ---- run and model -> experiment, cached ----

// ownerCache maps run and model ids to their experiments. A run or model
// never changes experiment, so entries never go stale; the map is bounded
// by dropping everything when full.
type ownerCache struct {
	mu sync.Mutex
	m  map[string]string
}

const ownerCacheMax = 200_000

func (c *ownerCache) get(k string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *ownerCache) put(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= ownerCacheMax {
		c.m = make(map[string]string)
	}
	c.m[k] = v
}

func (s *Server) runExperiment(ctx context.Context, runID string) (string, error) {
	if e, ok := s.owners.get("r:" + runID); ok {
		return e, nil
	}
	e, err := s.tr.RunExperimentID(ctx, runID)
	if err != nil {
		return "", err
	}
	s.owners.put("r:"+runID, e)
	return e, nil
}

func (s *Server) modelExperiment(ctx context.Context, modelID string) (string, error) {
	if e, ok := s.owners.get("m:" + modelID); ok {
		return e, nil
	}
	m, err := s.tr.GetLoggedModel(ctx, modelID, true)
	if err != nil {
		return "", err
	}
	s.owners.put("m:"+modelID, m.ExperimentID)
	return m.ExperimentID, nil
}

// readableExperiments keeps the ids the subject can read.
func (s *Server) readableExperiments(ctx context.Context, ids []string) []string {
	sub := SubjectFromContext(ctx)
	out := ids[:0:0]
	for _, id := range ids {
		if s.ws.Authorize(ctx, sub, workspace.OpReadExperiment, workspace.Resource{Kind: workspace.ResourceExperiment, Key: id}) == nil {
			out = append(out, id)
		}
	}
	return out
}

// multiUser reports whether users and workspace paths are in force.
func (s *Server) multiUser() bool { return s.opts.Auth == AuthOn }

// cookieFor builds the session cookie.
func cookieFor(r *http.Request, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	}
}
