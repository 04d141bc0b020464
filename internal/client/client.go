// Package client is the one Go client of a Sextant (or MLflow) server, for
// every Go caller: `sextant run` (tracking, run logs and its GPU sampler),
// the GPU agent, `sextant logs` and `runs`, the admin commands, `sextant
// volumes` and `ckpt`. It sends the credentials the way the mlflow client
// does (a bearer token, or a user name and password as HTTP Basic),
// retries what is worth retrying (connection failures, 429 and 5xx
// answers; errs.Transient) with backoff, and turns the server's JSON
// errors back into *errs.Error values with the domain code of wire's error
// table, so that callers branch on errs.CodeOf as they would against the
// store. The shapes it sends and reads are internal/wire's.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
)

// Options configure a Client.
type Options struct {
	// Token, when set, is sent as "Authorization: Bearer <token>"
	// (MLFLOW_TRACKING_TOKEN). Otherwise Username and Password, when set,
	// are sent as HTTP Basic (MLFLOW_TRACKING_USERNAME, _PASSWORD).
	Token              string
	Username, Password string
	// InsecureTLS skips the verification of the server's certificate
	// (MLFLOW_TRACKING_INSECURE_TLS).
	InsecureTLS bool
	// Timeout bounds one attempt of a request (not long polls, which add
	// their wait); 0 means 30 s.
	Timeout time.Duration
	// RetryFor bounds the time spent retrying one request; 0 means 60 s,
	// a negative value means no retries.
	RetryFor time.Duration
	// RetryUntilReached, when positive, bounds the retries instead of
	// RetryFor as long as no request of this client has had an answer
	// from the server: a wrong address fails fast, while a server that
	// answered before and is restarting is waited for as long as
	// RetryFor. 0 means RetryFor throughout.
	RetryUntilReached time.Duration
	// MinBackoff and MaxBackoff bound the wait between two attempts; the
	// wait doubles from MinBackoff (0 means 100 ms) up to MaxBackoff (0
	// means 5 s), with jitter, unless the server asks for longer with
	// Retry-After.
	MinBackoff, MaxBackoff time.Duration
	// UserAgent is sent with every request; empty means "sextant".
	UserAgent string
	// HTTPClient sends the requests; nil means one with keep-alive
	// connections. Its own Timeout should be 0: Timeout applies per attempt.
	HTTPClient *http.Client
	// Logger receives a debug line per retry; nil discards them.
	Logger *slog.Logger
	// Unreachable, when set, is called once per Client, the first time a
	// request that could not reach the server (no HTTP answer: connection
	// refused, unknown host, timeout) is about to be retried, with that
	// error and the time retries may take (RetryFor). It lets a command
	// say at once that it is waiting rather than stay silent for the
	// whole RetryFor. It must not block.
	Unreachable func(err error, retryFor time.Duration)
}

// Client is a client of one server. It is safe for concurrent use.
type Client struct {
	base string
	opts Options
	hc   *http.Client
	auth string
	log  *slog.Logger
	// told is set once Options.Unreachable has been called.
	told atomic.Bool
	// reached is set once the server has answered a request.
	reached atomic.Bool
}

// New returns a client for the server at uri (MLFLOW_TRACKING_URI, such
// as http://127.0.0.1:5000).
func New(uri string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(uri))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.Errorf(errs.Invalid, "tracking URI %q is not an http(s) URL such as http://127.0.0.1:5000", uri)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 60 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "sextant"
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), opts: opts, hc: opts.HTTPClient, log: opts.Logger}
	if c.hc == nil {
		tr := &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			// A host that drops the connection attempt would otherwise
			// hold an attempt for its whole Timeout.
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost:   64, // sextant volumes cp -j N
			IdleConnTimeout:       2 * time.Minute,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			// Transfers without a timeout of their own (long requests)
			// are cut when the answer does not start for this long.
			ResponseHeaderTimeout: 5 * time.Minute,
			// Appends are megabytes: large buffers mean few system calls.
			WriteBufferSize: 256 << 10,
			ReadBufferSize:  64 << 10,
		}
		if opts.InsecureTLS {
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user asked for it
		}
		c.hc = &http.Client{Transport: tr}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.Token != "":
		c.auth = "Bearer " + opts.Token
	case opts.Username != "" || opts.Password != "":
		req := &http.Request{Header: http.Header{}}
		req.SetBasicAuth(opts.Username, opts.Password)
		c.auth = req.Header.Get("Authorization")
	}
	return c, nil
}

// URL returns the server's base URL.
func (c *Client) URL() string { return c.base }

