package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
)

// The transfer engine of `sextant volumes cp` and `rm -r` and of `sextant
// ckpt gc`: what to copy between the local disk and a volume, copying it
// with several workers, and deleting a directory tree of a volume. It
// lives with the client, which owns the requests it makes; the commands
// only parse flags and print.

// Transfer is one file to copy between the local disk and a volume.
type Transfer struct {
	// Src and Dst are a local path and a /Volumes path, one each way.
	Src, Dst string
	// Size is the file's size in bytes, for progress.
	Size int64
}

// CopyPlan is what a copy does: the files to transfer and, for an upload,
// the volume directories to create first (empty ones included, which exist
// on a volume only when made).
type CopyPlan struct {
	Files []Transfer
	Dirs  []string
	// Upload is true from the local disk to a volume.
	Upload bool
}

// IsVolumePath reports whether p names a path in a volume (/Volumes/...).
func IsVolumePath(p string) bool { return strings.HasPrefix(p, "/Volumes/") }

// PlanCopy works out what copying src to dst transfers, as cp does: a
// directory needs recursive, and a destination that is an existing
// directory receives src under its own name. Exactly one of src and dst
// is a /Volumes path. A download creates the local directories it needs.
func (c *Client) PlanCopy(ctx context.Context, src, dst string, recursive bool) (*CopyPlan, error) {
	up := IsVolumePath(dst)
	if up == IsVolumePath(src) {
		return nil, errors.New("cp copies between the local disk and a volume: exactly one of SRC and DST must be a /Volumes path")
	}
	if up {
		return c.planUpload(ctx, src, strings.TrimRight(dst, "/"), recursive)
	}
	return c.planDownload(ctx, strings.TrimRight(src, "/"), dst, recursive)
}

func (c *Client) planUpload(ctx context.Context, src, dst string, recursive bool) (*CopyPlan, error) {
	plan := &CopyPlan{Upload: true}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if ok, _ := c.IsDir(ctx, dst); ok {
			dst = dst + "/" + filepath.Base(src)
		}
		plan.Files = append(plan.Files, Transfer{src, dst, fi.Size()})
		return plan, nil
	}
	if !recursive {
		return nil, fmt.Errorf("%s is a directory: use -r", src)
	}
	if ok, _ := c.IsDir(ctx, dst); ok {
		dst = dst + "/" + filepath.Base(filepath.Clean(src))
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		remote := dst
		if rel != "." {
			remote += "/" + filepath.ToSlash(rel)
		}
		if d.IsDir() {
			plan.Dirs = append(plan.Dirs, remote)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		plan.Files = append(plan.Files, Transfer{p, remote, info.Size()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return plan, nil
}

func (c *Client) planDownload(ctx context.Context, src, dst string, recursive bool) (*CopyPlan, error) {
	plan := &CopyPlan{}
	size, err := c.StatFile(ctx, src)
	if err == nil {
		if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
			dst = filepath.Join(dst, path.Base(src))
		}
		plan.Files = append(plan.Files, Transfer{src, dst, size})
		return plan, nil
	}
	if !errs.Is(err, errs.NotFound) {
		return nil, err
	}
	// Not a file: a directory, or nothing at all.
	if dir, derr := c.IsDir(ctx, src); derr != nil {
		return nil, derr
	} else if !dir {
		return nil, fmt.Errorf("%s: no such file or directory", src)
	}
	if !recursive {
		return nil, fmt.Errorf("%s is a directory: use -r", src)
	}
	files, rdirs, err := c.Walk(ctx, src)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, path.Base(src))
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	for _, d := range rdirs {
		if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(strings.TrimPrefix(d.Path, src+"/"))), 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		local := filepath.Join(dst, filepath.FromSlash(strings.TrimPrefix(f.Path, src+"/")))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return nil, err
		}
		plan.Files = append(plan.Files, Transfer{f.Path, local, FileSize(f)})
	}
	return plan, nil
}

