package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
	"github.com/sextant/sextant/internal/workspace"
)

// The MLflow artifact proxy (/api/2.0/mlflow-artifacts): the mlflow client
// uploads and downloads run and model files through it when experiments
// have mlflow-artifacts:/ locations. Bodies stream in both directions, so
// memory stays flat whatever the file size.

const artifactsPrefix = "/api/2.0/mlflow-artifacts/artifacts"

// uploadTokenHeader carries the capability of a multipart part upload.
const uploadTokenHeader = "X-Sextant-Upload-Token"

func (s *Server) registerArtifactRoutes() {
	for _, p := range []string{"/api/2.0", "/ajax-api/2.0"} {
		s.handle("PUT", p+"/mlflow-artifacts/artifacts/{path...}", EditExperiment, s.uploadArtifact)
		s.handle("GET", p+"/mlflow-artifacts/artifacts/{path...}", ReadExperiment, s.downloadArtifact)
		s.handle("GET", p+"/mlflow-artifacts/artifacts", ReadExperiment, s.listArtifacts)
		s.handle("DELETE", p+"/mlflow-artifacts/artifacts/{path...}", ManageExperiment, s.deleteArtifact)
		s.handle("POST", p+"/mlflow-artifacts/mpu/create/{path...}", EditExperiment, s.createMultipart)
		s.handle("POST", p+"/mlflow-artifacts/mpu/complete/{path...}", EditExperiment, s.completeMultipart)
		s.handle("POST", p+"/mlflow-artifacts/mpu/abort/{path...}", EditExperiment, s.abortMultipart)
		s.handle("PUT", p+"/mlflow-artifacts/mpu/part/{path...}", SignedCapability, s.uploadPart)
	}
	s.handle("GET", "/mlflow/artifacts/list", ReadExperiment, s.listRunArtifacts)
}

// artifactPath returns the artifact path of a request: the URL path after
// the route's prefix, percent-decoded once.
func artifactPath(r *http.Request) string { return r.PathValue("path") }

func (s *Server) uploadArtifact(w http.ResponseWriter, r *http.Request) error {
	if err := s.allowArtifactPath(r, artifactPath(r)); err != nil {
		return err
	}
	if _, err := s.art.Upload(r.Context(), artifactPath(r), r.Body, r.ContentLength); err != nil {
		return bodyError(err)
	}
	return writeRaw(w, emptyObject)
}

// bodyError explains an upload that failed because the client's body did.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &errs.Error{Code: errs.LimitExceeded, Msg: "upload exceeds the size limit", Err: errBodyTooLarge}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errs.Wrap(errs.Invalid, err, "the upload was cut off before its Content-Length; nothing was stored")
	}
	return err
}

// contentType guesses an artifact's type from its name. Types a browser
// would render or run are served as plain text: artifacts are user data.
func contentType(name string) string {
	t := mime.TypeByExtension(path.Ext(name))
	switch {
	case t == "":
		switch path.Base(name) {
		case "MLmodel", "Dockerfile", "LICENSE", "README":
			return "text/plain; charset=utf-8"
		}
		return "application/octet-stream"
	case strings.HasPrefix(t, "text/html"), strings.Contains(t, "javascript"), strings.HasPrefix(t, "image/svg"), strings.Contains(t, "xml"):
		return "text/plain; charset=utf-8"
	}
	return t
}

// downloadHeaders sets what every download of user data carries (artifacts,
// workspace files, volume files): the browser must neither guess another
// type from the bytes (nosniff) nor render them in the server's origin
// (attachment), where a planted HTML file could act as the signed-in user.
func downloadHeaders(h http.Header, name string) {
	h.Set("X-Content-Type-Options", "nosniff")
	d := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	if d == "" {
		d = "attachment" // a name the header cannot carry
	}
	h.Set("Content-Disposition", d)
}

