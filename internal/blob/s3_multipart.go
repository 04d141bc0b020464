package blob

import (
	"context"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/sextant/sextant/internal/errs"
)

// The multipart methods of S3 map one to one onto S3's multipart upload:
// the upload ID and the ETags are S3's own.

// CreateMultipart implements Store.
func (s *S3) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	id, err := s.core.NewMultipartUpload(ctx, s.bucket, s.object(key), minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return "", s.error(ctx, err, "create multipart upload", key)
	}
	return id, nil
}

// PutPart implements Store. The body streams to S3 in one request, so a
// part is never buffered; minio-go does not retry it.
func (s *S3) PutPart(ctx context.Context, key, uploadID string, partNumber int, r io.Reader, size int64) (string, error) {
	if err := validatePart(key, uploadID, partNumber, size); err != nil {
		return "", err
	}
	body := newBodyReader(ctx, r, size)
	p, err := s.core.PutObjectPart(ctx, s.bucket, s.object(key), uploadID, partNumber, body, size, minio.PutObjectPartOptions{})
	if err != nil {
		if isS3Code(err, "NoSuchUpload") {
			return "", uploadNotFound(key, uploadID)
		}
		return "", s.bodyError(ctx, err, body, "upload part", key)
	}
	return strings.Trim(p.ETag, `"`), nil
}

// CompleteMultipart implements Store.
func (s *S3) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	if uploadID == "" {
		return Info{}, errs.E(errs.Invalid, "upload ID is empty")
	}
	if err := validateParts(parts); err != nil {
		return Info{}, err
	}
	cparts := make([]minio.CompletePart, len(parts))
	for i, p := range parts {
		cparts[i] = minio.CompletePart{PartNumber: p.Number, ETag: strings.Trim(p.ETag, `"`)}
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, s.object(key), uploadID, cparts, minio.PutObjectOptions{}); err != nil {
		if isS3Code(err, "NoSuchUpload") {
			return Info{}, uploadNotFound(key, uploadID)
		}
		return Info{}, s.error(ctx, err, "complete multipart upload", key)
	}
	return s.Stat(context.WithoutCancel(ctx), key)
}

// AbortMultipart implements Store.
func (s *S3) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if uploadID == "" {
		return errs.E(errs.Invalid, "upload ID is empty")
	}
	err := s.core.AbortMultipartUpload(ctx, s.bucket, s.object(key), uploadID)
	if err != nil && !isS3Code(err, "NoSuchUpload") {
		return s.error(ctx, err, "abort multipart upload", key)
	}
	return nil
}
