package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// client speaks the MLflow REST API the way the Python client does (JSON
// over HTTP/1.1 keep-alive), with less overhead so the load generator
// leaves the cores to the server.
type client struct {
	base string
	hc   *http.Client
	// basic, when set, is sent as the Authorization header of every
	// request, as the mlflow client does with a username and password.
	basic string
}

func newClient(base string) *client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
}

// post sends a JSON body and decodes the JSON answer into out (if non-nil).
func (c *client) post(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, out)
}

// get sends a GET with query parameters.
func (c *client) get(ctx context.Context, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

// put sends a JSON body with PUT.
func (c *client) put(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, nil)
}

func (c *client) do(req *http.Request, out any) error {
	if c.basic != "" {
		req.Header.Set("Authorization", c.basic)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *client) createExperiment(ctx context.Context, name string) (string, error) {
	var out struct {
		ExperimentID string `json:"experiment_id"`
	}
	body, _ := json.Marshal(map[string]string{"name": name})
	err := c.post(ctx, "/api/2.0/mlflow/experiments/create", body, &out)
	return out.ExperimentID, err
}

func (c *client) createRun(ctx context.Context, expID, name string, startMs int64) (string, error) {
	var out struct {
		Run struct {
			Info struct {
				RunID string `json:"run_id"`
			} `json:"info"`
		} `json:"run"`
	}
	body, _ := json.Marshal(map[string]any{"experiment_id": expID, "run_name": name, "start_time": startMs})
	err := c.post(ctx, "/api/2.0/mlflow/runs/create", body, &out)
	return out.Run.Info.RunID, err
}

// history pages through a metric's history and returns its points.
func (c *client) history(ctx context.Context, runID, key string, pageSize int) ([]wirePoint, error) {
	pages, err := c.historyRaw(ctx, runID, key, pageSize)
	if err != nil {
		return nil, err
	}
	var all []wirePoint
	for _, p := range pages {
		var out struct {
			Metrics []wirePoint `json:"metrics"`
		}
		if err := json.Unmarshal(p, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Metrics...)
	}
	return all, nil
}

// historyRaw pages through a metric's history and returns the response
// bodies, decoding only the page token: the time it takes is the server's
// (and the transfer's), not the client's JSON decoding.
func (c *client) historyRaw(ctx context.Context, runID, key string, pageSize int) ([][]byte, error) {
	var pages [][]byte
	tok := ""
	for {
		q := url.Values{"run_id": {runID}, "metric_key": {key}, "max_results": {strconv.Itoa(pageSize)}}
		if tok != "" {
			q.Set("page_token", tok)
		}
		req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/2.0/mlflow/metrics/get-history?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("get-history: %d %s", resp.StatusCode, b)
		}
		pages = append(pages, b)
		// The token, when present, is the last field of the body; MLflow's
		// server puts a space after the colon.
		tok = ""
		if i := bytes.LastIndex(b, []byte(`"next_page_token"`)); i >= 0 {
			rest := bytes.TrimLeft(b[i+len(`"next_page_token"`):], " \t\r\n")
			rest = bytes.TrimLeft(bytes.TrimPrefix(rest, []byte(":")), " \t\r\n")
			if rest, ok := bytes.CutPrefix(rest, []byte(`"`)); ok {
				if j := bytes.IndexByte(rest, '"'); j >= 0 {
					tok = string(rest[:j])
				}
			}
		}
		if tok == "" {
			return pages, nil
		}
	}
}

type wirePoint struct {
	Step      int64 `json:"step"`
	Timestamp int64 `json:"timestamp"`
}

// appendMetric appends one metric object of a log-batch body.
func appendMetric(b []byte, key string, v float64, ts, step int64) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, key...)
	b = append(b, `","value":`...)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, step, 10)
	return append(b, '}')
}

// latencies summarises request latencies.
type latencies []time.Duration

func (l latencies) summary() map[string]float64 {
	if len(l) == 0 {
		return nil
	}
	s := slices.Clone(l)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return float64(s[max(0, i)]) / 1e6
	}
	return map[string]float64{"p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99), "max_ms": q(1), "count": float64(len(s))}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sqliteBytes returns the size of the database file and the bytes in use
// (the size less its free pages), read from the SQLite file header so that
// the benchmark needs no SQL driver.
func sqliteBytes(dataDir string) (file, live int64, err error) {
	path := filepath.Join(dataDir, "sextant.db")
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0, 0, err
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(h[28:]))
	free := int64(binary.BigEndian.Uint32(h[36:]))
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), (pages - free) * pageSize, nil
}
