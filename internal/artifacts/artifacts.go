// Package artifacts is the MLflow artifact proxy's domain: it maps artifact
// paths (as the mlflow client sends them to /api/2.0/mlflow-artifacts) to
// blob keys, refuses unsafe paths, and signs the part URLs of multipart
// uploads. Bytes stream straight between the HTTP edge and the blob store.
package artifacts

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// Options configure a Service.
type Options struct {
	// Secret signs multipart part URLs; it must stay the same across
	// restarts (and replicas) for uploads in progress to continue. Required.
	Secret []byte
	// PartTokenTTL is how long a multipart upload's part token is valid
	// after the upload starts; 0 means DefaultPartTokenTTL.
	PartTokenTTL time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// DefaultPartTokenTTL is how long part tokens are valid by default: long
// enough for a very large upload on a slow link, short enough that a
// leaked token does not last.
const DefaultPartTokenTTL = 24 * time.Hour

// Service serves artifacts from a blob store. Artifact paths are the blob
// keys: "<experiment id>/<run id>/artifacts/<file>" for run artifacts and
// "<experiment id>/models/<model id>/artifacts/<file>" for logged models,
// as the experiments' mlflow-artifacts:/<id> locations make the client send.
type Service struct {
	blobs  blob.Store
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// New returns a Service over blobs.
func New(blobs blob.Store, opts Options) *Service {
	if opts.PartTokenTTL <= 0 {
		opts.PartTokenTTL = DefaultPartTokenTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{blobs: blobs, secret: opts.Secret, ttl: opts.PartTokenTTL, now: opts.Now}
}

// FileInfo is one entry of a listing, as MLflow returns it.
type FileInfo struct {
	// Path is the entry's name relative to the listed directory.
	Path  string
	IsDir bool
	// Size is a file's length; 0 for a directory.
	Size int64
}

// CleanPath checks an artifact path and returns it without surrounding
// slashes and '.' segments: as to MLflow, "dir/." and "./dir" are the
// directory itself (the client lists "<root>/." for download_artifacts(run,
// ".")). Like MLflow, it refuses '#', '..' segments, absolute paths and
// backslashes; and it refuses what blob keys cannot hold (control
// characters, empty segments, over-long names). The error's message is
// MLflow's, "Invalid path"; what was wrong goes to its cause, for logs.
func CleanPath(p string) (string, error) {
	if strings.ContainsAny(p, "#\\") || strings.Contains(p, "%23") {
		return "", invalidPath(p, "it contains '#' or a backslash")
	}
	if strings.HasPrefix(p, "/") {
		return "", invalidPath(p, "it is absolute")
	}
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" {
		return "", nil
	}
	segs := strings.Split(trimmed, "/")
	kept := segs[:0]
	for _, seg := range segs {
		switch seg {
		case "..":
			return "", invalidPath(p, "it contains a '..' segment")
		case ".":
			continue
		}
		kept = append(kept, seg)
	}
	if len(kept) < len(segs) {
		trimmed = strings.Join(kept, "/")
		if trimmed == "" {
			return "", nil
		}
	}
	if err := blob.ValidateKey(trimmed); err != nil {
		return "", invalidPath(p, errs.MessageOf(err))
	}
	return trimmed, nil
}

// invalidPath is MLflow's "Invalid path", with what was wrong as its cause.
func invalidPath(p, why string) error {
	return &errs.Error{Code: errs.Invalid, Msg: "Invalid path", Err: fmt.Errorf("%q: %s", errs.Truncate(p, 200), why)}
}

func fileKey(p string) (string, error) {
	k, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	if k == "" {
		return "", errs.E(errs.Invalid, "Invalid path: an artifact path is required")
	}
	return k, nil
}

// Upload stores r under path; size is the body's length or -1.
func (s *Service) Upload(ctx context.Context, p string, r io.Reader, size int64) (int64, error) {
	k, err := fileKey(p)
	if err != nil {
		return 0, err
	}
	return s.blobs.Put(ctx, k, r, size)
}

// Open returns a reader of the bytes [offset, offset+length) of the
// artifact at path (length -1: to the end) and its info.
func (s *Service) Open(ctx context.Context, p string, offset, length int64) (io.ReadCloser, blob.Info, error) {
	k, err := fileKey(p)
	if err != nil {
		return nil, blob.Info{}, err
	}
	return s.blobs.Open(ctx, k, offset, length)
}

// Stat returns the info of the artifact at path.
func (s *Service) Stat(ctx context.Context, p string) (blob.Info, error) {
	k, err := fileKey(p)
	if err != nil {
		return blob.Info{}, err
	}
	return s.blobs.Stat(ctx, k)
}

// List returns the immediate children of the directory at path. A file
// path or a missing one gives an empty list, as MLflow's proxy does.
func (s *Service) List(ctx context.Context, p string) ([]FileInfo, error) {
	k, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	prefix := ""
	if k != "" {
		prefix = k + "/"
	}
	var out []FileInfo
	after := ""
	for {
		entries, err := s.blobs.List(ctx, prefix, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			out = append(out, FileInfo{Path: strings.TrimSuffix(e.Name, "/"), IsDir: e.IsDir, Size: e.Size})
		}
		if len(entries) < 1000 {
			return out, nil
		}
		after = entries[len(entries)-1].Name
	}
}

// Delete removes the artifact at path, or everything under it when it is
// a directory.
func (s *Service) Delete(ctx context.Context, p string) error {
	k, err := fileKey(p)
	if err != nil {
		return err
	}
	if err := s.blobs.Delete(ctx, k); err != nil && !errs.Is(err, errs.Conflict) {
		return err
	}
	return s.blobs.DeleteAll(ctx, k+"/")
}

// MultipartDest returns where a multipart upload of localFile into the
// artifact directory dir lands: the client sends the directory in the URL
// and its local file name in the body, as with S3.
func MultipartDest(dir, localFile string) (string, error) {
	d, err := CleanPath(dir)
	if err != nil {
		return "", err
	}
	base := path.Base(strings.ReplaceAll(localFile, "\\", "/"))
	if base == "" || base == "." || base == "/" {
		return "", errs.E(errs.Invalid, "Invalid path: the multipart upload names no file")
	}
	if d == "" {
		return fileKey(base)
	}
	return fileKey(d + "/" + base)
}

// CreateMultipart starts a multipart upload to the artifact at path.
func (s *Service) CreateMultipart(ctx context.Context, p string) (string, error) {
	k, err := fileKey(p)
	if err != nil {
		return "", err
	}
	return s.blobs.CreateMultipart(ctx, k)
}

// PartToken is the capability that authorises uploading the parts of one
// upload: part URLs are called without the client's credentials (they are
// built for presigned object-store URLs), so the token travels in a header
// of the credential instead. It names the user who started the upload and
// when it expires (PartTokenTTL from now), and is signed with the secret:
//
//	v2.<user id>.<expiry, Unix seconds>.<hex HMAC-SHA256 of the version,
//	user id, expiry, path and upload id>
//
// It is no credential on its own: every part checks that the user it
// names may still write the experiment (CheckPartToken returns the user).
func (s *Service) PartToken(p, uploadID string, userID int64) string {
	exp := s.now().Add(s.ttl).Unix()
	return partTokenPrefix + strconv.FormatInt(userID, 10) + "." + strconv.FormatInt(exp, 10) + "." + s.sign(p, uploadID, userID, exp)
}

const partTokenPrefix = "v2."

func (s *Service) sign(p, uploadID string, userID, exp int64) string {
	m := hmac.New(sha256.New, s.secret)
	for _, f := range []string{partTokenPrefix, strconv.FormatInt(userID, 10), strconv.FormatInt(exp, 10), p, uploadID} {
		m.Write([]byte(f))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// CheckPartToken verifies a part-upload token for the upload uploadID of
// path p and returns the id of the user it names, who must then be checked
// (still enabled, still allowed to write). A token for another upload,
// forged, from before tokens named their user, or expired is
// errs.PermissionDenied.
func (s *Service) CheckPartToken(p, uploadID, token string) (userID int64, err error) {
	bad := errs.E(errs.PermissionDenied, "invalid or missing upload token for this multipart upload part")
	rest, ok := strings.CutPrefix(token, partTokenPrefix)
	if !ok {
		return 0, bad
	}
	f := strings.Split(rest, ".")
	if len(f) != 3 {
		return 0, bad
	}
	user, err1 := strconv.ParseInt(f[0], 10, 64)
	exp, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || !hmac.Equal([]byte(s.sign(p, uploadID, user, exp)), []byte(f[2])) {
		return 0, bad
	}
	if now := s.now(); now.Unix() >= exp {
		return 0, errs.Errorf(errs.PermissionDenied, "the upload token of this multipart upload expired at %s (tokens last %s): start the upload again",
			time.Unix(exp, 0).UTC().Format(time.RFC3339), s.ttl)
	}
	return user, nil
}

// PutPart stores one part of an upload.
func (s *Service) PutPart(ctx context.Context, p, uploadID string, part int, r io.Reader, size int64) (string, error) {
	k, err := fileKey(p)
	if err != nil {
		return "", err
	}
	if size < 0 {
		return "", errs.E(errs.Invalid, "a multipart upload part needs a Content-Length")
	}
	return s.blobs.PutPart(ctx, k, uploadID, part, r, size)
}

// CompleteMultipart publishes an upload's parts as the artifact at path.
func (s *Service) CompleteMultipart(ctx context.Context, p, uploadID string, parts []blob.Part) error {
	k, err := fileKey(p)
	if err != nil {
		return err
	}
	_, err = s.blobs.CompleteMultipart(ctx, k, uploadID, parts)
	return err
}

// AbortMultipart drops an upload.
func (s *Service) AbortMultipart(ctx context.Context, p, uploadID string) error {
	k, err := fileKey(p)
	if err != nil {
		return err
	}
	return s.blobs.AbortMultipart(ctx, k, uploadID)
}

// ExperimentOf returns the experiment id an artifact path belongs to (its
// first segment), for permission checks; "" when it has none.
func ExperimentOf(p string) string {
	first, _, _ := strings.Cut(strings.Trim(p, "/"), "/")
	if _, err := strconv.ParseInt(first, 10, 64); err != nil {
		return ""
	}
	return first
}
