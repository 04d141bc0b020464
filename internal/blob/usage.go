package blob

import (
	"context"
	"errors"
	"io/fs"
)

// Usage is how much a store holds.
type Usage struct {
	// Objects is the number of blobs (and, in a directory, the parts of
	// multipart uploads in progress).
	Objects int64
	// Bytes is their total size.
	Bytes int64
}

// Measurer is a store that can tell how much it holds. Usage walks the
// whole store: its cost grows with the number of blobs (a directory walk;
// on S3 one LIST request per 1,000 objects).
type Measurer interface {
	Usage(ctx context.Context) (Usage, error)
}

var _ Measurer = (*Dir)(nil)

// Usage implements Measurer: the blobs and the parts of uploads in
// progress. Deleted blobs waiting for the reaper are not counted.
func (d *Dir) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	for _, dir := range []string{dirBlobs, dirUploads} {
		err := fs.WalkDir(d.root.FS(), dir, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walking
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if !de.Type().IsRegular() {
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // removed while walking
			}
			u.Objects++
			u.Bytes += fi.Size()
			return nil
		})
		if err != nil {
			return Usage{}, fsError(err, "measure "+d.path)
		}
	}
	return u, nil
}
