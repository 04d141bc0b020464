// Package httpapi serves Sextant's HTTP API: the MLflow tracking REST API
// and Sextant's own endpoints. It is the only package that imports
// net/http for serving, and errors.go is the only place that maps domain
// errors to MLflow error codes and HTTP statuses.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/goodput"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/wire"
	"github.com/sextant/sextant/internal/workspace"
)

// Options configure a Server.
type Options struct {
	// Tracking is the tracking service; required.
	Tracking *tracking.Service
	// Artifacts serves the artifact proxy; required.
	Artifacts *artifacts.Service
	// Workspace authenticates and authorizes requests and holds users,
	// folders and permissions; required.
	Workspace *workspace.Service
	// Files stores workspace files (/api/2.0/fs/files/Workspace/...);
	// required.
	Files blob.Store
	// Auth says whether requests must authenticate.
	Auth AuthMode
	// RunLogs serves run logs (/api/2.0/sextant/logs/...); nil leaves
	// those routes out.
	RunLogs *runlogs.Service
	// Version is reported by /version.
	Version string
	// MaxBodyBytes caps JSON request bodies; 0 means 16 MiB.
	MaxBodyBytes int64
	// Logger receives request logs; nil discards them.
	Logger *slog.Logger
	// GPU is the GPU monitoring service; nil leaves its routes out.
	GPU *gpu.Service
	// UI serves the web UI's assets and pages (internal/ui) for GET
	// requests outside the API; nil leaves the UI out.
	UI http.Handler
	// Volumes serves catalogs, schemas and volumes
	// (/api/2.1/unity-catalog/...) and the Files API under /Volumes; nil
	// leaves those routes out.
	Volumes *volumes.Service
	// Events keeps runs' events (/api/2.0/sextant/events/...); nil leaves
	// those routes out.
	Events *runevents.Service
	// GPUPeaks are the GPUs' peak TFLOPS for MFU (goodput.go); nil means
	// the built-in table.
	GPUPeaks *goodput.Peaks
	// GPUHours serves runs' GPU-hours and cost (gpuhours.go).
	GPUHours GPUHoursOptions
	// Metrics receives the request metrics (sextant_http_*); nil registers
	// none.
	Metrics prometheus.Registerer
	// Gatherer is served at GET /metrics; nil leaves the route out.
	Gatherer prometheus.Gatherer
	// Health reports whether the database can be written, for /health;
	// nil means it always can.
	Health func() StoreHealth
	// AllowedHosts decides which Host headers are answered (see
	// HostPolicy); nil answers any. cmd/sextant sets it.
	AllowedHosts *HostPolicy
	// BodyTimeout is how long a request body may take to deliver
	// BodyMinBytes before the server answers 408 and closes the
	// connection; 0 means DefaultBodyTimeout, negative turns the check
	// off.
	BodyTimeout time.Duration
	// BodyMinBytes is what a request body must deliver every BodyTimeout,
	// in bytes; 0 or less means DefaultBodyMinBytes.
	BodyMinBytes int64
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed for the client address of sign-in budgets (see
	// clientip.go); empty means the direct peer is the client.
	TrustedProxies []netip.Prefix
}

// StoreHealth is the database's state as /health shows it.
type StoreHealth struct {
	// Writable is false while writes fail for lack of space.
	Writable bool
	// Reason says why not, and what to do.
	Reason string
	// SinceMs is when Writable last changed, in Unix milliseconds.
	SinceMs int64
}

// Server is the HTTP API.
type Server struct {
	opts    Options
	tr      *tracking.Service
	art     *artifacts.Service
	ws      *workspace.Service
	files   *workspace.Files
	gpu     *gpu.Service
	owners  ownerCache
	log     *slog.Logger
	mux     *http.ServeMux
	routes  []route
	handler http.Handler
	metrics *httpMetrics
	hosts   *HostPolicy
	cop     *http.CrossOriginProtection
}

// Access is the permission a route needs. Every route declares one; a
// route registered without one makes New panic, so that no endpoint is open
// by oversight. A resource-scoped access names one of the permission
// policy's operations (workspace.Operation), and the level it needs is the
// policy's table's (internal/workspace/policy.go), not written here.
type Access int

// The access levels. Resource-scoped levels are checked against the
// experiment the request names (directly or through its run).
const (
	accessUndeclared Access = iota
	// Public routes need no credentials: health and version probes only.
	Public
	// Authenticated routes need a signed-in user and no resource grant
	// (creating an experiment, searching, which filters its results).
	Authenticated
	// ReadExperiment, EditExperiment and ManageExperiment need that grant on
	// the experiment the request refers to.
	ReadExperiment
	EditExperiment
	ManageExperiment
	// SignedCapability routes are authorised by a token the server signed
	// and handed out earlier (multipart part URLs), which the handler
	// checks; they need no session or credentials.
	SignedCapability
	// Assets routes serve the web UI's static files (internal/ui), which
	// hold no data; they need no credentials, so the login page loads.
	Assets
	// ReadVolume, WriteVolume and ManageVolume need CAN_READ, CAN_EDIT or
	// CAN_MANAGE on the catalog, schema or volume the request names; the
	// volumes service checks them (internal/volumes).
	ReadVolume
	WriteVolume
	ManageVolume
)

// String names the access level in errors and the route listing.
func (a Access) String() string {
	switch a {
	case Public:
		return "public"
	case Authenticated:
		return "authenticated"
	case ReadExperiment:
		return "CAN_READ"
	case EditExperiment:
		return "CAN_EDIT"
	case ManageExperiment:
		return "CAN_MANAGE"
	case SignedCapability:
		return "signed capability"
	case Assets:
		return "assets"
	case ReadVolume:
		return "CAN_READ (volume)"
	case WriteVolume:
		return "CAN_EDIT (volume)"
	case ManageVolume:
		return "CAN_MANAGE (volume)"
	}
	return "undeclared"
}

// handlerFunc is an API handler: it writes a success response itself and
// returns an error for everything else, which the server writes.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

type route struct {
	method string
	path   string
	access Access
	refs   []Ref
	h      handlerFunc
	// nodeReport marks the route node tokens may use (handleNodeReport).
	nodeReport bool
}

// Route describes a registered route, for listings and tests.
type Route struct {
	Method string
	Path   string
	Access Access
	// Refs are the references the route's requests may carry to objects
	// other than the one the route acts on.
	Refs []Ref
}

// RefKind says what kind of object a reference names, and so how the
// server resolves it to the experiment whose grants decide.
type RefKind int

// The reference kinds.
const (
	// RefRun is a run id; its experiment decides.
	RefRun RefKind = iota + 1
	// RefModel is a logged model id ("m-..."); its experiment decides.
	RefModel
	// RefExperiment is an experiment id.
	RefExperiment
	// RefFolder is a workspace path (an experiment's new name); the folder
	// that would hold it decides.
	RefFolder
	// RefRunURI is a runs:/<run id>/<path> URI; the run's experiment decides.
	RefRunURI
	// RefModelURI is a models:/<logged model id> URI; the model's
	// experiment decides.
	RefModelURI
	// RefArtifactURI is an mlflow-artifacts:/<experiment id>/... URI: a
	// place in this server's artifact store; the experiment decides.
	RefArtifactURI
)

// Ref declares a reference a route's request may carry to an object other
// than the one the route acts on: the logged model a metric is logged to,
// a run's parent, a model version's source, an experiment's new folder.
// The route's own level is checked on the object it acts on; a reference
// needs Need on the object it names, checked by the handler with allowRef.
// Every route declares its references in the route table (handle), and the
// permission matrix sends each one pointing at an object the caller may
// not use (internal/httpapi/authz_test.go).
type Ref struct {
	// Field is where the reference is in the request, as the matrix and
	// error messages name it: a body field ("model_id",
	// "metrics[].model_id"), a tag ("tags[mlflow.parentRunId]") or a query
	// parameter.
	Field string
	// Kind is what the reference names.
	Kind RefKind
	// Need is the level needed on the object named: CAN_READ to point at
	// something, CAN_EDIT to write into it.
	Need workspace.Level
	// Filtered marks a listing's selector (runs/search experiment_ids):
	// what the caller may not read is left out of the answer rather than
	// refused.
	Filtered bool
}

// New returns a Server with every route registered.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.BodyMinBytes <= 0 {
		opts.BodyMinBytes = DefaultBodyMinBytes
	}
	s := &Server{opts: opts, tr: opts.Tracking, art: opts.Artifacts, ws: opts.Workspace, gpu: opts.GPU, log: opts.Logger, mux: http.NewServeMux(),
		hosts: opts.AllowedHosts, cop: http.NewCrossOriginProtection()}
	if opts.Workspace != nil && opts.Files != nil {
		s.files = workspace.NewFiles(opts.Workspace, opts.Files)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.metrics = newHTTPMetrics(opts.Metrics)
	registerSignInMetrics(opts.Metrics, opts.Workspace)
	s.registerHealthRoutes()
	s.registerMetricsRoute()
	s.registerExperimentRoutes()
	s.registerRunRoutes()
	s.registerMetricRoutes()
	s.registerModelRoutes()
	s.registerRegistryRoutes()
	s.registerArtifactRoutes()
	s.registerLogRoutes()
	s.registerEventRoutes()
	s.registerProgressRoutes()
	s.registerGoodputRoutes()
	s.registerWorkspaceRoutes()
	s.registerGPURoutes()
	s.registerNodeRoutes()
	s.registerGPUHoursRoutes()
	s.registerUIRoutes()
	s.registerVolumeRoutes()
	s.registerNoRoute()
	s.handler = s.middleware(s.mux)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Routes lists the registered routes.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, rt := range s.routes {
		out[i] = Route{Method: rt.method, Path: rt.path, Access: rt.access, Refs: rt.refs}
	}
	return out
}