// request is one API call. body is re-read from the start on every
// attempt.
type request struct {
	method string
	path   string
	query  url.Values
	header http.Header
	body   io.ReadSeeker
	size   int64
	ctype  string
	// open, when set instead of body, opens the body afresh for each
	// attempt (a file being uploaded) and returns its length.
	open func() (io.ReadCloser, int64, error)
	// wait extends the attempt's timeout (long polls).
	wait time.Duration
	// long lifts the attempt's timeout: a large file takes as long as it
	// takes, and the transport's timeouts cut a stalled connection.
	long bool
	// noRetry sends the request once (the GPU agent spools and retries
	// on its own).
	noRetry bool
	// raw, when set, reads a 2xx answer in place of the JSON decoding. An
	// error it returns is the call's, and is retried only if transient.
	raw func(*http.Response) error
}

func jsonRequest(method, path string, in any) (*request, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", path, err)
	}
	return &request{method: method, path: path, body: bytes.NewReader(b), size: int64(len(b)), ctype: "application/json"}, nil
}

// call sends r, retrying transient failures, and decodes a 2xx JSON answer
// into out (unless out is nil).
func (c *Client) call(ctx context.Context, r *request, out any) error {
	start := time.Now()
	backoff := c.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		retryAfter, err := c.once(ctx, r, out)
		if err == nil {
			return nil
		}
		if !errs.Transient(err) || c.opts.RetryFor < 0 || r.noRetry || ctx.Err() != nil {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		wait = max(wait, retryAfter)
		budget := c.opts.RetryFor
		if c.opts.RetryUntilReached > 0 && !c.reached.Load() {
			budget = c.opts.RetryUntilReached
		}
		if time.Since(start)+wait > budget {
			return c.gaveUp(err, time.Since(start))
		}
		var ue *unreachableError
		if c.opts.Unreachable != nil && errors.As(err, &ue) && !c.told.Swap(true) {
			c.opts.Unreachable(ue.err, budget)
		}
		c.log.Debug("retrying request", "method", r.method, "path", r.path, "attempt", attempt, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
}

func (c *Client) once(ctx context.Context, r *request, out any) (retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout+r.wait)
	if r.long {
		actx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	size := r.size
	switch {
	case r.body != nil:
		if _, err := r.body.Seek(0, io.SeekStart); err != nil {
			return 0, fmt.Errorf("rewind request body: %w", err)
		}
		body = io.NopCloser(r.body) // keep the transport from closing it between attempts
	case r.open != nil:
		rc, n, err := r.open()
		if err != nil {
			return 0, err
		}
		body, size = rc, n
		if n == 0 {
			rc.Close()
			body = http.NoBody
		}
	}
	req, err := http.NewRequestWithContext(actx, r.method, target, body)
	if err != nil {
		if rc, ok := body.(io.Closer); ok {
			rc.Close()
		}
		return 0, fmt.Errorf("build request: %w", err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if body != nil {
		req.ContentLength = size
		if r.ctype != "" {
			req.Header.Set("Content-Type", r.ctype)
		}
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("cannot reach the server at %s", c.base), Err: &unreachableError{err}}
	}
	defer resp.Body.Close()
	c.reached.Store(true)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if r.raw != nil {
			return 0, r.raw(resp)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, &errs.Error{Code: errs.Unavailable, Msg: "the server's answer was cut off", Err: err}
		}
		if out == nil {
			return 0, nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return 0, errs.Wrap(errs.Internal, err, fmt.Sprintf("the server's answer to %s is not the expected JSON", r.path))
		}
		return 0, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
			retryAfter = min(time.Duration(secs)*time.Second, time.Minute)
		}
	}
	return retryAfter, responseError(resp.StatusCode, b)
}

// unreachableError is the cause of an attempt that got no HTTP answer.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// gaveUp is the error of a request whose retries took tried: when the
// server could not be reached, it says what was tried and what to check.
func (c *Client) gaveUp(err error, tried time.Duration) error {
	var ue *unreachableError
	if !errors.As(err, &ue) {
		return err
	}
	cause := ue.err
	var uerr *url.Error
	if errors.As(cause, &uerr) {
		cause = uerr.Err // "dial tcp 127.0.0.1:5999: connect: connection refused", without the request
	}
	return &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf(
		"cannot reach the server at %s (%v; retried for %s): check that the server is running there "+
			"(sextant server) and that --server or MLFLOW_TRACKING_URI names its address", c.base, cause, tried.Round(time.Second))}
}

// StatusError is the error of a non-2xx answer, for callers that need the
// HTTP status. It is the cause of the *errs.Error the client returns, whose
// Msg is the server's message: its own text names only the status and the
// error code, so that the message is not printed twice.
type StatusError struct {
	Status    int
	ErrorCode string
	Message   string
}

// Error implements error.
func (e *StatusError) Error() string {
	if e.ErrorCode != "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, e.ErrorCode)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

func responseError(status int, body []byte) error {
	se := &StatusError{Status: status}
	var eb wire.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.ErrorCode != "" {
		se.ErrorCode, se.Message = eb.ErrorCode, eb.Message
	} else {
		se.Message = errs.Truncate(strings.TrimSpace(string(body)), 300)
	}
	code := wire.CodeFor(se.ErrorCode, status)
	msg := se.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &errs.Error{Code: code, Msg: msg, Err: se}
}
