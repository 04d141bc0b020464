package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// Defences at the edge, before any route runs (see docs/auth.md, "Threat
// model"):
//
//   - Host allow-list: a request whose Host header names a host the server
//     does not serve is refused, so that a web page cannot reach a loopback
//     server through a DNS name it controls (DNS rebinding).
//   - Cross-origin protection: a browser's unsafe request (POST, PUT,
//     PATCH, DELETE) sent by a page of another origin is refused, so that
//     any web page cannot write into a server without authentication.
//   - Body pacing: a request body must keep arriving, at least
//     BodyMinBytes every BodyTimeout, so that slow clients cannot hold
//     connections (and the memory behind them) for ever.
//   - Frames: every response forbids being framed by another page.

// Defaults of the edge's options.
const (
	// DefaultBodyTimeout is the longest a request body may take to deliver
	// DefaultBodyMinBytes.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultBodyMinBytes is what a request body must deliver every
	// DefaultBodyTimeout: about 550 bytes/s, far below any real link, so
	// that only a client that holds a connection without sending is cut.
	DefaultBodyMinBytes = 16 << 10
	// LoginMaxBodyBytes caps the sign-in request's body: an email and a
	// password. The route is public, so it is the one body anybody may
	// send; it gets no more than it needs.
	LoginMaxBodyBytes = 4 << 10
)

// HostPolicy decides which Host headers the server answers.
//
// Loopback names ("localhost", "*.localhost"), IP addresses and an empty
// Host (HTTP/1.0) are always allowed: none can be a name that an
// attacker's DNS server resolves to this machine, which is what DNS
// rebinding needs. Patterns add names:
// "mlflow.example.com", "mlflow.example.com:8443" (that port only),
// "*.example.com" (any name under example.com, not example.com itself) or
// "*" (any Host: the check is off).
type HostPolicy struct {
	any      bool
	patterns []string // lower case
}

// NewHostPolicy returns the policy that allows the loopback names, IP
// addresses and the patterns given (see HostPolicy). It refuses a pattern
// it cannot use, naming it.
func NewHostPolicy(patterns []string) (*HostPolicy, error) {
	p := &HostPolicy{}
	for _, pat := range patterns {
		pat = strings.ToLower(strings.TrimSpace(pat))
		switch {
		case pat == "":
			continue
		case pat == "*":
			p.any = true
		case strings.Contains(pat, "/") || strings.Contains(pat, "://"):
			return nil, fmt.Errorf("allowed host %q: give a host name, optionally with :port, not a URL", pat)
		case strings.Contains(pat[1:], "*") || (pat[0] == '*' && !strings.HasPrefix(pat, "*.")):
			return nil, fmt.Errorf("allowed host %q: a wildcard may only begin a pattern, as in *.example.com", pat)
		}
		p.patterns = append(p.patterns, pat)
	}
	return p, nil
}

// AnyHost is the policy that allows every Host header.
func AnyHost() *HostPolicy { return &HostPolicy{any: true} }

// Allows reports whether the policy allows host, a Host header's value
// (a name or address, with or without a port).
func (p *HostPolicy) Allows(host string) bool {
	if p == nil || p.any {
		return true
	}
	host = strings.ToLower(host)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	// No Host at all (an HTTP/1.0 probe) is no browser's request either.
	if name == "" || name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	for _, pat := range p.patterns {
		target := name
		if strings.Contains(pat, ":") {
			target = host // the pattern names a port: match host:port
		}
		if strings.HasPrefix(pat, "*.") {
			if strings.HasSuffix(target, pat[1:]) && len(target) > len(pat)-1 {
				return true
			}
		} else if target == pat {
			return true
		}
	}
	return false
}