// handle registers h for method and path, with the references its
// requests may carry (see Ref). MLflow paths (starting with /mlflow/) are
// served under both /api/2.0 and /ajax-api/2.0, as the MLflow server does;
// other paths are registered as given.
func (s *Server) handle(method, path string, access Access, h handlerFunc, refs ...Ref) {
	if access == accessUndeclared {
		panic(fmt.Sprintf("httpapi: route %s %s declares no access level", method, path))
	}
	paths := []string{path}
	if strings.HasPrefix(path, "/mlflow/") {
		paths = []string{"/api/2.0" + path, "/ajax-api/2.0" + path}
	}
	for _, p := range paths {
		rt := route{method: method, path: p, access: access, refs: refs, h: h}
		s.routes = append(s.routes, rt)
		s.mux.Handle(method+" "+p, s.wrap(rt))
	}
}

// handleNodeReport registers the route that reports GPU samples: an
// Authenticated route which node tokens may use too (they may use no
// other; see workspace.CheckScope). The handler asks the policy who may
// report for the node (workspace.AuthorizeNodeReport).
func (s *Server) handleNodeReport(method, path string, h handlerFunc) {
	rt := route{method: method, path: path, access: Authenticated, h: h, nodeReport: true}
	s.routes = append(s.routes, rt)
	s.mux.Handle(method+" "+path, s.wrap(rt))
}

