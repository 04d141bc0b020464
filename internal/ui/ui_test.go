package ui_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/ui"
)

func serve(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestEmbeddedBuild checks that index.html names assets that are in the
// build: a stale or partial commit of internal/ui/dist fails here.
func TestEmbeddedBuild(t *testing.T) {
	h := ui.MustNew()
	index := serve(t, h, "GET", "/", nil).Body.String()
	refs := regexp.MustCompile(`(?:src|href)="/(assets/[^"]+)"`).FindAllStringSubmatch(index, -1)
	if len(refs) < 2 {
		t.Fatalf("index.html references %d assets: %s", len(refs), index)
	}
	sizes := h.Sizes()
	total := 0
	for _, m := range refs {
		n, ok := sizes[m[1]]
		if !ok {
			t.Fatalf("index.html references %s, which is not in the build", m[1])
		}
		total += n
	}
	// The budget: JavaScript and CSS shipped, gzipped, under 300 KB.
	if total > 300<<10 {
		t.Fatalf("the UI ships %d bytes gzipped, over 300 KiB", total)
	}
	if strings.Contains(index, "<script>") {
		t.Fatal("index.html has an inline script, which the CSP refuses")
	}
}

func TestServe(t *testing.T) {
	h := ui.MustNew()
	index := serve(t, h, "GET", "/runs/x", nil)
	if index.Code != 200 || index.Header().Get("Cache-Control") != "no-cache" || index.Header().Get("Content-Security-Policy") != ui.ContentSecurityPolicy {
		t.Fatalf("index: %d %v", index.Code, index.Header())
	}
	asset := regexp.MustCompile(`src="(/assets/[^"]+)"`).FindStringSubmatch(index.Body.String())[1]
	tests := map[string]struct {
		method, target string
		hdr            map[string]string
		status         int
		check          func(t *testing.T, rec *httptest.ResponseRecorder)
	}{
		"AssetGzip": {"GET", asset, map[string]string{"Accept-Encoding": "br, gzip"}, 200, func(t *testing.T, rec *httptest.ResponseRecorder) {
			if rec.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
				t.Fatalf("headers: %v", rec.Header())
			}
			zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(zr); len(b) < 1000 {
				t.Fatalf("decompressed asset is %d bytes", len(b))
			}
		}},
		"AssetPlain": {"GET", asset, map[string]string{"Accept-Encoding": "gzip;q=0"}, 200, func(t *testing.T, rec *httptest.ResponseRecorder) {
			if rec.Header().Get("Content-Encoding") != "" || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/javascript") {
				t.Fatalf("headers: %v", rec.Header())
			}
		}},
		"Head":             {"HEAD", "/", nil, 200, func(t *testing.T, rec *httptest.ResponseRecorder) { assertEmpty(t, rec) }},
		"NotModified":      {"GET", "/", map[string]string{"If-None-Match": index.Header().Get("ETag")}, 304, nil},
		"MissingAsset":     {"GET", "/assets/app-NOPE.js", nil, 404, nil},
		"APIPath":          {"GET", "/api/2.0/mlflow/nope", nil, 404, nil},
		"AjaxAPIPath":      {"GET", "/ajax-api/2.0/mlflow/nope", nil, 404, nil},
		"MethodNotAllowed": {"POST", "/", nil, 405, nil},
		"Page":             {"GET", "/experiments/12", nil, 200, nil},
		"PageSlash":        {"GET", "/volumes/", nil, 200, nil},
		"PageDeep":         {"GET", "/workspace/Users/a@example.com/proj", nil, 200, nil},
		"NotAPage":         {"GET", "/metrics", nil, 404, nil},
		"Favicon":          {"GET", "/favicon.ico", nil, 404, nil},
		"IndexFile":        {"GET", "/index.html", nil, 404, nil},
		"PageTooDeep":      {"GET", "/runs/abc/extra", nil, 404, nil},
		"HeadNotAPage":     {"HEAD", "/nope", nil, 404, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := serve(t, h, tc.method, tc.target, tc.hdr)
			if rec.Code != tc.status {
				t.Fatalf("%s %s: %d, want %d", tc.method, tc.target, rec.Code, tc.status)
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("no X-Content-Type-Options: nosniff")
			}
			if tc.check != nil {
				tc.check(t, rec)
			}
		})
	}
}

func assertEmpty(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Body.Len() != 0 {
		t.Fatalf("HEAD answered a body of %d bytes", rec.Body.Len())
	}
}

// TestPagesMatchTheApp: ui.Pages() lists exactly the routes that the app
// registers in web/src/main.ts, so that every page the router shows can be
// reloaded and no other path answers HTML.
func TestPagesMatchTheApp(t *testing.T) {
	src, err := os.ReadFile("../../web/src/main.ts")
	if err != nil {
		t.Fatal(err)
	}
	var app []string
	for _, m := range regexp.MustCompile(`(?m)^route\('([^']+)'`).FindAllStringSubmatch(string(src), -1) {
		app = append(app, m[1])
	}
	if len(app) == 0 {
		t.Fatal("found no route('...') call in web/src/main.ts")
	}
	if pages := ui.Pages(); !slices.Equal(app, pages) {
		t.Fatalf("web/src/main.ts registers %q, ui.Pages lists %q: update ui.Pages", app, pages)
	}
}

// TestPagesIsTheCallers: a caller that changes the slice Pages returned
// changes neither the next caller's nor which paths are pages.
func TestPagesIsTheCallers(t *testing.T) {
	p := ui.Pages()
	want := slices.Clone(p)
	for i := range p {
		p[i] = "/changed"
	}
	if got := ui.Pages(); !slices.Equal(got, want) {
		t.Fatalf("Pages() after a caller changed its slice: %q, want %q", got, want)
	}
	if !ui.IsPage("/runs/abc") || ui.IsPage("/changed") {
		t.Fatal("IsPage follows a caller's change to the slice Pages returned")
	}
}

func TestIsPage(t *testing.T) {
	f := func(p string, want bool) {
		t.Helper()
		if got := ui.IsPage(p); got != want {
			t.Errorf("IsPage(%q) = %v, want %v", p, got, want)
		}
	}
	f("/", true)
	f("/login", true)
	f("/login/", true)
	f("/runs/abc", true)
	f("/runs/abc/", true)
	f("/runs/", false)
	f("/runs", false)
	f("/runs/a/b", false)
	f("/workspace/", true)
	f("/workspace/Shared/x", true)
	f("/workspace", false)
	f("/volumes", true)
	f("/volumes/main/vision", true)
	f("/gpu", true)
	f("/gpu/node/gpu-07", true)
	f("/gpu/node/", false)
	f("/gpux", false)
	f("/metrics", false)
}