func (s *Server) downloadArtifact(w http.ResponseWriter, r *http.Request) error {
	p := artifactPath(r)
	if err := s.allowArtifactPath(r, p); err != nil {
		return err
	}
	// For a range, stat the blob, open the range, then check that the
	// version opened is the one whose size the range was computed from: a
	// concurrent overwrite between the two must not mix versions.
	var (
		rc             io.ReadCloser
		info           blob.Info
		offset, length int64
		partial        bool
	)
	// Without a Range header one open serves the whole of one version: no
	// stat to agree with, so overwrites in a loop cannot starve the read.
	if r.Header.Get("Range") == "" {
		var err error
		if rc, info, err = s.art.Open(r.Context(), p, 0, -1); err != nil {
			return err
		}
		length = info.Size
	}
	for attempt := 0; rc == nil; attempt++ {
		st, err := s.art.Stat(r.Context(), p)
		if err != nil {
			return err
		}
		offset, length, partial, err = parseRange(r.Header.Get("Range"), st.Size)
		if err != nil {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", st.Size))
			return err
		}
		rc, info, err = s.art.Open(r.Context(), p, offset, length)
		if err != nil {
			return err
		}
		if info.Size == st.Size && info.ETag == st.ETag {
			break
		}
		rc.Close()
		if attempt == 4 {
			return errs.E(errs.Unavailable, "the artifact is being rewritten, retry")
		}
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", contentType(p))
	downloadHeaders(h, path.Base(p))
	if info.ETag != "" {
		h.Set("ETag", strconv.Quote(info.ETag))
	}
	if !info.ModTime.IsZero() {
		h.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	}
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", offset, offset+length-1, info.Size))
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return nil
	}
	w.WriteHeader(status)
	if n, err := io.Copy(w, rc); err != nil || n != length {
		// Headers are out: abort the connection so the client cannot take
		// a short body for the whole file.
		s.log.Warn("artifact download cut short", "path", p, "sent", n, "want", length, "err", err, "request_id", RequestIDFromContext(r.Context()))
		panic(http.ErrAbortHandler)
	}
	return nil
}

// errRange is a Range header that cannot be satisfied.
var errRange = errors.New("unsatisfiable range")

// parseRange reads a single-range "bytes=" header. It returns the whole
// blob (partial false) when there is no header or it asks for several
// ranges, which HTTP allows a server to ignore.
func parseRange(h string, size int64) (offset, length int64, partial bool, err error) {
	if h == "" {
		return 0, size, false, nil
	}
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, false, nil
	}
	bad := &errs.Error{Code: errs.Invalid, Msg: fmt.Sprintf("Range %q cannot be satisfied for a file of %d bytes", errs.Truncate(h, 60), size), Err: errRange}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, 0, false, bad
	}
	if first == "" { // suffix: the last N bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false, bad
		}
		n = min(n, size)
		return size - n, n, true, nil
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false, bad
	}
	end := size - 1
	if last != "" {
		e, err := strconv.ParseInt(last, 10, 64)
		if err != nil || e < start {
			return 0, 0, false, bad
		}
		end = min(e, size-1)
	}
	return start, end - start + 1, true, nil
}

type wireFileInfo struct {
	Path     string `json:"path"`
	IsDir    bool   `json:"is_dir"`
	FileSize *int64 `json:"file_size,omitempty"`
}

func toWireFiles(files []artifacts.FileInfo, prefix string) []wireFileInfo {
	out := make([]wireFileInfo, 0, len(files))
	for _, f := range files {
		wf := wireFileInfo{Path: f.Path, IsDir: f.IsDir}
		if prefix != "" {
			wf.Path = prefix + "/" + f.Path
		}
		if !f.IsDir {
			size := f.Size
			wf.FileSize = &size
		}
		out = append(out, wf)
	}
	return out
}

func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "path")
	if err != nil {
		return err
	}
	// Cleaned first, so that "<exp>/<run>/artifacts/." is checked and
	// listed as the directory it names.
	p, err := artifacts.CleanPath(q.str("path"))
	if err != nil {
		return err
	}
	if err := s.allowArtifactPath(r, p); err != nil {
		return err
	}
	files, err := s.art.List(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"files": toWireFiles(files, "")})
}

func (s *Server) deleteArtifact(w http.ResponseWriter, r *http.Request) error {
	if err := s.allowArtifactPath(r, artifactPath(r)); err != nil {
		return err
	}
	if err := s.art.Delete(r.Context(), artifactPath(r)); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

// listRunArtifacts is MLflow's run-level listing: paths relative to the
// run's artifact root.
func (s *Server) listRunArtifacts(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "run_id", "run_uuid", "path", "page_token")
	if err != nil {
		return err
	}
	id, err := runID(q.str("run_id"), q.str("run_uuid"))
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	run, err := s.tr.GetRun(r.Context(), id)
	if err != nil {
		return err
	}
	root, ok := strings.CutPrefix(run.Info.ArtifactURI, "mlflow-artifacts:")
	if !ok {
		return errs.Errorf(errs.Invalid, "run %s stores its artifacts at %s, outside this server", run.Info.RunID, run.Info.ArtifactURI)
	}
	root = strings.Trim(root, "/")
	sub, err := artifacts.CleanPath(q.str("path"))
	if err != nil {
		return err
	}
	dir := root
	if sub != "" {
		dir = root + "/" + sub
	}
	files, err := s.art.List(r.Context(), dir)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"root_uri": run.Info.ArtifactURI, "files": toWireFiles(files, sub)})
}