// CopyOptions configure Copy.
type CopyOptions struct {
	// Jobs is how many files are transferred at once; below 1 means 1.
	Jobs int
	// Overwrite replaces files that exist at the destination.
	Overwrite bool
	// Progress, if set, is called from the workers with the bytes each
	// transfer has just moved; it must be safe for concurrent use.
	Progress func(bytes int64)
	// FileDone, if set, is called (concurrently) when a file has landed.
	FileDone func()
}

// Copy carries out a plan: it makes the plan's directories, then transfers
// its files with o.Jobs workers. The first failure cancels the rest and is
// returned, naming the file.
func (c *Client) Copy(ctx context.Context, plan *CopyPlan, o CopyOptions) error {
	for _, d := range plan.Dirs {
		if err := c.MakeDir(ctx, d); err != nil {
			return err
		}
	}
	progress := o.Progress
	if progress == nil {
		progress = func(int64) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan Transfer)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(max(o.Jobs, 1), max(1, len(plan.Files))) {
		wg.Go(func() {
			for t := range work {
				var err error
				if plan.Upload {
					err = c.UploadFile(ctx, t.Src, t.Dst, o.Overwrite, progress)
				} else {
					err = c.download(ctx, t, o.Overwrite, progress)
				}
				if err != nil {
					once.Do(func() { first = fmt.Errorf("%s: %w", t.Src, err); cancel() })
					continue
				}
				if o.FileDone != nil {
					o.FileDone()
				}
			}
		})
	}
	for _, t := range plan.Files {
		select {
		case work <- t:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return first
}

func (c *Client) download(ctx context.Context, t Transfer, overwrite bool, progress func(int64)) error {
	if !overwrite {
		if _, err := os.Stat(t.Dst); err == nil {
			return fmt.Errorf("%s exists (--overwrite=false)", t.Dst)
		}
	}
	return c.DownloadFile(ctx, t.Src, t.Dst, progress)
}

// DeleteTree deletes a volume directory and everything in it: the files
// named first (a checkpoint's .metadata, so that it stops being complete
// at once), then the other files with jobs workers, then the directories
// deepest first; a volume's root stays. It returns the number of files
// deleted. Files deleted meanwhile by someone else are not an error.
func (c *Client) DeleteTree(ctx context.Context, dir string, jobs int, first []string) (int, error) {
	files, dirs, err := c.Walk(ctx, dir)
	if err != nil {
		return 0, err
	}
	sort.SliceStable(files, func(i, j int) bool {
		return slices.Contains(first, files[i].Name) && !slices.Contains(first, files[j].Name)
	})
	var rest []wire.DirEntry
	for _, f := range files {
		if slices.Contains(first, f.Name) && path.Dir(f.Path) == dir {
			if err := c.DeleteFile(ctx, f.Path); err != nil && !errs.Is(err, errs.NotFound) {
				return 0, err
			}
			continue
		}
		rest = append(rest, f)
	}
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	work := make(chan string)
	for range max(jobs, 1) {
		wg.Go(func() {
			for p := range work {
				if err := c.DeleteFile(ctx, p); err != nil && !errs.Is(err, errs.NotFound) {
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for _, f := range rest {
		work <- f.Path
	}
	close(work)
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return 0, *err
	}
	if strings.Count(dir, "/") > 4 { // not a volume's root, which stays
		dirs = append(dirs, wire.DirEntry{Path: dir, IsDirectory: true})
	}
	for _, d := range dirs {
		if err := c.DeleteDir(ctx, d.Path); err != nil && !errs.Is(err, errs.NotFound) {
			return 0, err
		}
	}
	return len(files), nil
}

// FileSize is a listed file's size (0 when the server gave none).
func FileSize(e wire.DirEntry) int64 {
	if e.FileSize == nil {
		return 0
	}
	return *e.FileSize
}
