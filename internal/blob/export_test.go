package blob

import (
	"context"
	"os"
	"syscall"
)

// IncompleteUploads returns the IDs of the multipart uploads in progress
// for key, for tests that check cleanup. (MinIO lists uploads of one
// object name only, not of a prefix.)
func IncompleteUploads(ctx context.Context, s *S3, key string) ([]string, error) {
	var ids []string
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, s.object(key), false) {
		if u.Err != nil {
			return nil, u.Err
		}
		if u.Key == s.object(key) {
			ids = append(ids, u.UploadID)
		}
	}
	return ids, nil
}

// WaitReaped returns once the blobs and trees deleted so far are removed
// from tmp/.
func (d *Dir) WaitReaped() { d.waitReaped() }

// WithoutHardLinks makes d act as on a file system without hard links, so
// that PutIfAbsent takes its fallback.
func (d *Dir) WithoutHardLinks() {
	d.link = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
}