// baseURL is the server's URL as the client reached it.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func (s *Server) createMultipart(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path     string   `json:"path"`
		NumParts wire.Int `json:"num_parts"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.NumParts.V < 1 || req.NumParts.V > blob.MaxPartNumber {
		return invalid("num_parts must be between 1 and %d, got %d", blob.MaxPartNumber, req.NumParts.V)
	}
	dest, err := artifacts.MultipartDest(artifactPath(r), req.Path)
	if err != nil {
		return err
	}
	if err := s.allowArtifactPath(r, dest); err != nil {
		return err
	}
	id, err := s.art.CreateMultipart(r.Context(), dest)
	if err != nil {
		return err
	}
	type credential struct {
		URL        string            `json:"url"`
		PartNumber int64             `json:"part_number"`
		Headers    map[string]string `json:"headers"`
	}
	token := s.art.PartToken(dest, id, SubjectFromContext(r.Context()).User.ID)
	base := baseURL(r) + "/api/2.0/mlflow-artifacts/mpu/part/" + escapePath(dest) + "?upload_id=" + url.QueryEscape(id) + "&part_number="
	creds := make([]credential, req.NumParts.V)
	for i := range creds {
		n := int64(i + 1)
		creds[i] = credential{URL: base + strconv.FormatInt(n, 10), PartNumber: n, Headers: map[string]string{uploadTokenHeader: token}}
	}
	return writeJSON(w, map[string]any{"upload_id": id, "credentials": creds})
}

// uploadPart receives one part. The client sends it without credentials
// (the URL was made for presigned object-store uploads), so the signed
// token in the header authorises it: it names the user who started the
// upload, who must still be enabled and still have CAN_EDIT on the
// experiment, checked again for every part.
func (s *Server) uploadPart(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "upload_id", "part_number")
	if err != nil {
		return err
	}
	p, id := artifactPath(r), q.str("upload_id")
	clean, err := artifacts.CleanPath(p)
	if err != nil {
		return err
	}
	userID, err := s.art.CheckPartToken(clean, id, r.Header.Get(uploadTokenHeader))
	if err != nil {
		return err
	}
	if err := s.allowPartUser(r, clean, userID); err != nil {
		return err
	}
	n, err := partNumber(q)
	if err != nil {
		return err
	}
	etag, err := s.art.PutPart(r.Context(), clean, id, n, r.Body, r.ContentLength)
	if err != nil {
		return bodyError(err)
	}
	w.Header().Set("ETag", etag)
	return writeRaw(w, emptyObject)
}

func (s *Server) completeMultipart(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path     string `json:"path"`
		UploadID string `json:"upload_id"`
		Parts    []struct {
			PartNumber wire.Int `json:"part_number"`
			ETag       string   `json:"etag"`
			URL        string   `json:"url"`
		} `json:"parts"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	dest, err := artifacts.MultipartDest(artifactPath(r), req.Path)
	if err != nil {
		return err
	}
	if err := s.allowArtifactPath(r, dest); err != nil {
		return err
	}
	parts := make([]blob.Part, len(req.Parts))
	for i, p := range req.Parts {
		parts[i] = blob.Part{Number: int(p.PartNumber.V), ETag: strings.Trim(p.ETag, `"`)}
	}
	if err := s.art.CompleteMultipart(r.Context(), dest, req.UploadID, parts); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) abortMultipart(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path     string `json:"path"`
		UploadID string `json:"upload_id"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	dest, err := artifacts.MultipartDest(artifactPath(r), req.Path)
	if err != nil {
		return err
	}
	if err := s.allowArtifactPath(r, dest); err != nil {
		return err
	}
	if err := s.art.AbortMultipart(r.Context(), dest, req.UploadID); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

// allowPartUser checks that the user a part token names may still write
// the artifact at p: a user deleted or disabled since, or whose CAN_EDIT
// on the experiment was taken away, uploads no more parts (403).
func (s *Server) allowPartUser(r *http.Request, p string, userID int64) error {
	var sub *workspace.Subject
	if userID == workspace.LocalAdmin().User.ID {
		// Handed out in single-user mode; worth nothing once sign-in is on.
		if s.opts.Auth != AuthOff {
			return errs.E(errs.PermissionDenied, "this upload was started before sign-in was required: start it again")
		}
		sub = workspace.LocalAdmin()
	} else {
		var err error
		if sub, err = s.ws.ActiveSubject(r.Context(), userID); err != nil {
			if errs.Is(err, errs.Unauthenticated) {
				return errs.Wrap(errs.PermissionDenied, err, "the user who started this upload can no longer upload: "+errs.MessageOf(err))
			}
			return err
		}
	}
	exp := artifacts.ExperimentOf(p)
	if exp == "" {
		return s.ws.Authorize(r.Context(), sub, workspace.OpReachArtifactStore, workspace.Resource{})
	}
	return s.ws.CheckExperiment(r.Context(), sub, exp, workspace.CanEdit)
}
