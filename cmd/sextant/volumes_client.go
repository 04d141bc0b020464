package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// filesClient talks to the Files API and Unity Catalog routes of a server,
// authenticating as the mlflow client does. Requests that fail on the way
// (connection errors, 429, 5xx) are retried with backoff; bodies stream.
type filesClient struct {
	server  string
	auth    func(*http.Request)
	hc      *http.Client
	retries int
}

func (m *Main) filesClient(a apiFlags) *filesClient {
	return &filesClient{
		server: strings.TrimRight(a.server, "/"),
		auth: func(req *http.Request) {
			if tok := m.Getenv("MLFLOW_TRACKING_TOKEN"); tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			if u, p := m.Getenv("MLFLOW_TRACKING_USERNAME"), m.Getenv("MLFLOW_TRACKING_PASSWORD"); u != "" && p != "" {
				req.SetBasicAuth(u, p)
			}
		},
		// No overall timeout: transfers of large files take as long as they
		// take; a stalled connection is cut by the transport's timeouts.
		hc:      &http.Client{Transport: m.httpTransport()},
		retries: 4,
	}
}

// apiError is an error answered by the server.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string {
	switch {
	case e.code != "":
		return e.code + ": " + e.message
	case e.message == "":
		return fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.message)
}

func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == status
}

// escapeVolumePath escapes each segment of a /Volumes path.
func escapeVolumePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// do sends a request, retrying transient failures. body, when set, returns
// a fresh reader for each attempt (and its length). The caller closes the
// response body of a success; errors carry the server's message.
func (c *filesClient) do(ctx context.Context, method, target string, hdr http.Header, body func() (io.ReadCloser, int64, error)) (*http.Response, error) {
	delay := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var rd io.ReadCloser
		size := int64(0)
		if body != nil {
			var err error
			if rd, size, err = body(); err != nil {
				return nil, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, c.server+target, rd)
		if err != nil {
			if rd != nil {
				rd.Close()
			}
			return nil, err
		}
		if body != nil {
			req.ContentLength = size
			if size == 0 {
				req.Body = http.NoBody
			}
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		c.auth(req)
		resp, err := c.hc.Do(req)
		var retry error
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			retry = fmt.Errorf("cannot reach the server at %s: %w", c.server, err)
		case resp.StatusCode >= 400:
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			ae := &apiError{status: resp.StatusCode, message: strings.TrimSpace(string(b))}
			var e struct {
				Code    string `json:"error_code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(b, &e) == nil && e.Message != "" {
				ae.code, ae.message = e.Code, e.Message
			}
			if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
				return nil, ae
			}
			retry = ae
		default:
			return resp, nil
		}
		if attempt >= c.retries {
			return nil, retry
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay/2 + rand.N(delay/2+1)):
		}
		delay = min(2*delay, 8*time.Second)
	}
}

func (c *filesClient) json(ctx context.Context, method, target string, in, out any) error {
	var body func() (io.ReadCloser, int64, error)
	hdr := http.Header{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = func() (io.ReadCloser, int64, error) { return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil }
		hdr.Set("Content-Type", "application/json")
	}
	resp, err := c.do(ctx, method, target, hdr, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *filesClient) empty(ctx context.Context, method, target string) (*http.Response, error) {
	resp, err := c.do(ctx, method, target, nil, nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// volEntry is a file or directory in a volume.
type volEntry struct {
	Path         string `json:"path"`
	Name         string `json:"name"`
	IsDirectory  bool   `json:"is_directory"`
	FileSize     int64  `json:"file_size"`
	LastModified int64  `json:"last_modified"`
}

// list returns the children of a directory, following pages. It also
// returns the server's clock (the Date of the last page).
func (c *filesClient) list(ctx context.Context, dir string) ([]volEntry, time.Time, error) {
	var out []volEntry
	tok := ""
	for {
		target := "/api/2.0/fs/directories" + escapeVolumePath(dir)
		if tok != "" {
			target += "?page_token=" + url.QueryEscape(tok)
		}
		resp, err := c.do(ctx, "GET", target, nil, nil)
		if err != nil {
			return nil, time.Time{}, err
		}
		var page struct {
			Contents []volEntry `json:"contents"`
			Next     string     `json:"next_page_token"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, time.Time{}, err
		}
		now, _ := http.ParseTime(resp.Header.Get("Date"))
		out = append(out, page.Contents...)
		if page.Next == "" {
			return out, now, nil
		}
		tok = page.Next
	}
}

// walk returns every file under dir (and the directories, deepest first).
func (c *filesClient) walk(ctx context.Context, dir string) (files, dirs []volEntry, err error) {
	entries, _, err := c.list(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDirectory {
			files = append(files, e)
			continue
		}
		f, d, err := c.walk(ctx, e.Path)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f...)
		dirs = append(dirs, d...)
		dirs = append(dirs, e)
	}
	return files, dirs, nil
}

