package httpapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/wire"
	"github.com/sextant/sextant/internal/workspace"
)

// Volumes: catalogs, schemas and volumes with Unity Catalog's REST shapes
// (/api/2.1/unity-catalog/...), and the files inside volumes through the
// Databricks Files API (/api/2.0/fs/files/Volumes/... and
// /api/2.0/fs/directories/Volumes/...). File bodies stream both ways.

const ucPrefix = "/api/2.1/unity-catalog"

func (s *Server) registerVolumeRoutes() {
	if s.opts.Volumes == nil {
		return
	}
	s.handle("POST", ucPrefix+"/catalogs", Authenticated, s.createCatalog)
	s.handle("GET", ucPrefix+"/catalogs", Authenticated, s.listCatalogs)
	s.handle("GET", ucPrefix+"/catalogs/{name}", ReadVolume, s.getCatalog)
	s.handle("DELETE", ucPrefix+"/catalogs/{name}", ManageVolume, s.deleteCatalog)
	s.handle("PATCH", ucPrefix+"/catalogs/{name}", ManageVolume, s.updateCatalog)
	s.handle("POST", ucPrefix+"/schemas", WriteVolume, s.createSchema)
	s.handle("GET", ucPrefix+"/schemas", ReadVolume, s.listSchemas)
	s.handle("GET", ucPrefix+"/schemas/{full_name}", ReadVolume, s.getSchema)
	s.handle("DELETE", ucPrefix+"/schemas/{full_name}", ManageVolume, s.deleteSchema)
	s.handle("PATCH", ucPrefix+"/schemas/{full_name}", ManageVolume, s.updateSchema)
	s.handle("POST", ucPrefix+"/volumes", WriteVolume, s.createVolume)
	s.handle("GET", ucPrefix+"/volumes", ReadVolume, s.listVolumes)
	s.handle("GET", ucPrefix+"/volumes/{full_name}", ReadVolume, s.getVolume)
	s.handle("DELETE", ucPrefix+"/volumes/{full_name}", ManageVolume, s.deleteVolume)
	s.handle("PATCH", ucPrefix+"/volumes/{full_name}", ManageVolume, s.updateVolume)

	const files, dirs = "/api/2.0/fs/files/Volumes/{path...}", "/api/2.0/fs/directories/Volumes/{path...}"
	s.handle("PUT", files, WriteVolume, s.putVolumeFile)
	s.handle("POST", files, WriteVolume, s.postVolumeFile)
	s.handle("GET", "/api/2.0/fs/endpoints", Authenticated, s.fsEndpoints)
	s.handle("GET", files, ReadVolume, s.getVolumeFile)
	s.handle("HEAD", files, ReadVolume, s.getVolumeFile)
	s.handle("DELETE", files, WriteVolume, s.volumePathOp(s.opts.Volumes.DeleteFile, http.StatusNoContent))
	s.handle("PUT", dirs, WriteVolume, s.volumePathOp(s.opts.Volumes.MakeDir, http.StatusNoContent))
	s.handle("GET", dirs, ReadVolume, s.listVolumeDir)
	s.handle("HEAD", dirs, ReadVolume, s.volumePathOp(s.opts.Volumes.StatDir, http.StatusOK))
	s.handle("DELETE", dirs, WriteVolume, s.volumePathOp(s.opts.Volumes.DeleteDir, http.StatusNoContent))

	// The Databricks SDK reads this host's discovery metadata before its
	// first call, without credentials, and warns when there is none: it
	// has no OIDC issuer, account or cloud to declare.
	s.handle("GET", "/.well-known/databricks-config", Public, func(w http.ResponseWriter, r *http.Request) error {
		return writeRaw(w, []byte("{}"))
	})
}

// volumePathOp serves a Files API request that names a path, takes no
// query and answers with status and no body: delete a file, make, stat
// or delete a directory.
func (s *Server) volumePathOp(op func(context.Context, *workspace.Subject, volumes.Path) error, status int) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		p, err := volumePath(r)
		if err != nil {
			return err
		}
		if err := op(r.Context(), SubjectFromContext(r.Context()), p); err != nil {
			return err
		}
		checked(r)
		w.WriteHeader(status)
		return nil
	}
}

// maxUCPage is the largest page of a Unity Catalog listing (and the
// default).
const maxUCPage = 1000

