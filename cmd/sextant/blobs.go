package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/s3"
)

// S3Config selects an S3-compatible store for artifacts and files.
type S3Config struct {
	Endpoint     string
	Bucket       string
	Prefix       string
	Region       string
	AccessKey    string
	SecretKey    string
	UseSSL       bool
	CreateBucket bool
}

// openBlobs opens the blob store named name ("artifacts", "files",
// "volumes"): a directory under the data directory, or a prefix of the S3
// bucket.
func openBlobs(ctx context.Context, cfg Config, name string, getenv func(string) string, log *slog.Logger) (blob.Store, error) {
	if cfg.BlobStore != "s3" {
		return blob.OpenDir(filepath.Join(cfg.DataDir, name), blob.DirOptions{})
	}
	s := cfg.S3
	if s.AccessKey == "" {
		s.AccessKey = getenv("AWS_ACCESS_KEY_ID")
	}
	if s.SecretKey == "" {
		s.SecretKey = getenv("AWS_SECRET_ACCESS_KEY")
	}
	prefix := s.Prefix
	if prefix != "" && prefix[len(prefix)-1] != '/' {
		prefix += "/"
	}
	st, err := s3.Open(ctx, s3.Options{
		Endpoint: s.Endpoint, Bucket: s.Bucket, Prefix: prefix + name + "/", Region: s.Region,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, UseSSL: s.UseSSL, CreateBucket: s.CreateBucket,
		Logger: log.With("component", "s3", "store", name),
	})
	if err != nil {
		return nil, fmt.Errorf("open S3 bucket %s at %s for %s: %w", s.Bucket, s.Endpoint, name, err)
	}
	return st, nil
}

// mask hides a secret in logs: it says whether one is set, and shows none
// of its characters (a few of them narrow a guess, and logs travel).
func mask(s string) string {
	if s == "" {
		return ""
	}
	return "****"
}
