package workspace

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// Files are the workspace's files (helper modules, environment files) in
// the folder tree, /Workspace/<folder>/<name> through the Files API: blobs
// under their path, with the permissions of their folder (CAN_READ to
// read and list, CAN_EDIT to write and delete). It is safe for concurrent
// use.
type Files struct {
	ws    *Service
	blobs blob.Store
}

// FileEntry is a file or a folder of a Files listing.
type FileEntry struct {
	// Name is the entry's last path segment.
	Name  string
	IsDir bool
	// Size and ModTime are a file's; zero for a folder.
	Size    int64
	ModTime time.Time
}

// NewFiles returns the files of ws kept in blobs.
func NewFiles(ws *Service, blobs blob.Store) *Files {
	return &Files{ws: ws, blobs: blobs}
}

// filePath returns the canonical path of a file and its blob key.
func filePath(p string) (string, string, error) {
	p, err := NormalizePath(p)
	if err != nil {
		return "", "", err
	}
	if p == "/" {
		return "", "", errs.E(errs.Invalid, "a file path is required")
	}
	key := strings.TrimPrefix(p, "/")
	if err := blob.ValidateKey(key); err != nil {
		return "", "", err
	}
	return p, key, nil
}

// access checks level l on the folder of the file p and returns p's
// canonical path and blob key.
func (f *Files) access(ctx context.Context, sub *Subject, p string, l Level) (string, string, error) {
	p, key, err := filePath(p)
	if err != nil {
		return "", "", err
	}
	if err := f.ws.CheckFolder(ctx, sub, Parent(p), l); err != nil {
		return "", "", err
	}
	return p, key, nil
}

// Put stores size bytes of r (-1: unknown) as the file p (CAN_EDIT on its
// folder). With overwrite false an existing file is errs.AlreadyExists:
// checked before r is read, and again as the file is published, so that
// of two such uploads exactly one is stored.
func (f *Files) Put(ctx context.Context, sub *Subject, p string, r io.Reader, size int64, overwrite bool) error {
	p, key, err := f.access(ctx, sub, p, CanEdit)
	if err != nil {
		return err
	}
	put := f.blobs.Put
	if !overwrite {
		if _, err := f.blobs.Stat(ctx, key); err == nil {
			return errs.Errorf(errs.AlreadyExists, "file %s already exists", p)
		}
		put = f.blobs.PutIfAbsent
	}
	if _, err := put(ctx, key, r, size); err != nil {
		if errs.Is(err, errs.AlreadyExists) {
			return errs.Errorf(errs.AlreadyExists, "file %s already exists", p)
		}
		return err
	}
	return nil
}

// Stat returns the Info of the file p (CAN_READ on its folder);
// errs.NotFound when there is none.
func (f *Files) Stat(ctx context.Context, sub *Subject, p string) (blob.Info, error) {
	_, key, err := f.access(ctx, sub, p, CanRead)
	if err != nil {
		return blob.Info{}, err
	}
	return f.blobs.Stat(ctx, key)
}

// Open returns a reader of bytes [offset, offset+length) of the file p
// (CAN_READ on its folder), as blob.Store's Open does.
func (f *Files) Open(ctx context.Context, sub *Subject, p string, offset, length int64) (io.ReadCloser, blob.Info, error) {
	_, key, err := f.access(ctx, sub, p, CanRead)
	if err != nil {
		return nil, blob.Info{}, err
	}
	return f.blobs.Open(ctx, key, offset, length)
}

// Delete removes the file p (CAN_EDIT on its folder); errs.NotFound when
// there is none.
func (f *Files) Delete(ctx context.Context, sub *Subject, p string) error {
	_, key, err := f.access(ctx, sub, p, CanEdit)
	if err != nil {
		return err
	}
	if _, err := f.blobs.Stat(ctx, key); err != nil {
		return err
	}
	return f.blobs.Delete(ctx, key)
}

// List returns the files and folders of files in the folder dir (CAN_READ
// on it), sorted by name, and dir's canonical path.
func (f *Files) List(ctx context.Context, sub *Subject, dir string) ([]FileEntry, string, error) {
	dir, err := NormalizePath(dir)
	if err != nil {
		return nil, "", err
	}
	if err := f.ws.CheckFolder(ctx, sub, dir, CanRead); err != nil {
		return nil, "", err
	}
	entries, err := f.blobs.List(ctx, strings.TrimPrefix(dir, "/")+"/", "", 0)
	if err != nil {
		return nil, "", err
	}
	out := make([]FileEntry, 0, len(entries))
	for _, e := range entries {
		fe := FileEntry{Name: strings.TrimSuffix(e.Name, "/"), IsDir: e.IsDir}
		if !e.IsDir {
			fe.Size, fe.ModTime = e.Size, e.ModTime
		}
		out = append(out, fe)
	}
	return out, dir, nil
}