// ucPage cuts a page out of items (sorted by name) after the page token,
// and returns the next page's token ("" at the end).
func ucPage[T any](q query, items []T, name func(T) string) ([]T, string, error) {
	n, _, err := q.int("max_results")
	if err != nil {
		return nil, "", err
	}
	if n < 0 {
		return nil, "", invalid("max_results must not be negative, got %d", n)
	}
	if n == 0 || n > maxUCPage {
		n = maxUCPage
	}
	after := ""
	if tok := q.str("page_token"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(b) == 0 {
			return nil, "", invalid("invalid page_token %q: pass the next_page_token of the previous page", errs.Truncate(tok, 60))
		}
		after = string(b)
	}
	i := 0
	for i < len(items) && after != "" && name(items[i]) <= after {
		i++
	}
	items = items[i:]
	next := ""
	if int64(len(items)) > n {
		items = items[:n]
		next = base64.RawURLEncoding.EncodeToString([]byte(name(items[n-1])))
	}
	return items, next, nil
}

func parseBool(q query, key string, def bool) (bool, error) {
	switch v := strings.ToLower(q.str(key)); v {
	case "":
		return def, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalid("Invalid value '%s' for parameter '%s': expected true or false", errs.Truncate(q.str(key), 40), key)
}

func (s *Server) createCatalog(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateCatalogRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	c, err := s.opts.Volumes.CreateCatalog(r.Context(), SubjectFromContext(r.Context()), req.Name, req.Comment)
	if err != nil {
		return err
	}
	return writeJSON(w, wire.ToCatalog(c))
}

func (s *Server) listCatalogs(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "max_results", "page_token", "include_browse")
	if err != nil {
		return err
	}
	cs, err := s.opts.Volumes.ListCatalogs(r.Context(), SubjectFromContext(r.Context()))
	if err != nil {
		return err
	}
	page, next, err := ucPage(q, cs, func(c *volumes.Catalog) string { return c.Name })
	if err != nil {
		return err
	}
	out := wire.CatalogsResponse{Catalogs: make([]wire.Catalog, len(page)), NextPageToken: next}
	for i, c := range page {
		out.Catalogs[i] = wire.ToCatalog(c)
	}
	return writeJSON(w, out)
}

func (s *Server) getCatalog(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, "include_browse"); err != nil {
		return err
	}
	c, err := s.opts.Volumes.GetCatalog(r.Context(), SubjectFromContext(r.Context()), r.PathValue("name"))
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToCatalog(c))
}

func (s *Server) deleteCatalog(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "force")
	if err != nil {
		return err
	}
	force, err := parseBool(q, "force", false)
	if err != nil {
		return err
	}
	if err := s.opts.Volumes.DeleteCatalog(r.Context(), SubjectFromContext(r.Context()), r.PathValue("name"), force); err != nil {
		return err
	}
	checked(r)
	return writeRaw(w, emptyObject)
}

func (s *Server) createSchema(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateSchemaRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	sc, err := s.opts.Volumes.CreateSchema(r.Context(), SubjectFromContext(r.Context()), req.CatalogName, req.Name, req.Comment)
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToSchema(sc))
}

func (s *Server) listSchemas(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "catalog_name", "max_results", "page_token", "include_browse")
	if err != nil {
		return err
	}
	if q.str("catalog_name") == "" {
		return invalid("catalog_name is required")
	}
	list, err := s.opts.Volumes.ListSchemas(r.Context(), SubjectFromContext(r.Context()), q.str("catalog_name"))
	if err != nil {
		return err
	}
	checked(r)
	page, next, err := ucPage(q, list, func(sc *volumes.Schema) string { return sc.Name })
	if err != nil {
		return err
	}
	out := wire.SchemasResponse{Schemas: make([]wire.Schema, len(page)), NextPageToken: next}
	for i, sc := range page {
		out.Schemas[i] = wire.ToSchema(sc)
	}
	return writeJSON(w, out)
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	names, err := volumes.SplitFullName("schema", r.PathValue("full_name"), 2)
	if err != nil {
		return err
	}
	sc, err := s.opts.Volumes.GetSchema(r.Context(), SubjectFromContext(r.Context()), names[0], names[1])
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToSchema(sc))
}