// checkHost refuses a request whose Host the server does not serve.
func (s *Server) checkHost(r *http.Request) error {
	if s.hosts.Allows(r.Host) {
		return nil
	}
	name := r.Host
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	return errs.Errorf(errs.PermissionDenied, "Host %q is not served here: this server answers only the names it is allowed to (DNS rebinding protection). If it is this server's name, start it with --allowed-hosts %s (comma-separated; *.example.com for a domain, * for any)",
		errs.Truncate(r.Host, 100), errs.Truncate(name, 100))
}

// checkOrigin refuses an unsafe request that a browser sent on behalf of
// a page of another origin (Sec-Fetch-Site, or Origin against Host).
// Requests without those headers, as every non-browser client sends,
// pass.
func (s *Server) checkOrigin(r *http.Request) error {
	if err := s.cop.Check(r); err != nil {
		return errs.E(errs.PermissionDenied, "cross-origin request refused: a page of another site may not change this server (send it from the server's own pages, or without the browser's Origin and Sec-Fetch-Site headers)")
	}
	return nil
}

// errBodyTooSlow marks a request body that stopped arriving at the
// minimum rate; it answers 408.
var errBodyTooSlow = errors.New("request body too slow")

type bodyKey struct{}

// pacedBody is a request body that must deliver at least min bytes every
// window: each time it has, the connection's read deadline moves a window
// ahead, so a read that waits longer fails and the connection closes.
// A deadline, not a timer, so that an upload of any size over a slow link
// goes through as long as it keeps moving. Time the handler spends away
// from the body (a store that is slow to take a part) is not the client's
// and moves the deadline too.
type pacedBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	window   time.Duration
	min      int64
	got      int64     // bytes since the deadline last moved
	deadline time.Time // the connection's read deadline
	last     time.Time // when the handler last had the body's bytes
	done     bool
	tooSlow  bool
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	// Small gaps are left uncounted (no call per read); they cannot add
	// up to a window, as each min bytes moves the deadline anyway.
	if away := time.Since(b.last); away > b.window/8 {
		b.deadline = b.deadline.Add(away)
		_ = b.rc.SetReadDeadline(b.deadline)
	}
	n, err := b.ReadCloser.Read(p)
	b.last = time.Now()
	b.got += int64(n)
	switch {
	case err == nil:
		if b.got >= b.min {
			b.got = 0
			b.deadline = b.last.Add(b.window)
			_ = b.rc.SetReadDeadline(b.deadline)
		}
	case err == io.EOF:
		// The whole body is in: net/http now reads the connection in the
		// background to notice a client that goes away, and a deadline
		// left behind would end that read and cancel a long request.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.tooSlow = true
		return n, &errs.Error{Code: errs.Invalid, Msg: b.message(), Err: errBodyTooSlow}
	}
	return n, err
}

func (b *pacedBody) message() string {
	return fmt.Sprintf("request body too slow: it must deliver at least %d bytes every %s, and the server stopped waiting (--body-min-bytes, --body-timeout)", b.min, b.window)
}

// paceBody wraps r's body, if it has one, in a pacedBody and sets the
// first deadline: a handler that never reads the body still leaves
// net/http a deadline for reading what is left of it.
func (s *Server) paceBody(w http.ResponseWriter, r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || s.opts.BodyTimeout <= 0 {
		return r
	}
	rc := http.NewResponseController(w)
	now := time.Now()
	if err := rc.SetReadDeadline(now.Add(s.opts.BodyTimeout)); err != nil {
		return r // not a connection that has deadlines (a test's recorder)
	}
	b := &pacedBody{ReadCloser: r.Body, rc: rc, window: s.opts.BodyTimeout, min: s.opts.BodyMinBytes, deadline: now.Add(s.opts.BodyTimeout), last: now}
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
	r.Body = b
	return r
}

// bodyTooSlow returns the paced body of r if it stopped for lack of
// progress: the error that reached writeError may have lost the cause on
// its way through a store.
func bodyTooSlow(r *http.Request) *pacedBody {
	if b, ok := r.Context().Value(bodyKey{}).(*pacedBody); ok && b.tooSlow {
		return b
	}
	return nil
}