// wrap turns a route into an http.Handler: it authenticates the request
// (unless the route is public or signed), guards resource-scoped routes
// (see auth.go) and writes the handler's error.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch rt.access {
		case accessUndeclared:
			s.writeError(w, r, errs.E(errs.PermissionDenied, "route declares no access level"))
			return
		case Public, SignedCapability, Assets:
		default:
			sub, err := s.authenticate(r)
			if err == nil {
				// A node token reaches only the GPU samples route.
				err = workspace.CheckScope(sub, rt.nodeReport)
			}
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			ctx := context.WithValue(r.Context(), subjectKey, sub)
			if op := rt.access.operation(); op != 0 {
				g := &guard{op: op}
				ctx = context.WithValue(ctx, guardKey, g)
				w = &guardedWriter{ResponseWriter: w, g: g, s: s, r: r}
			}
			r = r.WithContext(ctx)
		}
		if err := rt.h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// writeJSON writes v as a 200 JSON response.
func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode response")
	}
	return writeRaw(w, b)
}

// writeRaw writes an encoded JSON body as a 200 response.
func writeRaw(w http.ResponseWriter, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

var emptyObject = []byte("{}")

// ---- middleware ----

type ctxKey int

const requestIDKey ctxKey = iota

// RequestIDFromContext returns the request id the middleware assigned.
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// statusWriter records the status for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom passes io.Copy through to the connection's ReadFrom, which
// sends a file with sendfile.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return io.Copy(w.ResponseWriter, r)
}

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := r.Header.Get("X-Request-Id")
		if rid == "" || len(rid) > 64 {
			rid = newRequestID()
		}
		w.Header().Set("X-Request-Id", rid)
		// No page of another site may frame any answer (clickjacking);
		// the UI's pages also say so in their Content-Security-Policy.
		w.Header().Set("X-Frame-Options", "DENY")
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))
		sw := &statusWriter{ResponseWriter: w}
		s.metrics.inFlight.Inc()
		defer func() {
			s.metrics.inFlight.Dec()
			// The mux set r.Pattern on the request it routed, this one;
			// it is empty when no route took the request.
			s.metrics.observe(methodLabel(r.Method), r.Pattern, sw.status, time.Since(start))
		}()
		// ServeMux answers unclean paths ("a//b", "a/../b") with a redirect
		// to the cleaned one, which a client following it would act on: a
		// DELETE could land on a parent. Refuse them instead.
		if p := r.URL.Path; p != path.Clean(p) && p != path.Clean(p)+"/" {
			s.writeError(sw, r, errs.Errorf(errs.Invalid, "Invalid path %q: request paths must not contain '//', '.' or '..' segments", errs.Truncate(p, 200)))
			return
		}
		if err := s.checkHost(r); err != nil {
			s.writeError(sw, r, err)
			return
		}
		if err := s.checkOrigin(r); err != nil {
			s.writeError(sw, r, err)
			return
		}
		r = s.paceBody(w, r)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "request_id", rid, "panic", v, "stack", string(debug.Stack()))
				if sw.status == 0 {
					s.writeError(sw, r, errs.Wrap(errs.Internal, fmt.Errorf("panic: %v", v), "internal error"))
				} else {
					// Headers are out: abort so the client cannot take a
					// truncated body for a success.
					panic(http.ErrAbortHandler)
				}
			}
			s.log.Debug("request", "request_id", rid, "method", r.Method, "path", r.URL.Path, "status", sw.status, "duration", time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}