func (s *Server) deleteSchema(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "force")
	if err != nil {
		return err
	}
	force, err := parseBool(q, "force", false)
	if err != nil {
		return err
	}
	names, err := volumes.SplitFullName("schema", r.PathValue("full_name"), 2)
	if err != nil {
		return err
	}
	if err := s.opts.Volumes.DeleteSchema(r.Context(), SubjectFromContext(r.Context()), names[0], names[1], force); err != nil {
		return err
	}
	checked(r)
	return writeRaw(w, emptyObject)
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateVolumeRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if t := strings.ToUpper(req.VolumeType); t != "" && t != "MANAGED" {
		return invalid("volume_type %q is not supported: Sextant keeps the files of its (MANAGED) volumes in its own blob store", errs.Truncate(req.VolumeType, 40))
	}
	if req.StorageLocation != "" {
		return invalid("storage_location is not supported: Sextant keeps the files of its (MANAGED) volumes in its own blob store")
	}
	v, err := s.opts.Volumes.CreateVolume(r.Context(), SubjectFromContext(r.Context()), req.CatalogName, req.SchemaName, req.Name, req.Comment)
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToVolume(v))
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "catalog_name", "schema_name", "max_results", "page_token", "include_browse")
	if err != nil {
		return err
	}
	if q.str("catalog_name") == "" || q.str("schema_name") == "" {
		return invalid("catalog_name and schema_name are required")
	}
	list, err := s.opts.Volumes.ListVolumes(r.Context(), SubjectFromContext(r.Context()), q.str("catalog_name"), q.str("schema_name"))
	if err != nil {
		return err
	}
	checked(r)
	page, next, err := ucPage(q, list, func(v *volumes.Volume) string { return v.Name })
	if err != nil {
		return err
	}
	out := wire.VolumesResponse{Volumes: make([]wire.Volume, len(page)), NextPageToken: next}
	for i, v := range page {
		out.Volumes[i] = wire.ToVolume(v)
	}
	return writeJSON(w, out)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, "include_browse"); err != nil {
		return err
	}
	names, err := volumes.SplitFullName("volume", r.PathValue("full_name"), 3)
	if err != nil {
		return err
	}
	v, err := s.opts.Volumes.GetVolume(r.Context(), SubjectFromContext(r.Context()), names[0], names[1], names[2])
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToVolume(v))
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) error {
	names, err := volumes.SplitFullName("volume", r.PathValue("full_name"), 3)
	if err != nil {
		return err
	}
	if err := s.opts.Volumes.DeleteVolume(r.Context(), SubjectFromContext(r.Context()), names[0], names[1], names[2]); err != nil {
		return err
	}
	checked(r)
	return writeRaw(w, emptyObject)
}

// ---- updates (PATCH) ----

// decodeUpdate reads the body of a Unity Catalog PATCH: new_name, comment
// and owner, each optional.
func (s *Server) decodeUpdate(w http.ResponseWriter, r *http.Request) (volumes.Update, error) {
	var req wire.UpdateRequest
	if err := s.decode(w, r, &req); err != nil {
		return volumes.Update{}, err
	}
	return volumes.Update{NewName: req.NewName, Comment: req.Comment, Owner: req.Owner}, nil
}

func (s *Server) updateCatalog(w http.ResponseWriter, r *http.Request) error {
	u, err := s.decodeUpdate(w, r)
	if err != nil {
		return err
	}
	c, err := s.opts.Volumes.UpdateCatalog(r.Context(), SubjectFromContext(r.Context()), r.PathValue("name"), u)
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToCatalog(c))
}

func (s *Server) updateSchema(w http.ResponseWriter, r *http.Request) error {
	names, err := volumes.SplitFullName("schema", r.PathValue("full_name"), 2)
	if err != nil {
		return err
	}
	u, err := s.decodeUpdate(w, r)
	if err != nil {
		return err
	}
	sc, err := s.opts.Volumes.UpdateSchema(r.Context(), SubjectFromContext(r.Context()), names[0], names[1], u)
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToSchema(sc))
}

func (s *Server) updateVolume(w http.ResponseWriter, r *http.Request) error {
	names, err := volumes.SplitFullName("volume", r.PathValue("full_name"), 3)
	if err != nil {
		return err
	}
	u, err := s.decodeUpdate(w, r)
	if err != nil {
		return err
	}
	v, err := s.opts.Volumes.UpdateVolume(r.Context(), SubjectFromContext(r.Context()), names[0], names[1], names[2], u)
	if err != nil {
		return err
	}
	checked(r)
	return writeJSON(w, wire.ToVolume(v))
}

// ---- the Files API ----

// volumePath returns the volume path of a Files API request: the URL path
// after /Volumes/, percent-decoded once.
func volumePath(r *http.Request) (volumes.Path, error) {
	return volumes.ParsePath(volumes.Root + "/" + r.PathValue("path"))
}

func (s *Server) putVolumeFile(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "overwrite", "upload_type", "session_token", "part_number")
	if err != nil {
		return err
	}
	if q.has("upload_type") || q.has("session_token") || q.has("part_number") {
		return s.putVolumePart(w, r, q)
	}
	// As the Files API: true when unspecified.
	overwrite, err := parseBool(q, "overwrite", true)
	if err != nil {
		return err
	}
	p, err := volumePath(r)
	if err != nil {
		return err
	}
	if _, err := s.opts.Volumes.PutFile(r.Context(), SubjectFromContext(r.Context()), p, r.Body, r.ContentLength, overwrite); err != nil {
		return bodyError(err)
	}
	checked(r)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// fileHeaders sets the headers a file's download and metadata share.
