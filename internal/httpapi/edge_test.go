package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/httpapi"
)

// gathered returns the value of the unlabelled counter or gauge name in
// reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func TestHostPolicy(t *testing.T) {
	p, err := httpapi.NewHostPolicy([]string{"mlflow.example.com", "*.corp.example", "gpu-box:8443"})
	if err != nil {
		t.Fatal(err)
	}
	def, _ := httpapi.NewHostPolicy(nil)
	for _, c := range []struct {
		host      string
		def, conf bool
	}{
		{"localhost", true, true},
		{"localhost:5000", true, true},
		{"LOCALHOST:5000", true, true},
		{"app.localhost:5000", true, true},
		{"127.0.0.1:5000", true, true},
		{"10.1.2.3", true, true},
		{"[::1]:5000", true, true},
		{"rebind.evil.example:5000", false, false},
		{"localhost.evil.example", false, false},
		{"mlflow.example.com", false, true},
		{"mlflow.example.com:443", false, true},
		{"MLflow.Example.com.", false, true},
		{"evilmlflow.example.com", false, false},
		{"a.corp.example:5000", false, true},
		{"corp.example", false, false},
		{"xcorp.example", false, false},
		{"gpu-box:8443", false, true},
		{"gpu-box:5000", false, false},
		{"", true, true}, // HTTP/1.0, no browser
	} {
		if got := def.Allows(c.host); got != c.def {
			t.Errorf("default policy, Host %q: %v, want %v", c.host, got, c.def)
		}
		if got := p.Allows(c.host); got != c.conf {
			t.Errorf("configured policy, Host %q: %v, want %v", c.host, got, c.conf)
		}
	}
	if !httpapi.AnyHost().Allows("rebind.evil.example") {
		t.Error("AnyHost refused a host")
	}
	if star, _ := httpapi.NewHostPolicy([]string{"*"}); !star.Allows("anything.example") {
		t.Error(`"*" refused a host`)
	}
	for _, bad := range []string{"http://mlflow.example.com", "mlflow.*.com", "*example.com", "a/b"} {
		if _, err := httpapi.NewHostPolicy([]string{bad}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

// TestHostAndOrigin is the default single-user server on loopback against
// a web page: a rebinding Host is refused (naming the flag), a page of
// another site cannot write, a body without a JSON type is refused, and
// the server's own pages and non-browser clients pass.
func TestHostAndOrigin(t *testing.T) {
	def, _ := httpapi.NewHostPolicy(nil)
	s, _ := mustServerWith(t, func(o *httpapi.Options) { o.AllowedHosts = def })
	send := func(method, host, body string, hdr map[string]string) response {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, "http://"+host+"/api/2.0/mlflow/experiments/"+map[string]string{"GET": "search?max_results=1", "POST": "create"}[method], rd)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
		_ = json.Unmarshal(rec.Body.Bytes(), &res.body)
		return res
	}
	jsonType := map[string]string{"Content-Type": "application/json"}

	r := send("GET", "rebind.evil.example:5000", "", nil)
	if r.status != 403 || r.body["error_code"] != "PERMISSION_DENIED" || !strings.Contains(r.raw, "--allowed-hosts rebind.evil.example") {
		t.Errorf("rebinding Host: %d %s", r.status, r.raw)
	}
	if r := send("GET", "localhost:5000", "", nil); r.status != 200 {
		t.Errorf("Host localhost: %d %s", r.status, r.raw)
	}

	for name, hdr := range map[string]map[string]string{
		"Origin":         {"Origin": "http://evil.example"},
		"Sec-Fetch-Site": {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"},
		"same-site page": {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:5001"},
	} {
		for _, ct := range []string{"", "text/plain", "application/json"} {
			h := map[string]string{"Content-Type": ct}
			for k, v := range hdr {
				h[k] = v
			}
			if r := send("POST", "127.0.0.1:5000", `{"name": "/Shared/evil"}`, h); r.status != 403 || !strings.Contains(r.raw, "cross-origin") {
				t.Errorf("cross-site POST (%s, Content-Type %q): %d %s", name, ct, r.status, r.raw)
			}
		}
	}
	if r := send("POST", "127.0.0.1:5000", `{"name": "/Shared/untyped"}`, nil); r.status != 400 || !strings.Contains(r.raw, "Content-Type must be application/json") {
		t.Errorf("a body without Content-Type: %d %s", r.status, r.raw)
	}
	ok := map[string]map[string]string{
		"no browser headers": jsonType,
		"charset":            {"Content-Type": "application/json; charset=utf-8"},
		"the server's page":  {"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:5000"},
		"same Origin only":   {"Content-Type": "application/json", "Origin": "http://127.0.0.1:5000"},
	}
	i := 0
	for name, hdr := range ok {
		i++
		if r := send("POST", "127.0.0.1:5000", fmt.Sprintf(`{"name": "/Shared/ok%d"}`, i), hdr); r.status != 200 {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	// An empty body needs no type (the mlflow client sends none with no body).
	req := httptest.NewRequest("POST", "http://127.0.0.1:5000/api/2.0/sextant/auth/logout", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Errorf("body-less POST: %d %s, X-Frame-Options %q", rec.Code, rec.Body, rec.Header().Get("X-Frame-Options"))
	}
}

// TestNoBasicChallengeForNavigation: a browser that opens an API URL gets
// the 401 without the challenge that would raise its sign-in dialog; the
// mlflow client still gets it.
func TestNoBasicChallengeForNavigation(t *testing.T) {
	s, _ := mustServerWith(t, func(o *httpapi.Options) { o.Auth = httpapi.AuthOn })
	for _, c := range []struct {
		hdr       map[string]string
		challenge bool
	}{
		{nil, true},
		{map[string]string{"Accept": "*/*"}, true},
		{map[string]string{"Sec-Fetch-Mode": "navigate", "Accept": "text/html,application/xhtml+xml"}, false},
		{map[string]string{"Accept": "text/html,application/xhtml+xml"}, false},
		{map[string]string{"Sec-Fetch-Mode": "cors"}, true},
	} {
		req := httptest.NewRequest("GET", "/api/2.0/mlflow/experiments/search?max_results=1", nil)
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if got := rec.Header().Get("WWW-Authenticate") != ""; rec.Code != 401 || got != c.challenge {
			t.Errorf("%v: %d, challenge %v, want 401, %v", c.hdr, rec.Code, got, c.challenge)
		}
	}
}

func TestLoginBodyCapped(t *testing.T) {
	s, _ := mustServerWith(t, func(o *httpapi.Options) { o.Auth = httpapi.AuthOn })
	body := fmt.Sprintf(`{"email": "a@example.com", "password": %q}`, strings.Repeat("x", httpapi.LoginMaxBodyBytes))
	if r := do(t, s, "POST", "/api/2.0/sextant/auth/login", body); r.status != 413 || !strings.Contains(r.raw, "4096 bytes") {
		t.Fatalf("a %d-byte sign-in: %d %s", len(body), r.status, r.raw)
	}
	// Declared over the cap: refused before it is read.
	req := httptest.NewRequest("POST", "/api/2.0/sextant/auth/login", strings.NewReader("{}"))
	req.ContentLength = 10_000_000
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 413 {
		t.Fatalf("a sign-in declaring 10 MB: %d %s", rec.Code, rec.Body)
	}
	if r := do(t, s, "POST", "/api/2.0/sextant/auth/login", `{"email": "a@example.com", "password": "wrong"}`); r.status != 401 {
		t.Fatalf("a sign-in of normal size: %d %s", r.status, r.raw)
	}
}

// serve runs s on a loopback listener (through httpapi.Listener) and
// returns its address.
func serve(t *testing.T, h http.Handler, lo httpapi.ListenerOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(httpapi.Listener(ln, lo))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestSlowBodyAnswered408: a body that stops arriving is answered 408 and
// its connection closed once BodyTimeout passes without BodyMinBytes,
// while a body that keeps moving, however long it takes in all, goes
// through.
func TestSlowBodyAnswered408(t *testing.T) {
	s, _ := mustServerWith(t, func(o *httpapi.Options) { o.BodyTimeout = 300 * time.Millisecond; o.BodyMinBytes = 8 })
	addr := serve(t, s, httpapi.ListenerOptions{})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /api/2.0/mlflow/experiments/create HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body) // to the close
	if resp.StatusCode != 408 || !strings.Contains(string(b), "--body-timeout") || !resp.Close {
		t.Fatalf("stalled body: %d close=%v %s", resp.StatusCode, resp.Close, b)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stalled body answered after %s", d)
	}

	// 8 bytes every 100 ms for 1.2 s: four times the timeout in all, but
	// never a timeout without progress.
	name := `{"name": "/Shared/slow-but-steady` + strings.Repeat(" ", 64) + `"}`
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "POST /api/2.0/mlflow/experiments/create HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, len(name))
	for i := 0; i < len(name); i += 8 {
		time.Sleep(100 * time.Millisecond)
		if _, err := c2.Write([]byte(name[i:min(i+8, len(name))])); err != nil {
			t.Fatal(err)
		}
	}
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("steady slow body: %d %s", resp.StatusCode, b)
	}
}

// TestDeclaredLengthReservesNothing: connections that declare 10 MB and
// send one byte hold no more than a few KB each, not a buffer sized from
// the declared length.
func TestDeclaredLengthReservesNothing(t *testing.T) {
	s, _ := mustServerWith(t, func(o *httpapi.Options) { o.MaxBodyBytes = 16 << 20 })
	addr := serve(t, s, httpapi.ListenerOptions{})
	const n = 100
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /api/2.0/mlflow/experiments/create HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{", addr)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond) // every handler is reading
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if per := grown / n; per > 64<<10 {
		t.Fatalf("%d stalled bodies that declared 10 MB: the heap grew %d KiB, %d KiB each", n, grown>>10, per>>10)
	}
}

// TestConnsPerClientCapped: past the threshold, one address holds at most
// MaxConnsPerClient connections; one more is answered a JSON 429 naming
// the flag, and a closed connection gives its place back.
func TestConnsPerClientCapped(t *testing.T) {
	s := MustServer(t)
	reg := prometheus.NewRegistry()
	addr := serve(t, s, httpapi.ListenerOptions{MaxConnsPerClient: 2, ConnsBeforeClientCap: 3, Metrics: reg})
	open := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn) (*http.Response, string) {
		t.Helper()
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp, string(b)
	}
	var held []net.Conn
	for i := range 3 { // under the threshold: no cap
		c := open()
		if resp, b := get(c); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d %s", i+1, resp.StatusCode, b)
		}
		held = append(held, c)
	}
	resp, b := get(open())
	if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(b, "--max-conns-per-client") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a 4th connection from one address: %d %s", resp.StatusCode, b)
	}
	if got := gathered(t, reg, "sextant_http_connections_refused_total"); got != 1 {
		t.Errorf("sextant_http_connections_refused_total = %v, want 1", got)
	}
	if got := gathered(t, reg, "sextant_http_connections_open"); got != 3 {
		t.Errorf("sextant_http_connections_open = %v, want 3", got)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, b := get(open())
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a close, a new connection: %d %s", resp.StatusCode, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
