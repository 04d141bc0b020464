package s3

import (
	"context"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// The multipart methods of Store map one to one onto S3's multipart upload:
// the upload ID and the ETags are S3's own.

// CreateMultipart implements blob.Store.
func (s *Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := blob.ValidateKey(key); err != nil {
		return "", err
	}
	id, err := s.core.NewMultipartUpload(ctx, s.bucket, s.object(key), minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return "", s.error(ctx, err, "create multipart upload", key)
	}
	return id, nil
}

// PutPart implements blob.Store. The body streams to S3 in one request, so a
// part is never buffered; minio-go does not retry it.
func (s *Store) PutPart(ctx context.Context, key, uploadID string, partNumber int, r io.Reader, size int64) (string, error) {
	if err := blob.ValidatePart(key, uploadID, partNumber, size); err != nil {
		return "", err
	}
	body := blob.NewBodyReader(ctx, r, size)
	p, err := s.core.PutObjectPart(ctx, s.bucket, s.object(key), uploadID, partNumber, body, size, minio.PutObjectPartOptions{})
	if err != nil {
		if isS3Code(err, "NoSuchUpload") {
			return "", blob.UploadNotFound(key, uploadID)
		}
		return "", s.bodyError(ctx, err, body, "upload part", key)
	}
	return strings.Trim(p.ETag, `"`), nil
}

// CompleteMultipart implements blob.Store.
func (s *Store) CompleteMultipart(ctx context.Context, key, uploadID string, parts []blob.Part) (blob.Info, error) {
	if err := blob.ValidateKey(key); err != nil {
		return blob.Info{}, err
	}
	if uploadID == "" {
		return blob.Info{}, errs.E(errs.Invalid, "upload ID is empty")
	}
	if err := blob.ValidateParts(parts); err != nil {
		return blob.Info{}, err
	}
	cparts := make([]minio.CompletePart, len(parts))
	for i, p := range parts {
		cparts[i] = minio.CompletePart{PartNumber: p.Number, ETag: strings.Trim(p.ETag, `"`)}
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, s.object(key), uploadID, cparts, minio.PutObjectOptions{}); err != nil {
		if isS3Code(err, "NoSuchUpload") {
			return blob.Info{}, blob.UploadNotFound(key, uploadID)
		}
		return blob.Info{}, s.error(ctx, err, "complete multipart upload", key)
	}
	return s.Stat(context.WithoutCancel(ctx), key)
}

// AbortMultipart implements blob.Store.
func (s *Store) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := blob.ValidateKey(key); err != nil {
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