// ---- health ----

// healthCheck answers /health: 200 while the server serves requests, also
// while its database is read-only for lack of space (reads still work, and
// a restart would not help: a probe that failed would take the server out
// of service or restart it for nothing). The body is "OK" as MLflow's, or
// "READ-ONLY: <reason>"; with Accept: application/json it is
// {"status": "OK" | "READ_ONLY", "database": {"writable", "reason",
// "since_ms"}}.
func (s *Server) healthCheck(w http.ResponseWriter, r *http.Request) error {
	h := StoreHealth{Writable: true}
	if s.opts.Health != nil {
		h = s.opts.Health()
	}
	status, text := "OK", "OK"
	if !h.Writable {
		status = "READ_ONLY"
		text = "READ-ONLY: " + h.Reason + "; reads work, writes answer 507 until space is freed"
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		return writeJSON(w, wire.Health{Status: status, Database: wire.DatabaseHealth{Writable: h.Writable, Reason: h.Reason, SinceMs: h.SinceMs}})
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(text))
	return nil
}

func (s *Server) registerHealthRoutes() {
	s.handle("GET", "/health", Public, s.healthCheck)
	s.handle("GET", "/version", Public, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(s.opts.Version))
		return nil
	})
	s.handle("GET", "/api/3.0/mlflow/server-info", Public, func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, map[string]any{"store_type": "SqlStore", "workspaces_enabled": false})
	})
}
