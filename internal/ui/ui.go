// Package ui serves Sextant's web UI: the HTML, JavaScript and CSS built
// from web/ (TypeScript) by esbuild and committed in dist/, embedded in
// the binary so that `go run` and `go install` need no Node.js.
//
// The assets hold no data: every page fetches what it shows from the HTTP
// API with the browser's session cookie. Asset names carry a content hash
// (app-3F2A9C1B.js), so they are cached for a year; index.html is never
// cached and is served for the paths of the UI's pages (Pages); any other
// path, /api/ and /ajax-api/ included, is a plain 404.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// ContentSecurityPolicy is sent with every UI response. Scripts and styles
// come only from the server itself (no inline script, no eval); images may
// also be blob: URLs (artifact previews) and data: URLs (uPlot's legend
// markers); the UI cannot be framed.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file, with its gzip encoding when that is smaller.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
	immutable   bool
}

// Handler serves the embedded UI.
type Handler struct {
	assets map[string]*asset // by path below dist, e.g. "assets/app-X.js"
	index  *asset
}

// New returns a Handler over the embedded build. It compresses the assets
// once, here, rather than on every request.
func New() (*Handler, error) {
	return newHandler(dist)
}

// MustNew is New for main: it panics if the embedded build is broken,
// which a test catches long before.
func MustNew() *Handler {
	h, err := New()
	if err != nil {
		panic(err)
	}
	return h
}

func newHandler(fsys fs.FS) (*Handler, error) {
	root, err := fs.Sub(fsys, "dist")
	if err != nil {
		return nil, err
	}
	h := &Handler{assets: map[string]*asset{}}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &asset{
			body:        body,
			contentType: contentType(p),
			etag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
			immutable:   strings.HasPrefix(p, "assets/"),
		}
		if compressible(a.contentType) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			_, _ = zw.Write(body)
			_ = zw.Close()
			if buf.Len() < len(body) {
				a.gz = buf.Bytes()
			}
		}
		h.assets[p] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.index = h.assets["index.html"]
	if h.index == nil {
		return nil, fs.ErrNotExist
	}
	return h, nil
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".map", ".json":
		return "application/json"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(ct string) bool {
	return strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "image/svg")
}

// Pages returns the paths of the UI's pages, as web/src/main.ts registers
// them with route(): ":name" stands for one path segment and a final "*"
// for the rest of the path, and a trailing slash is allowed, as in
// web/src/router.ts. index.html answers these paths only
// (TestPagesMatchTheApp keeps the two lists in step). The slice is the
// caller's.
func Pages() []string { return slices.Clone(pages) }

var pages = []string{
	"/login",
	"/",
	"/workspace/*",
	"/experiments/:id",
	"/experiments/:exp/models",
	"/experiments/:exp/models/:model",
	"/runs/:id",
	"/compare",
	"/models",
	"/models/:name",
	"/models/:name/versions/:version",
	"/gpu",
	"/gpu/node/:name",
	"/volumes",
	"/volumes/*",
}

// IsPage reports whether p is the path of one of the UI's pages (Pages).
func IsPage(p string) bool {
	for _, pattern := range pages {
		if matchPage(pattern, p) {
			return true
		}
	}
	return false
}

// matchPage matches p against one pattern of Pages, as the router's
// regular expression does.
func matchPage(pattern, p string) bool {
	if rest, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(p, rest)
	}
	if p != "/" {
		p = strings.TrimSuffix(p, "/")
	}
	ps, ws := strings.Split(pattern, "/"), strings.Split(p, "/")
	if len(ps) != len(ws) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], ":") {
			if ws[i] == "" {
				return false
			}
		} else if ps[i] != ws[i] {
			return false
		}
	}
	return true
}

// IsAPIPath reports whether p belongs to the HTTP API, for which the UI
// never answers.
func IsAPIPath(p string) bool {
	return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/ajax-api/") || p == "/api" || p == "/ajax-api"
}

// ServeHTTP serves /assets/<name> from the build and index.html for the
// paths of the UI's pages (Pages); anything else is a 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	if IsAPIPath(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var a *asset
	if name, ok := strings.CutPrefix(r.URL.Path, "/assets/"); ok {
		a = h.assets["assets/"+name]
		if a == nil {
			// A stale page asking for an asset of an older build: a 404,
			// not index.html, so that the browser does not run HTML as JS.
			http.NotFound(w, r)
			return
		}
	} else if IsPage(r.URL.Path) {
		a = h.index
	} else {
		// Not a page of the UI: a plain 404, so that a probe (/metrics
		// without its route, /favicon.ico, a typo in a script) is not
		// answered with a page that looks like success.
		http.NotFound(w, r)
		return
	}
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Content-Type", a.contentType)
	hd.Set("ETag", a.etag)
	hd.Set("Vary", "Accept-Encoding")
	if a.immutable {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		switch strings.ReplaceAll(params, " ", "") {
		case "q=0", "q=0.0", "q=0.00", "q=0.000":
			return false
		}
		return true
	}
	return false
}

// Sizes returns the bytes the browser downloads for the build's assets
// (gzipped where the server gzips them), by asset path; the UI tests and
// the benchmark check their total.
func (h *Handler) Sizes() map[string]int {
	out := map[string]int{}
	for p, a := range h.assets {
		n := len(a.body)
		if a.gz != nil {
			n = len(a.gz)
		}
		out[p] = n
	}
	return out
}
