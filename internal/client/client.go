// Package client talks to a Sextant (or MLflow) tracking server over HTTP
// for the client commands: `sextant run` and `sextant logs`. It sends the
// credentials the way the mlflow client does (a bearer token, or a user
// name and password as HTTP Basic), retries what is worth retrying
// (connection failures, 429 and 5xx answers) with backoff, and turns the
// server's JSON errors back into *errs.Error values with their domain code,
// so that callers branch on errs.CodeOf as they would against the store.
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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
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
}

// Client is a client of one server. It is safe for concurrent use.
type Client struct {
	base string
	opts Options
	hc   *http.Client
	auth string
	log  *slog.Logger
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
			Proxy:                 http.ProxyFromEnvironment,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       2 * time.Minute,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
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
	body   io.ReadSeeker
	size   int64
	ctype  string
	// wait extends the attempt's timeout (long polls).
	wait time.Duration
	// accept lets the caller read the raw body.
	raw func(*http.Response) error
}

func jsonRequest(method, path string, in any) (*request, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", path, err)
	}
	return &request{method: method, path: path, body: bytes.NewReader(b), size: int64(len(b)), ctype: "application/json"}, nil
}

// call sends r, retrying transient failures, and decodes a 200 JSON answer
// into out (unless out is nil).
func (c *Client) call(ctx context.Context, r *request, out any) error {
	start := time.Now()
	backoff := c.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		retryAfter, err := c.once(ctx, r, out)
		if err == nil {
			return nil
		}
		if !Transient(err) || c.opts.RetryFor < 0 || ctx.Err() != nil {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		wait = max(wait, retryAfter)
		if time.Since(start)+wait > c.opts.RetryFor {
			return err
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
	defer cancel()
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		if _, err := r.body.Seek(0, io.SeekStart); err != nil {
			return 0, fmt.Errorf("rewind request body: %w", err)
		}
		body = io.NopCloser(r.body) // keep the transport from closing it between attempts
	}
	req, err := http.NewRequestWithContext(actx, r.method, target, body)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	if r.body != nil {
		req.ContentLength = r.size
		req.Header.Set("Content-Type", r.ctype)
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
		return 0, &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("cannot reach the server at %s", c.base), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
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

// StatusError is the error of a non-200 answer, for callers that need the
// HTTP status. It is the cause of the *errs.Error the client returns, whose
// Msg is the server's message: its own text names only the status and the
// error code, so that the message is not printed twice.
type StatusError struct {
	Status    int
	ErrorCode string
	Message   string
}

func (e *StatusError) Error() string {
	if e.ErrorCode != "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, e.ErrorCode)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// wireCodes maps the MLflow error codes the server sends back to domain
// codes (the inverse of internal/httpapi/errors.go).
var wireCodes = map[string]errs.Code{
	"INVALID_PARAMETER_VALUE": errs.Invalid,
	"BAD_REQUEST":             errs.Invalid,
	"RESOURCE_LIMIT_EXCEEDED": errs.LimitExceeded,
	"RESOURCE_DOES_NOT_EXIST": errs.NotFound,
	"ENDPOINT_NOT_FOUND":      errs.NotFound,
	"RESOURCE_ALREADY_EXISTS": errs.AlreadyExists,
	"RESOURCE_CONFLICT":       errs.Conflict,
	"UNAUTHENTICATED":         errs.Unauthenticated,
	"PERMISSION_DENIED":       errs.PermissionDenied,
	"REQUEST_LIMIT_EXCEEDED":  errs.Throttled,
	"TEMPORARILY_UNAVAILABLE": errs.Unavailable,
	"NOT_IMPLEMENTED":         errs.NotImplemented,
	"RESOURCE_EXHAUSTED":      errs.InsufficientStorage,
	"INTERNAL_ERROR":          errs.Internal,
}

func responseError(status int, body []byte) error {
	se := &StatusError{Status: status}
	var wire struct {
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.ErrorCode != "" {
		se.ErrorCode, se.Message = wire.ErrorCode, wire.Message
	} else {
		se.Message = strings.TrimSpace(string(body))
		if len(se.Message) > 300 {
			se.Message = se.Message[:300] + "..."
		}
	}
	code, ok := wireCodes[se.ErrorCode]
	switch {
	case status == http.StatusTooManyRequests:
		code = errs.Throttled
	case status >= 500 && status != http.StatusNotImplemented && status != http.StatusInsufficientStorage:
		code = errs.Unavailable
	case !ok:
		switch status {
		case http.StatusNotFound:
			code = errs.NotFound
		case http.StatusUnauthorized:
			code = errs.Unauthenticated
		case http.StatusForbidden:
			code = errs.PermissionDenied
		default:
			code = errs.Invalid
		}
	}
	msg := se.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &errs.Error{Code: code, Msg: msg, Err: se}
}

// Transient reports whether err is worth retrying: the server could not be
// reached, or answered 429 or a 5xx.
func Transient(err error) bool {
	switch errs.CodeOf(err) {
	case errs.Unavailable, errs.Throttled:
		return true
	}
	var se *StatusError
	return errors.As(err, &se) && se.Status >= 500 && se.Status != http.StatusNotImplemented && se.Status != http.StatusInsufficientStorage
}
