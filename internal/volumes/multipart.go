package volumes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// Multipart uploads of one file, as the Databricks SDK runs them for large
// files: initiate, parts in any order and in parallel, complete (or
// abort). The parts go to the blob store's own multipart upload, and the
// upload holds a claim on the file from initiate to complete, renewed by
// every part, so that a .metadata waits for it like for any upload. Every
// call checks CAN_EDIT on the volume again. The session token carries the
// blob store's upload ID, the claim and overwrite; it is no credential.

// uploadSession is what a session token encodes.
type uploadSession struct {
	UploadID  string `json:"u"`
	Claim     int64  `json:"c"`
	Overwrite bool   `json:"o"`
}

func (u uploadSession) token() string {
	b, _ := json.Marshal(u)
	return base64.RawURLEncoding.EncodeToString(b)
}

// claim is the session's claim on p in v.
func (u uploadSession) claim(v *Volume, p Path) *Upload {
	return &Upload{ID: u.Claim, VolumeID: v.ID, Dir: p.Dir().Rel, Name: p.Name()}
}

func parseSession(token string) (uploadSession, error) {
	var u uploadSession
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &u)
	}
	if err != nil || u.UploadID == "" {
		return u, errs.Errorf(errs.Invalid, "invalid session_token: it is not one this server handed out")
	}
	return u, nil
}

// InitiateUpload starts a multipart upload of the file p (CAN_EDIT) and
// returns its session token. With overwrite false an existing file, or
// one being uploaded, is errs.AlreadyExists.
func (s *Service) InitiateUpload(ctx context.Context, sub *workspace.Subject, p Path, overwrite bool) (string, error) {
	if p.Rel == "" {
		return "", errs.Errorf(errs.Invalid, "%s is the root of a volume, not a file path", p)
	}
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	if err != nil {
		return "", err
	}
	if err := s.checkFileSlot(ctx, v, p); err != nil {
		return "", err
	}
	if err := s.refuseExisting(ctx, v, p, overwrite); err != nil {
		return "", err
	}
	// No one request carries a multipart upload: its claim belongs to no
	// server instance, and expires uploadClaimTTL after its last part.
	claim, err := s.claimUpload(ctx, v, p, overwrite, "")
	if err != nil {
		return "", err
	}
	id, err := s.blobs.CreateMultipart(ctx, blobKey(v, p.Rel))
	if err != nil {
		s.releaseClaim(ctx, claim, false)
		return "", fileError(err, p)
	}
	return uploadSession{UploadID: id, Claim: claim.ID, Overwrite: overwrite}.token(), nil
}

// session checks CAN_EDIT on p's volume and decodes token.
func (s *Service) session(ctx context.Context, sub *workspace.Subject, p Path, token string) (*Volume, uploadSession, error) {
	u, err := parseSession(token)
	if err != nil {
		return nil, u, err
	}
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	return v, u, err
}

// sessionError names the upload in a blob store's errors: an unknown
// upload is one completed, aborted, expired or started for another file.
func sessionError(err error, p Path) error {
	if errs.Is(err, errs.NotFound) {
		return errs.Wrap(errs.NotFound, err, "no upload session of "+p.String()+" with this session_token: it was completed, aborted or expired, or is for another file")
	}
	return err
}

// UploadPart stores part number n (1 to 10,000) of a multipart upload of
// p, size bytes (known), and returns its ETag.
func (s *Service) UploadPart(ctx context.Context, sub *workspace.Subject, p Path, token string, n int, r io.Reader, size int64) (string, error) {
	v, u, err := s.session(ctx, sub, p, token)
	if err != nil {
		return "", err
	}
	if size < 0 {
		return "", errs.Errorf(errs.Invalid, "a part needs its Content-Length")
	}
	s.renewClaim(ctx, u.claim(v, p))
	etag, err := s.blobs.PutPart(ctx, blobKey(v, p.Rel), u.UploadID, n, r, size)
	return etag, sessionError(err, p)
}

// CompleteUpload publishes the parts of a multipart upload as the file p,
// atomically, and ends the upload. Parts out of order, with a wrong ETag,
// missing or too small (all but the last at least 5 MiB) are
// errs.Invalid, and the upload stays open.
func (s *Service) CompleteUpload(ctx context.Context, sub *workspace.Subject, p Path, token string, parts []blob.Part) (FileInfo, error) {
	v, u, err := s.session(ctx, sub, p, token)
	if err != nil {
		return FileInfo{}, err
	}
	if len(parts) == 0 {
		return FileInfo{}, errs.Errorf(errs.Invalid, "complete-upload needs the parts: {\"parts\": [{\"part_number\": 1, \"etag\": ...}, ...]}")
	}
	s.renewClaim(ctx, u.claim(v, p))
	if err := s.refuseExisting(ctx, v, p, u.Overwrite); err != nil {
		return FileInfo{}, err
	}
	if _, err := s.blobs.CompleteMultipart(ctx, blobKey(v, p.Rel), u.UploadID, parts); err != nil {
		return FileInfo{}, sessionError(err, p)
	}
	s.releaseClaim(ctx, u.claim(v, p), true)
	return s.landed(ctx, v, p)
}

// AbortUpload drops a multipart upload's parts and ends it; an unknown or
// ended upload is not an error.
func (s *Service) AbortUpload(ctx context.Context, sub *workspace.Subject, p Path, token string) error {
	v, u, err := s.session(ctx, sub, p, token)
	if err != nil {
		return err
	}
	if err := s.blobs.AbortMultipart(ctx, blobKey(v, p.Rel), u.UploadID); err != nil {
		return err
	}
	s.releaseClaim(ctx, u.claim(v, p), false)
	return nil
}