// statFile returns a file's size, or a 404 apiError.
func (c *filesClient) statFile(ctx context.Context, p string) (int64, error) {
	resp, err := c.empty(ctx, "HEAD", "/api/2.0/fs/files"+escapeVolumePath(p))
	if err != nil {
		return 0, err
	}
	return resp.ContentLength, nil
}

func (c *filesClient) isDir(ctx context.Context, p string) (bool, error) {
	_, err := c.empty(ctx, "HEAD", "/api/2.0/fs/directories"+escapeVolumePath(p))
	if isStatus(err, http.StatusNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (c *filesClient) mkdirs(ctx context.Context, p string) error {
	_, err := c.empty(ctx, "PUT", "/api/2.0/fs/directories"+escapeVolumePath(p))
	return err
}

func (c *filesClient) deleteFile(ctx context.Context, p string) error {
	_, err := c.empty(ctx, "DELETE", "/api/2.0/fs/files"+escapeVolumePath(p))
	return err
}

func (c *filesClient) deleteDir(ctx context.Context, p string) error {
	_, err := c.empty(ctx, "DELETE", "/api/2.0/fs/directories"+escapeVolumePath(p))
	return err
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r    io.Reader
	f    *os.File
	done func(int64)
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 && r.done != nil {
		r.done(int64(n))
	}
	return n, err
}

func (r *countingReader) Close() error { return r.f.Close() }

// upload sends a local file to the volume path. progress receives the bytes
// sent (again after a retry).
func (c *filesClient) upload(ctx context.Context, local, remote string, overwrite bool, progress func(int64)) error {
	target := "/api/2.0/fs/files" + escapeVolumePath(remote)
	if !overwrite {
		target += "?overwrite=false"
	}
	sent := int64(0)
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	resp, err := c.do(ctx, "PUT", target, hdr, func() (io.ReadCloser, int64, error) {
		if sent > 0 && progress != nil {
			progress(-sent) // a retry sends it all again
			sent = 0
		}
		f, err := os.Open(local)
		if err != nil {
			return nil, 0, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return &countingReader{r: f, f: f, done: func(n int64) {
			sent += n
			if progress != nil {
				progress(n)
			}
		}}, fi.Size(), nil
	})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// download writes the file at the volume path to local (through local +
// ".part", renamed when complete). A dropped connection resumes with a
// Range request.
func (c *filesClient) download(ctx context.Context, remote, local string, progress func(int64)) error {
	tmp := local + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	got, total := int64(0), int64(-1)
	lastMod := ""
	for attempt := 0; ; attempt++ {
		hdr := http.Header{}
		if got > 0 {
			hdr.Set("Range", "bytes="+strconv.FormatInt(got, 10)+"-")
			hdr.Set("If-Unmodified-Since", lastMod)
		}
		resp, err := c.do(ctx, "GET", "/api/2.0/fs/files"+escapeVolumePath(remote), hdr, nil)
		if err != nil {
			f.Close()
			return err
		}
		if total < 0 {
			total, lastMod = resp.ContentLength, resp.Header.Get("Last-Modified")
		}
		n, err := io.Copy(f, &countingReader{r: resp.Body, done: progress})
		resp.Body.Close()
		got += n
		if err == nil && got == total {
			break
		}
		if attempt >= c.retries || ctx.Err() != nil {
			f.Close()
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("download %s: %w", remote, err)
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, local)
}
