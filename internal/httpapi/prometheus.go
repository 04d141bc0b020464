package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sextant/sextant/internal/workspace"
)

// The server's Prometheus metrics: every request by route and status, and
// GET /metrics, which serves Options.Gatherer (this package's metrics and
// whatever else main registered: the store's, the blob stores', Go's).
//
// /metrics is Authenticated: any signed-in user or personal access token
// may read it (Prometheus sends a token with `authorization:
// credentials_file`), and on loopback in single-user mode it is open like
// everything else. It holds counts, sizes and latencies only: no names,
// ids, emails or values of anything users logged (docs/deploy.md).

// httpMetrics are the request metrics. Route labels are the registered
// patterns, so their number is bounded by the route table whatever paths
// clients send.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newHTTPMetrics(r prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sextant_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sextant_http_request_duration_seconds",
			Help: "Time from a request's arrival to the end of its response, by method and route pattern; long polls of run logs last up to 25 s.",
			// 1 ms to 33 s: log-batch at p99 is around 100 ms under load,
			// a log tail's long poll 25 s.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"method", "route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sextant_http_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
	}
	if r != nil {
		r.MustRegister(m.requests, m.duration, m.inFlight)
	}
	return m
}

// registerSignInMetrics exports the workspace's sign-in counters: how
// many password checks (bcrypt runs) sign-ins cost, and how many were
// refused before theirs.
func registerSignInMetrics(r prometheus.Registerer, ws *workspace.Service) {
	if r == nil || ws == nil {
		return
	}
	r.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sextant_signin_password_checks_total",
			Help: "Password checks (bcrypt runs) made for sign-ins, over HTTP Basic or the login route; a verified Basic password is cached and not checked again.",
		}, func() float64 { return float64(ws.SignInStats().PasswordChecks) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sextant_signin_throttled_total",
			Help: "Sign-ins refused with 429 before their password was checked: a failure budget spent, or no free password-check slot.",
		}, func() float64 { return float64(ws.SignInStats().Throttled) }),
	)
}

// unmatchedRoute labels requests that no route took: refused before
// routing (an unclean path) or by the mux itself.
const unmatchedRoute = "unmatched"

// observe records one finished request. pattern is the mux pattern that
// served it ("GET /api/2.0/mlflow/runs/get"), empty when none did.
func (m *httpMetrics) observe(method, pattern string, status int, d time.Duration) {
	route := unmatchedRoute
	if pattern != "" {
		_, p, ok := strings.Cut(pattern, " ")
		if !ok {
			p = pattern
		}
		route = p
	}
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

// methodLabel keeps the method label to the methods routes take, so that
// made-up methods cannot add series.
func methodLabel(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return m
	}
	return "other"
}

func (s *Server) registerMetricsRoute() {
	if s.opts.Gatherer == nil {
		return
	}
	h := promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{
		// A collector that fails (a database query timing out) leaves its
		// metric out and the rest is still served.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promErrorLog{s},
	})
	s.handle("GET", "/metrics", Authenticated, func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	})
}

// promErrorLog logs what promhttp could not gather.
type promErrorLog struct{ s *Server }

func (l promErrorLog) Println(v ...any) {
	l.s.log.Warn("gathering metrics", "err", strings.TrimSpace(fmt.Sprint(v...)))
}