func fileHeaders(h http.Header, info volumes.FileInfo) {
	h.Set("Content-Type", "application/octet-stream")
	downloadHeaders(h, info.Path.Name())
	h.Set("Accept-Ranges", "bytes")
	h.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	if info.ETag != "" {
		h.Set("ETag", strconv.Quote(info.ETag))
	}
}

// unmodifiedSince checks an If-Unmodified-Since header (ignored when it
// does not parse, as RFC 9110 says).
func unmodifiedSince(r *http.Request, info volumes.FileInfo) error {
	v := r.Header.Get("If-Unmodified-Since")
	if v == "" {
		return nil
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return nil
	}
	if info.ModTime.Truncate(time.Second).After(t) {
		return errs.Errorf(errs.PreconditionFailed, "%s was modified at %s, after If-Unmodified-Since %s", info.Path, info.ModTime.UTC().Format(http.TimeFormat), v)
	}
	return nil
}

func (s *Server) getVolumeFile(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r); err != nil {
		return err
	}
	p, err := volumePath(r)
	if err != nil {
		return err
	}
	ctx, sub := r.Context(), SubjectFromContext(r.Context())
	h := w.Header()
	if r.Method == http.MethodHead {
		info, err := s.opts.Volumes.StatFile(ctx, sub, p)
		if err != nil {
			return err
		}
		if err := unmodifiedSince(r, info); err != nil {
			return err
		}
		checked(r)
		fileHeaders(h, info)
		h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
		w.WriteHeader(http.StatusOK)
		return nil
	}
	var offset, length int64
	var partial bool
	var rc io.ReadCloser
	var info volumes.FileInfo
	if r.Header.Get("Range") == "" {
		// The whole file: one open, whichever version it finds.
		rc, info, err = s.opts.Volumes.OpenWholeFile(ctx, sub, p, func(info volumes.FileInfo) error { return unmodifiedSince(r, info) })
		length = info.Size
	} else {
		rc, info, err = s.opts.Volumes.OpenFile(ctx, sub, p, func(info volumes.FileInfo) (int64, int64, error) {
			if err := unmodifiedSince(r, info); err != nil {
				return 0, 0, err
			}
			var err error
			offset, length, partial, err = parseRange(r.Header.Get("Range"), info.Size)
			if err != nil {
				h.Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
			}
			return offset, length, err
		})
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	checked(r)
	fileHeaders(h, info)
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", offset, offset+length-1, info.Size))
	}
	w.WriteHeader(status)
	// The headers are out: write the body to the connection's own writer,
	// whose ReadFrom lets a file go out with sendfile.
	if n, err := io.Copy(innermost(w), rc); err != nil || n != length {
		s.log.Warn("volume file download cut short", "path", p.String(), "sent", n, "want", length, "err", err, "request_id", RequestIDFromContext(ctx))
		panic(http.ErrAbortHandler)
	}
	return nil
}

// noQuery refuses query parameters on a route that takes none.
func noQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	if _, err := parseQuery(r); err != nil {
		return invalid("this endpoint takes no query parameters (got %q)", errs.Truncate(r.URL.RawQuery, 80))
	}
	return nil
}

// innermost returns the http.ResponseWriter under the server's wrappers.
func innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

func (s *Server) listVolumeDir(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "page_size", "page_token")
	if err != nil {
		return err
	}
	size, _, err := q.int("page_size")
	if err != nil {
		return err
	}
	if size < 0 {
		return invalid("page_size must not be negative, got %d", size)
	}
	p, err := volumePath(r)
	if err != nil {
		return err
	}
	entries, next, err := s.opts.Volumes.ListDir(r.Context(), SubjectFromContext(r.Context()), p, q.str("page_token"), int(min(size, volumes.MaxPageSize)))
	if err != nil {
		return err
	}
	checked(r)
	out := wire.DirListing{Contents: make([]wire.DirEntry, len(entries)), NextPageToken: next}
	for i, e := range entries {
		out.Contents[i] = wire.DirEntry{Path: p.Join(e.Name).String(), Name: e.Name, IsDirectory: e.IsDir}
		if !e.IsDir {
			size := e.Size
			out.Contents[i].FileSize = &size
			out.Contents[i].LastModified = e.ModTime.UnixMilli()
		}
	}
	return writeJSON(w, out)
}
