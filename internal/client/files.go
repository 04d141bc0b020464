package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
)

// The Files API (/api/2.0/fs/...) and Unity Catalog
// (/api/2.1/unity-catalog/...) calls of `sextant volumes` and `sextant
// ckpt`; docs/volumes.md. File bodies stream both ways.

const (
	fsFiles = "/api/2.0/fs/files"
	fsDirs  = "/api/2.0/fs/directories"
	ucAPI   = "/api/2.1/unity-catalog"
)

// escapePath escapes each segment of a /Volumes or /Workspace path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// ListDir returns the children of a directory, following pages, and the
// server's clock (the Date of the last page).
func (c *Client) ListDir(ctx context.Context, dir string) ([]wire.DirEntry, time.Time, error) {
	var out []wire.DirEntry
	var now time.Time
	tok := ""
	for {
		var page wire.DirListing
		r := &request{method: "GET", path: fsDirs + escapePath(dir), raw: func(resp *http.Response) error {
			now, _ = http.ParseTime(resp.Header.Get("Date"))
			return decodeAnswer(resp, &page)
		}}
		if tok != "" {
			r.query = url.Values{"page_token": {tok}}
		}
		if err := c.call(ctx, r, nil); err != nil {
			return nil, time.Time{}, err
		}
		out = append(out, page.Contents...)
		if page.NextPageToken == "" {
			return out, now, nil
		}
		tok = page.NextPageToken
	}
}

// Walk returns every file under dir, and the directories, deepest first.
func (c *Client) Walk(ctx context.Context, dir string) (files, dirs []wire.DirEntry, err error) {
	entries, _, err := c.ListDir(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDirectory {
			files = append(files, e)
			continue
		}
		f, d, err := c.Walk(ctx, e.Path)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f...)
		dirs = append(dirs, d...)
		dirs = append(dirs, e)
	}
	return files, dirs, nil
}

// StatFile returns a file's size; errs.NotFound when there is no file.
func (c *Client) StatFile(ctx context.Context, p string) (int64, error) {
	var size int64
	err := c.call(ctx, &request{method: "HEAD", path: fsFiles + escapePath(p), raw: func(resp *http.Response) error {
		size = resp.ContentLength
		return nil
	}}, nil)
	return size, err
}

// IsDir reports whether p is a directory.
func (c *Client) IsDir(ctx context.Context, p string) (bool, error) {
	err := c.call(ctx, &request{method: "HEAD", path: fsDirs + escapePath(p)}, nil)
	if errs.Is(err, errs.NotFound) {
		return false, nil
	}
	return err == nil, err
}

// MakeDir creates a directory and its parents.
func (c *Client) MakeDir(ctx context.Context, p string) error {
	return c.call(ctx, &request{method: "PUT", path: fsDirs + escapePath(p)}, nil)
}

// DeleteFile deletes a file.
func (c *Client) DeleteFile(ctx context.Context, p string) error {
	return c.call(ctx, &request{method: "DELETE", path: fsFiles + escapePath(p)}, nil)
}

// DeleteDir deletes an empty directory.
func (c *Client) DeleteDir(ctx context.Context, p string) error {
	return c.call(ctx, &request{method: "DELETE", path: fsDirs + escapePath(p)}, nil)
}

// ReadFile returns the first limit bytes of a small file.
func (c *Client) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	var b []byte
	err := c.call(ctx, &request{method: "GET", path: fsFiles + escapePath(p), raw: func(resp *http.Response) error {
		var err error
		b, err = io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			return &errs.Error{Code: errs.Unavailable, Msg: "the server's answer was cut off", Err: err}
		}
		return nil
	}}, nil)
	return b, err
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r    io.Reader
	c    io.Closer
	done func(int64)
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 && r.done != nil {
		r.done(int64(n))
	}
	return n, err
}

func (r *countingReader) Close() error { return r.c.Close() }

// UploadFile sends the local file to the path; with overwrite false an
// existing file is errs.AlreadyExists. progress (when set) receives the
// bytes sent, and their negative when a retry sends them again.
func (c *Client) UploadFile(ctx context.Context, local, remote string, overwrite bool, progress func(int64)) error {
	r := &request{method: "PUT", path: fsFiles + escapePath(remote), ctype: "application/octet-stream", long: true}
	if !overwrite {
		r.query = url.Values{"overwrite": {"false"}}
	}
	sent := int64(0)
	r.open = func() (io.ReadCloser, int64, error) {
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
		return &countingReader{r: f, c: f, done: func(n int64) {
			sent += n
			if progress != nil {
				progress(n)
			}
		}}, fi.Size(), nil
	}
	return c.call(ctx, r, nil)
}

// errCut is a download whose body ended early.
var errCut = errors.New("the download was cut off")

