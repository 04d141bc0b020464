package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// Requests for API paths that no route takes get a JSON error body, as
// every other API error does, instead of the mux's plain text: clients
// (the Databricks SDK probing /api/2.0/fs/endpoints, an mlflow client newer
// than the server) parse it and fall back cleanly. A path served for other
// methods answers 405 with Allow, any other path 404, both with
// ENDPOINT_NOT_FOUND.
// These catch-alls hold no data and check no credentials, so they are not
// routes of the permission table.

var (
	// /graphql is MLflow's GraphQL endpoint (its UI's), an exact path.
	noRouteRoots = []string{"/api/", "/ajax-api/", "/.well-known/", "/graphql"}
	// The methods a catch-all is registered for. GET covers HEAD; a HEAD
	// pattern of its own would conflict with the GET routes below it.
	noRouteMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
)

func (s *Server) registerNoRoute() {
	for _, root := range noRouteRoots {
		for _, m := range noRouteMethods {
			s.mux.Handle(m+" "+root, http.HandlerFunc(s.noRoute))
		}
	}
}

func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range append(noRouteMethods, "HEAD") {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && !isNoRoutePattern(pattern) {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		s.writeError(w, r, &routeError{http.StatusNotFound, fmt.Sprintf("No API found for %s %s", r.Method, errs.Truncate(r.URL.Path, 200))})
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.writeError(w, r, &routeError{http.StatusMethodNotAllowed, fmt.Sprintf("%s %s is not served: this path takes %s", r.Method, errs.Truncate(r.URL.Path, 200), strings.Join(allow, ", "))})
}

// routeError is a request that no route takes (404), or that routes take
// only with other methods (405).
type routeError struct {
	status int
	msg    string
}

func (e *routeError) Error() string { return e.msg }

// isNoRoutePattern reports whether pattern is one of the catch-alls, or the
// web UI's fallback ("GET /"), which never serves an API path.
func isNoRoutePattern(pattern string) bool {
	if pattern == "GET /" {
		return true
	}
	_, path, _ := strings.Cut(pattern, " ")
	for _, root := range noRouteRoots {
		if path == root {
			return true
		}
	}
	return false
}
