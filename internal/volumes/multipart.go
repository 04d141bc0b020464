package volumes

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"time"

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
// blob store's upload ID, the claim and overwrite, the user who initiated
// the upload and its expiry (Options.UploadTokenTTL), signed with
// Options.Secret: only that user, while still allowed to write the volume,
// uploads parts, completes or aborts it, and only until it expires.

// uploadSession is what a session token encodes.
type uploadSession struct {
	UploadID  string `json:"u"`
	Claim     int64  `json:"c"`
	Overwrite bool   `json:"o"`
	// User is the id of the user who initiated the upload.
	User int64 `json:"w"`
	// Expires is when the token stops working, Unix seconds.
	Expires int64 `json:"e"`
}

// token encodes u as base64url(JSON) "." base64url(HMAC-SHA256 of it).
func (s *Service) token(u uploadSession) string {
	b, _ := json.Marshal(u)
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + s.signToken(body)
}

func (s *Service) signToken(body string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("volumes-upload\x00"))
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// claim is the session's claim on p in v.
func (u uploadSession) claim(v *Volume, p Path) *Upload {
	return &Upload{ID: u.Claim, VolumeID: v.ID, Dir: p.Dir().Rel, Name: p.Name()}
}

// parseSession decodes and verifies a session token: one not signed by
// this server (or its replicas) is errs.Invalid, an expired one
// errs.PermissionDenied.
func (s *Service) parseSession(token string) (uploadSession, error) {
	var u uploadSession
	bad := errs.Errorf(errs.Invalid, "invalid session_token: it is not one this server handed out")
	body, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.signToken(body))) {
		return u, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err == nil {
		err = json.Unmarshal(b, &u)
	}
	if err != nil || u.UploadID == "" {
		return u, bad
	}
	if s.now().Unix() >= u.Expires {
		return u, errs.Errorf(errs.PermissionDenied, "the session_token of this multipart upload expired at %s (tokens last %s): start the upload again",
			time.Unix(u.Expires, 0).UTC().Format(time.RFC3339), s.tokenTTL)
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
	userID, _ := owner(sub)
	return s.token(uploadSession{UploadID: id, Claim: claim.ID, Overwrite: overwrite, User: userID, Expires: s.now().Add(s.tokenTTL).Unix()}), nil
}

// session decodes and verifies token, checks CAN_EDIT on p's volume, and
// that sub is the user who initiated the upload.
func (s *Service) session(ctx context.Context, sub *workspace.Subject, p Path, token string) (*Volume, uploadSession, error) {
	u, err := s.parseSession(token)
	if err != nil {
		return nil, u, err
	}
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	if err != nil {
		return nil, u, err
	}
	if id, email := owner(sub); id != u.User {
		return nil, u, errs.Errorf(errs.PermissionDenied, "this session_token was handed to another user than %s: only the user who initiated an upload continues it", email)
	}
	return v, u, nil
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
