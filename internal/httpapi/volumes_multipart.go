package httpapi

import (
	"net/http"
	"strings"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
)

// Multipart uploads through the Files API, in the shape the Databricks SDK
// for Python speaks to a Files API 2.0 host that announces multipart
// support (GET /api/2.0/fs/endpoints):
//
//	POST /api/2.0/fs/files{path}?action=initiate-upload[&overwrite=]
//	     -> {"multipart_upload": {"session_token": T}}
//	PUT  /api/2.0/fs/files{path}?upload_type=multipart&session_token=T&part_number=N
//	     (the part as the body) -> 200, ETag header
//	POST /api/2.0/fs/files{path}?action=complete-upload&upload_type=multipart&session_token=T
//	     {"parts": [{"part_number": N, "etag": E}, ...]}
//	POST /api/2.0/fs/files{path}?action=abort-upload&upload_type=multipart&session_token=T
//
// Without it the SDK sends files over 5 GiB nowhere, and smaller large
// files as one request.

// fsEndpoints announces this host's Files API, with multipart uploads, to
// the Databricks SDK: its scheme and host are the ones the request came
// in by (a proxy that terminates TLS sets X-Forwarded-Proto).
func (s *Server) fsEndpoints(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r); err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return writeJSON(w, wire.FSEndpoints{Endpoints: []wire.FSEndpoint{{API: "FILES_API", APIVersion: "2.0", Scheme: scheme, Hostname: r.Host, MultipartUploadSupported: true}}})
}

// postVolumeFile serves the multipart actions on a file.
func (s *Server) postVolumeFile(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "action", "overwrite", "upload_type", "session_token")
	if err != nil {
		return err
	}
	p, err := volumePath(r)
	if err != nil {
		return err
	}
	ctx, sub := r.Context(), SubjectFromContext(r.Context())
	action := q.str("action")
	var token string
	if action != "initiate-upload" {
		if token, err = sessionToken(q); err != nil {
			return err
		}
	}
	switch action {
	case "initiate-upload":
		overwrite, err := parseBool(q, "overwrite", true)
		if err != nil {
			return err
		}
		token, err := s.opts.Volumes.InitiateUpload(ctx, sub, p, overwrite)
		if err != nil {
			return err
		}
		checked(r)
		var out wire.MultipartUpload
		out.MultipartUpload.SessionToken = token
		return writeJSON(w, out)
	case "complete-upload":
		var req wire.CompleteUploadRequest
		if err := s.decode(w, r, &req); err != nil {
			return err
		}
		parts := make([]blob.Part, len(req.Parts))
		for i, pt := range req.Parts {
			parts[i] = blob.Part{Number: int(pt.PartNumber.V), ETag: pt.ETag}
		}
		if _, err := s.opts.Volumes.CompleteUpload(ctx, sub, p, token, parts); err != nil {
			return err
		}
		checked(r)
		return writeRaw(w, []byte("{}"))
	case "abort-upload":
		if err := s.opts.Volumes.AbortUpload(ctx, sub, p, token); err != nil {
			return err
		}
		checked(r)
		return writeRaw(w, []byte("{}"))
	}
	return invalid("Invalid value '%s' for parameter 'action': expected initiate-upload, complete-upload or abort-upload", errs.Truncate(action, 40))
}

// putVolumePart stores one part of a multipart upload.
func (s *Server) putVolumePart(w http.ResponseWriter, r *http.Request, q query) error {
	token, err := sessionToken(q)
	if err != nil {
		return err
	}
	n, err := partNumber(q)
	if err != nil {
		return err
	}
	p, err := volumePath(r)
	if err != nil {
		return err
	}
	etag, err := s.opts.Volumes.UploadPart(r.Context(), SubjectFromContext(r.Context()), p, token, n, r.Body, r.ContentLength)
	if err != nil {
		return bodyError(err)
	}
	checked(r)
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	return nil
}

// sessionToken returns the session_token of a request about an open
// multipart upload (upload_type=multipart).
func sessionToken(q query) (string, error) {
	if t := q.str("upload_type"); t != "multipart" {
		return "", invalid("Invalid value '%s' for parameter 'upload_type': only multipart uploads are served", errs.Truncate(t, 40))
	}
	token := q.str("session_token")
	if token == "" {
		return "", invalid("Missing value for required parameter 'session_token'")
	}
	return token, nil
}

// partNumber reads a multipart request's part_number (1 to 10,000).
func partNumber(q query) (int, error) {
	n, ok, err := q.int("part_number")
	if err != nil {
		return 0, err
	}
	if !ok || n < 1 || n > blob.MaxPartNumber {
		return 0, invalid("part_number must be between 1 and %d", blob.MaxPartNumber)
	}
	return int(n), nil
}
