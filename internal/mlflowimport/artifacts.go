package mlflowimport

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// ArtifactCopier copies run artifact directories from the file system that
// MLflow wrote them to into Sextant's artifact store.
type ArtifactCopier struct {
	// Root is MLflow's artifact root: the directory given to `mlflow
	// server --artifacts-destination` (for mlflow-artifacts: URIs), or the
	// mlruns directory when it has moved since the runs were logged.
	Root string
	// Allowed are further directories whose files may be read: a file:
	// artifact location (or a plain path) is read where it points only when
	// it lies under Root or one of these. The database names the
	// locations, and whoever wrote it could name any directory of this
	// machine (~/.ssh, /etc): the operator names those that hold artifacts.
	Allowed []string
	// Upload stores one file.
	Upload func(ctx context.Context, p string, f *os.File, size int64) error
	// Parallel is how many files are uploaded at once (default 4).
	Parallel int
}

// errNoArtifacts means a run's artifacts are not on this machine.
var errNoArtifacts = errors.New("artifacts not found")

// errRefusedArtifacts means a run's artifact location lies outside the
// directories the import may read (Root and Allowed).
var errRefusedArtifacts = errors.New("artifact location outside the artifact directories named for the import")

// allowed reports whether the local path p lies under Root or a directory
// of Allowed, symbolic links resolved on both sides.
func (c *ArtifactCopier) allowed(p string) bool {
	real := realPath(p)
	for _, dir := range append([]string{c.Root}, c.Allowed...) {
		if dir == "" {
			continue
		}
		d := realPath(dir)
		if real == d || strings.HasPrefix(real, strings.TrimSuffix(d, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// realPath is p absolute and clean, with its symbolic links resolved when
// it exists.
func realPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// CopyRun copies the artifact tree of a run whose MLflow artifact URI is
// uri to the proxy path dst, and returns the number of files and bytes. A
// run that logged nothing has no directory (MLflow creates it on the first
// upload): that is zero files, not an error, when the experiment's
// directory or the artifact root is there; errNoArtifacts when neither is.
func (c *ArtifactCopier) CopyRun(ctx context.Context, uri, dst string) (files, bytes int64, err error) {
	dir, err := c.resolve(uri)
	if err != nil {
		return 0, 0, err
	}
	if dir == "" {
		return 0, 0, nil
	}
	type job struct {
		rel  string
		size int64
	}
	var jobs []job
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil // directories are implied; links and devices are not artifacts
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		jobs = append(jobs, job{filepath.ToSlash(rel), info.Size()})
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", dir, err)
	}
	n := c.Parallel
	if n <= 0 {
		n = 4
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.copyFile(ctx, filepath.Join(dir, filepath.FromSlash(j.rel)), dst+"/"+j.rel, j.size); err != nil {
				cancel(fmt.Errorf("%s: %w", j.rel, err))
			}
		}()
		files++
		bytes += j.size
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return 0, 0, err
	}
	return files, bytes, nil
}

func (c *ArtifactCopier) copyFile(ctx context.Context, src, dst string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.Upload(ctx, dst, f, size)
}

// resolve finds the local directory of an MLflow artifact URI:
// file:///abs/path and plain paths as they are when they lie under Root or
// Allowed (when gone, their last three segments <experiment>/<run>/artifacts
// under Root; a directory that is there but outside is errRefusedArtifacts
// unless that tail is found), and
// mlflow-artifacts:/<path> under Root. It returns "" when the run has no
// directory but its experiment's directory or the root exists.
func (c *ArtifactCopier) resolve(uri string) (string, error) {
	if uri == "" {
		return "", fmt.Errorf("%w: the run has no artifact URI", errNoArtifacts)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoArtifacts, err)
	}
	var candidates []string
	var rel string
	refused := false
	switch u.Scheme {
	case "", "file":
		local := filepath.FromSlash(u.Path)
		switch {
		case c.allowed(local):
			candidates = append(candidates, local)
		case isDir(local):
			refused = true // there, but not for this import to read
		}
		// The mlruns directory may have moved: try the tail under Root.
		parts := strings.Split(strings.Trim(filepath.ToSlash(local), "/"), "/")
		if len(parts) >= 3 {
			rel = path.Join(parts[len(parts)-3:]...)
		}
	case "mlflow-artifacts":
		rel = strings.Trim(u.Path, "/")
	default:
		return "", fmt.Errorf("%w: %s: only local artifact stores (file:, mlflow-artifacts:) can be imported; download %s:// artifacts to a directory and pass it as --artifacts", errNoArtifacts, uri, u.Scheme)
	}
	if c.Root != "" && rel != "" {
		if strings.Contains("/"+rel+"/", "/../") {
			return "", fmt.Errorf("%w: %s leaves the artifact root", errNoArtifacts, uri)
		}
		candidates = append(candidates, filepath.Join(c.Root, filepath.FromSlash(rel)))
	}
	for _, p := range candidates {
		if isDir(p) {
			return p, nil
		}
	}
	if refused {
		dirs := strings.Trim(strings.Join(append([]string{c.Root}, c.Allowed...), ", "), ", ")
		if dirs == "" {
			dirs = "none"
		}
		return "", fmt.Errorf("%w: %s was not read (directories named: %s)", errRefusedArtifacts, uri, dirs)
	}
	// <root>/<experiment>/<run>/artifacts: when the experiment's directory
	// or the root is there, the run logged nothing; when neither is, the
	// artifacts are somewhere else.
	for _, p := range candidates {
		exp := filepath.Dir(filepath.Dir(p))
		if isDir(exp) || isDir(filepath.Dir(exp)) {
			return "", nil
		}
	}
	return "", fmt.Errorf("%w: %s (artifact root %q)", errNoArtifacts, uri, c.Root)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
