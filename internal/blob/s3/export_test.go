package s3

import "context"

// IncompleteUploads returns the IDs of the multipart uploads in progress
// for key, for tests that check cleanup. (MinIO lists uploads of one
// object name only, not of a prefix.)
func IncompleteUploads(ctx context.Context, s *Store, key string) ([]string, error) {
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