// DownloadFile writes the file at remote to local (through local +
// ".part", renamed when complete). A dropped connection resumes with a
// Range request, if the file was not modified meanwhile.
func (c *Client) DownloadFile(ctx context.Context, remote, local string, progress func(int64)) error {
	tmp := local + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	got, total := int64(0), int64(-1)
	lastMod := ""
	for attempt := 0; ; attempt++ {
		r := &request{method: "GET", path: fsFiles + escapePath(remote), long: true}
		if got > 0 {
			r.header = http.Header{"Range": {"bytes=" + strconv.FormatInt(got, 10) + "-"}, "If-Unmodified-Since": {lastMod}}
		}
		r.raw = func(resp *http.Response) error {
			if total < 0 {
				total, lastMod = resp.ContentLength, resp.Header.Get("Last-Modified")
			}
			n, err := io.Copy(f, &countingReader{r: resp.Body, c: resp.Body, done: progress})
			got += n
			if err != nil || got != total {
				return fmt.Errorf("%w: %w", errCut, errors.Join(err, io.ErrUnexpectedEOF))
			}
			return nil
		}
		err := c.call(ctx, r, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, errCut) || attempt >= 4 || ctx.Err() != nil {
			f.Close()
			return fmt.Errorf("download %s: %w", remote, err)
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, local)
}

// decodeAnswer decodes a JSON answer into out.
func decodeAnswer(resp *http.Response, out any) error {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return &errs.Error{Code: errs.Unavailable, Msg: "the server's answer was cut off", Err: err}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return errs.Wrap(errs.Internal, err, fmt.Sprintf("the server's answer to %s is not the expected JSON", resp.Request.URL.Path))
	}
	return nil
}

// jsonCall sends in (nil: no body) and decodes the answer into out (nil:
// ignore it).
func (c *Client) jsonCall(ctx context.Context, method, path string, query url.Values, in, out any) error {
	r := &request{method: method, path: path, query: query}
	if in != nil {
		var err error
		if r, err = jsonRequest(method, path, in); err != nil {
			return err
		}
		r.query = query
	}
	return c.call(ctx, r, out)
}

// CreateCatalog creates a catalog.
func (c *Client) CreateCatalog(ctx context.Context, name, comment string) error {
	return c.jsonCall(ctx, "POST", ucAPI+"/catalogs", nil, wire.CreateCatalogRequest{Name: name, Comment: comment}, nil)
}

// CreateSchema creates a schema in a catalog.
func (c *Client) CreateSchema(ctx context.Context, catalog, name, comment string) error {
	return c.jsonCall(ctx, "POST", ucAPI+"/schemas", nil, wire.CreateSchemaRequest{CatalogName: catalog, Name: name, Comment: comment}, nil)
}

// CreateVolume creates a (managed) volume in a schema.
func (c *Client) CreateVolume(ctx context.Context, catalog, schema, name, comment string) error {
	return c.jsonCall(ctx, "POST", ucAPI+"/volumes", nil, wire.CreateVolumeRequest{CatalogName: catalog, SchemaName: schema, Name: name, VolumeType: "MANAGED", Comment: comment}, nil)
}

// ucList follows the pages of a Unity Catalog listing.
func ucList[T any](ctx context.Context, c *Client, path string, q url.Values, items func(page *T) (next string)) error {
	for tok := ""; ; {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		if tok != "" {
			v.Set("page_token", tok)
		}
		var page T
		if err := c.jsonCall(ctx, "GET", path, v, nil, &page); err != nil {
			return err
		}
		if tok = items(&page); tok == "" {
			return nil
		}
	}
}

// ListCatalogs returns the catalogs the caller can see.
func (c *Client) ListCatalogs(ctx context.Context) ([]wire.Catalog, error) {
	var out []wire.Catalog
	err := ucList(ctx, c, ucAPI+"/catalogs", nil, func(p *wire.CatalogsResponse) string {
		out = append(out, p.Catalogs...)
		return p.NextPageToken
	})
	return out, err
}

// ListSchemas returns the schemas of a catalog.
func (c *Client) ListSchemas(ctx context.Context, catalog string) ([]wire.Schema, error) {
	var out []wire.Schema
	err := ucList(ctx, c, ucAPI+"/schemas", url.Values{"catalog_name": {catalog}}, func(p *wire.SchemasResponse) string {
		out = append(out, p.Schemas...)
		return p.NextPageToken
	})
	return out, err
}

// ListVolumes returns the volumes of a schema.
func (c *Client) ListVolumes(ctx context.Context, catalog, schema string) ([]wire.Volume, error) {
	var out []wire.Volume
	err := ucList(ctx, c, ucAPI+"/volumes", url.Values{"catalog_name": {catalog}, "schema_name": {schema}}, func(p *wire.VolumesResponse) string {
		out = append(out, p.Volumes...)
		return p.NextPageToken
	})
	return out, err
}

// DeleteCatalogObject deletes a catalog, schema or volume: kind is
// "catalogs", "schemas" or "volumes", fullName its dotted name; force
// deletes a catalog's or schema's contents too.
func (c *Client) DeleteCatalogObject(ctx context.Context, kind, fullName string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.jsonCall(ctx, "DELETE", ucAPI+"/"+kind+"/"+url.PathEscape(fullName), q, nil, nil)
}
