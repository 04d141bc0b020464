package httpapi

import "net/http"

// The web UI's routes: the embedded assets (internal/ui) and index.html
// for every client-side route. They are declared Assets: static files that
// hold no data, served without credentials, so that the login page can
// load; every request for data goes through the API with the session
// cookie. The UI handler never answers for /api/ or /ajax-api/ paths, so
// an unknown API route stays a plain 404.

func (s *Server) registerUIRoutes() {
	if s.opts.UI == nil {
		return
	}
	serve := func(w http.ResponseWriter, r *http.Request) error {
		s.opts.UI.ServeHTTP(w, r)
		return nil
	}
	s.handle("GET", "/assets/{path...}", Assets, serve)
	// "/" matches every GET path no other route takes: the SPA fallback.
	s.handle("GET", "/", Assets, serve)
}
