package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
)

// GPUClientOptions configure a GPUClient. Credentials work as with the
// mlflow client: a token (MLFLOW_TRACKING_TOKEN) is sent as a bearer token,
// otherwise a user name and password (MLFLOW_TRACKING_USERNAME and
// _PASSWORD) as HTTP Basic.
type GPUClientOptions struct {
	Token              string
	Username, Password string
	// HTTPClient sends the requests; nil means a client with keep-alive
	// connections and a 30 s timeout.
	HTTPClient *http.Client
	// UserAgent is sent with each request; empty means "sextant-agent".
	UserAgent string
}

// GPUClient sends GPU samples to a Sextant server's ingest endpoint. It
// implements gpu.Sink and is safe for concurrent use.
type GPUClient struct {
	url   string
	hc    *http.Client
	auth  string
	agent string
}

var _ gpu.Sink = (*GPUClient)(nil)

// NewGPUClient returns a client for the server at baseURL (for example
// http://127.0.0.1:5000, as in MLFLOW_TRACKING_URI).
func NewGPUClient(baseURL string, opts GPUClientOptions) (*GPUClient, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http(s) URL such as http://127.0.0.1:5000", baseURL)
	}
	c := &GPUClient{url: strings.TrimRight(u.String(), "/") + gpuPrefix + "/samples", hc: opts.HTTPClient, agent: opts.UserAgent}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: 2 * time.Minute,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
		}}
	}
	if c.agent == "" {
		c.agent = "sextant-agent"
	}
	switch {
	case opts.Token != "":
		c.auth = "Bearer " + opts.Token
	case opts.Username != "":
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(opts.Username+":"+opts.Password))
	}
	return c, nil
}

// Send implements gpu.Sink. Network failures and 5xx answers are
// errs.Unavailable; 400 answers are errs.Invalid or errs.LimitExceeded; 401
// and 403 are errs.Unauthenticated and errs.PermissionDenied.
func (c *GPUClient) Send(ctx context.Context, b *gpu.Batch) (*gpu.SendResult, error) {
	body := appendGPUBatch(make([]byte, 0, 2048), b)
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, bytes.NewReader(body))
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "build request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "the server is unreachable")
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "read the server's answer")
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e)
		return nil, gpuStatusError(resp.StatusCode, e.ErrorCode, e.Message)
	}
	var w wireGPUResult
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "the server's answer is not JSON")
	}
	return w.result(), nil
}
