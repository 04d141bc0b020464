package blob

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// Dir is a Store in a local directory, which it owns. Its layout:
//
//	blobs/<key>           each blob, a regular file at its key's path
//	tmp/                  files being written (Put, PutPart, CompleteMultipart)
//	                      and blobs and trees being deleted (del-*)
//	uploads/<id>/key      a multipart upload: the key it is for
//	uploads/<id>/<n>.<etag>  its part n, named by its MD5
//
// Every write goes to a file in tmp/, is fsynced and renamed into place, and
// the directory it lands in is fsynced (PutIfAbsent links it instead, which
// fails if the name exists): a blob is complete and durable when Put returns, and a crash leaves either the old blob or the new one plus a
// stray file in tmp/, which OpenDir removes once it is older than
// DirOptions.TempMaxAge. tmp/ is on the same file system as blobs/, so the
// rename is atomic.
//
// Files are reached through an os.Root: no key and no symbolic link planted
// under the root can make Dir touch a file outside it. Directories that a
// Delete leaves empty are removed, up to blobs/. A Delete renames the blob
// into tmp/ and returns; a background reaper frees its blocks (see reaper).
// Deletes are not fsynced: a deleted blob may come back after a power
// failure.
type Dir struct {
	root *os.Root
	path string
	opts DirOptions
	log  *slog.Logger
	reap reaper
	// stale stops the background RemoveStale (see startStaleLoop).
	stale struct {
		cancel context.CancelFunc
		done   sync.WaitGroup
	}
	// link is d.root.Link; tests replace it to act as a file system
	// without hard links.
	link func(oldname, newname string) error
	// newMu serialises PutIfAbsent's check and rename where the file
	// system has no hard links.
	newMu sync.Mutex
}

var _ Store = (*Dir)(nil)

// Directory names under the root.
const (
	dirBlobs   = "blobs"
	dirTmp     = "tmp"
	dirUploads = "uploads"
)

// DirOptions configures a Dir.
type DirOptions struct {
	// TempMaxAge is how old a file in tmp/ must be for OpenDir (and
	// RemoveStale) to remove it as the leftover of an interrupted write.
	// 0 means DefaultDirOptions' (1 hour); negative, never.
	TempMaxAge time.Duration
	// UploadMaxAge is how long a multipart upload may go without a new part
	// before OpenDir (and RemoveStale) drop it. 0 means DefaultDirOptions'
	// (48 hours: twice the life of the upload tokens the servers hand out,
	// after which no part can come); negative, never.
	UploadMaxAge time.Duration
	// StaleEvery is how often the Dir runs RemoveStale in the background
	// while it is open, so that abandoned uploads and interrupted writes go
	// without a restart. 0 means DefaultDirOptions' (1 hour); negative,
	// only at OpenDir.
	StaleEvery time.Duration
	// Logger receives what RemoveStale removed. nil discards.
	Logger *slog.Logger
}

// DefaultDirOptions returns the options OpenDir uses for zero fields.
func DefaultDirOptions() DirOptions {
	return DirOptions{
		TempMaxAge:   time.Hour,
		UploadMaxAge: 48 * time.Hour,
		StaleEvery:   time.Hour,
	}
}

// OpenDir opens the Dir at root, creating the directory and its layout if
// needed, and removes the stale leftovers of interrupted writes and
// abandoned uploads (see DirOptions). Close releases it.
func OpenDir(root string, opts DirOptions) (*Dir, error) {
	def := DefaultDirOptions()
	if opts.TempMaxAge == 0 {
		opts.TempMaxAge = def.TempMaxAge
	}
	if opts.UploadMaxAge == 0 {
		opts.UploadMaxAge = def.UploadMaxAge
	}
	if opts.StaleEvery == 0 {
		opts.StaleEvery = def.StaleEvery
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if root == "" {
		return nil, errs.E(errs.Invalid, "blob directory: empty path")
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fsError(err, "create blob directory "+root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fsError(err, "open blob directory "+root)
	}
	d := &Dir{root: r, path: root, opts: opts, log: log.With("component", "blob.dir"), link: r.Link}
	for _, name := range []string{dirBlobs, dirTmp, dirUploads} {
		if err := r.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			r.Close()
			return nil, fsError(err, "create blob directory "+filepath.Join(root, name))
		}
	}
	if err := d.RemoveStale(context.Background()); err != nil {
		d.log.Warn("removing stale temporary files failed", "err", err)
	}
	d.startStaleLoop()
	return d, nil
}

// Close stops the background RemoveStale, waits for the removal of deleted
// blobs to finish and releases the directory. Calls in flight may fail.
func (d *Dir) Close() error {
	d.stopStaleLoop()
	d.waitReaped()
	return d.root.Close()
}

// Path returns the root directory Dir was opened with.
func (d *Dir) Path() string { return d.path }

// RemoveStale removes files in tmp/ older than DirOptions.TempMaxAge, the
// deleted blobs and trees a crash left in tmp/ (whatever their age), and
// multipart uploads without a new part for DirOptions.UploadMaxAge. OpenDir
// calls it, then the Dir every DirOptions.StaleEvery.
func (d *Dir) RemoveStale(ctx context.Context) error { return d.removeStale(ctx, true) }

// removeStale is RemoveStale; with trash false it leaves the deleted blobs
// in tmp/ to the reaper, which may be at work on them.
func (d *Dir) removeStale(ctx context.Context, trash bool) error {
	now := time.Now()
	var errList []error
	for _, c := range []struct {
		dir    string
		maxAge time.Duration
		what   string
	}{
		{dirTmp, d.opts.TempMaxAge, "temporary file"},
		{dirUploads, d.opts.UploadMaxAge, "abandoned multipart upload"},
	} {
		if c.maxAge < 0 {
			continue
		}
		entries, err := readDir(d.root, c.dir)
		if err != nil {
			errList = append(errList, err)
			continue
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			trashed := c.dir == dirTmp && isTrash(e.Name())
			if trashed && !trash {
				continue
			}
			fi, err := e.Info()
			if err != nil || now.Sub(fi.ModTime()) < c.maxAge && !trashed {
				continue
			}
			name := c.dir + "/" + e.Name()
			if err := d.root.RemoveAll(name); err != nil {
				errList = append(errList, err)
				continue
			}
			d.log.Info("removed stale "+c.what, "path", filepath.Join(d.path, name), "mtime", fi.ModTime())
		}
	}
	return errors.Join(errList...)
}

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	return d.put(ctx, key, r, size, d.publish)
}

// PutIfAbsent implements Store: the blob is published with link(2), which
// fails when the name exists, where Put renames over it.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	return d.put(ctx, key, r, size, d.publishNew)
}

// put writes r to a temporary file and hands it to publish.
func (d *Dir) put(ctx context.Context, key string, r io.Reader, size int64, publish func(tmp, key string) error) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if size < -1 {
		return 0, errs.Errorf(errs.Invalid, "invalid size %d (-1: unknown)", size)
	}
	tmp, f, err := d.createTemp("put")
	if err != nil {
		return 0, err
	}
	defer d.discard(tmp, f)
	body := NewBodyReader(ctx, r, size)
	var n int64
	var rerr, werr error
	if size >= 0 && size < copyBufSize {
		// Small: one write through the page cache is cheapest.
		n, rerr, werr = copyBody(f, body)
	} else {
		n, rerr, werr = copyBodyDirect(f, body)
	}
	switch {
	case rerr != nil:
		return 0, rerr
	case werr != nil:
		return 0, fsError(werr, "write blob "+key)
	}
	if err := d.finishTemp(ctx, tmp, f); err != nil {
		return 0, err
	}
	if err := publish(tmp, key); err != nil {
		return 0, err
	}
	return n, nil
}

// Open implements Store. The reader reads the open file with pread and
// holds no buffer; its WriteTo lets io.Copy to a socket or file use
// sendfile or copy_file_range.
func (d *Dir) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, err
	}
	if err := ValidateRange(offset, length); err != nil {
		return nil, Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, Info{}, err
	}
	f, err := d.root.Open(blobPath(key))
	if err != nil {
		return nil, Info{}, d.blobError(err, key, "open blob")
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, fsError(err, "stat blob "+key)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, Info{}, notFound(key)
	}
	info := fileInfo(key, fi)
	end, err := ClampRange(key, offset, length, info.Size)
	if err != nil {
		f.Close()
		return nil, Info{}, err
	}
	return &fileReader{f: f, off: offset, end: end}, info, nil
}

// Stat implements Store.
func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	fi, err := d.root.Stat(blobPath(key))
	if err != nil {
		return Info{}, d.blobError(err, key, "stat blob")
	}
	if !fi.Mode().IsRegular() {
		return Info{}, notFound(key)
	}
	return fileInfo(key, fi), nil
}

// List implements Store. It reads the whole directory (names and sizes)
// before cutting the page, so a page of a directory of n children costs
// O(n) time and memory.
func (d *Dir) List(ctx context.Context, prefix, after string, limit int) ([]Entry, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ValidateAfter(after); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := dirBlobs
	if prefix != "" {
		dir = blobPath(strings.TrimSuffix(prefix, "/"))
	}
	des, err := readDir(d.root, dir)
	if err != nil {
		if isMissing(err) {
			return []Entry{}, nil
		}
		return nil, fsError(err, "list blobs under "+prefix)
	}
	entries := make([]Entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if ValidateKey(name) != nil {
			continue // not made by Dir, and not reachable by a key
		}
		var e Entry
		switch {
		case de.IsDir():
			e = Entry{Name: name + "/", IsDir: true}
		case de.Type().IsRegular():
			fi, err := de.Info()
			if err != nil {
				continue // deleted meanwhile
			}
			e = Entry{Name: name, Size: fi.Size(), ModTime: fi.ModTime()}
		default:
			continue
		}
		if e.Name > after {
			entries = append(entries, e)
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
	if limit > 0 && len(entries) > limit {
		entries = entries[:limit:limit]
	}
	return entries, nil
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := blobPath(key)
	fi, err := d.root.Lstat(p)
	if err != nil {
		if isMissing(err) {
			return nil
		}
		return fsError(err, "delete blob "+key)
	}
	if fi.IsDir() {
		return nil // a directory of other keys, not a blob
	}
	if err := d.trash(p); err != nil && !isMissing(err) {
		return fsError(err, "delete blob "+key)
	}
	d.removeEmptyDirs(path.Dir(p))
	return nil
}

// DeleteAll implements Store. The directory disappears at once (it is
// renamed into tmp/ first), then its files are removed.
func (d *Dir) DeleteAll(ctx context.Context, prefix string) error {
	if err := ValidatePrefix(prefix); err != nil {
		return err
	}
	if prefix == "" {
		return errs.E(errs.Invalid, "DeleteAll needs a non-empty prefix")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := blobPath(strings.TrimSuffix(prefix, "/"))
	fi, err := d.root.Lstat(p)
	if err != nil {
		if isMissing(err) {
			return nil
		}
		return fsError(err, "delete blobs under "+prefix)
	}
	if !fi.IsDir() {
		return nil // a blob named like the prefix is not under it
	}
	if err := d.removeTree(p); err != nil {
		return fsError(err, "delete blobs under "+prefix)
	}
	d.removeEmptyDirs(path.Dir(p))
	return nil
}

// removeTree renames the tree at name into tmp/, where the reaper removes
// it. A tree that vanished meanwhile is not an error.
func (d *Dir) removeTree(name string) error {
	if err := d.trash(name); err != nil && !isMissing(err) {
		return err
	}
	return nil
}

// createTemp creates a new empty file in tmp/.
func (d *Dir) createTemp(kind string) (string, *os.File, error) {
	for range 10 {
		name := dirTmp + "/" + kind + "-" + randomHex(8)
		f, err := d.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fsError(err, "create temporary file")
		}
		return name, f, nil
	}
	return "", nil, errs.E(errs.Internal, "create temporary file: too many name collisions")
}

// discard closes f and removes the temporary file name unless it was
// renamed away already. It is safe to call after finishTemp and publish.
func (d *Dir) discard(name string, f *os.File) {
	f.Close()
	if err := d.root.Remove(name); err != nil && !isMissing(err) {
		d.log.Warn("removing a temporary file failed", "path", filepath.Join(d.path, name), "err", err)
	}
}

// finishTemp makes a fully written temporary file durable: it checks ctx
// one last time, fsyncs, stamps the modification time (which ETags use, and
// which the file system may record only to a few milliseconds) and closes.
func (d *Dir) finishTemp(ctx context.Context, name string, f *os.File) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("upload cancelled: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fsError(err, "sync temporary file")
	}
	if err := f.Close(); err != nil {
		return fsError(err, "close temporary file")
	}
	now := time.Now()
	if err := d.root.Chtimes(name, now, now); err != nil {
		return fsError(err, "set modification time")
	}
	return nil
}

// publish renames the temporary file tmp to key's path, creating the
// directories above it, and fsyncs the directory it lands in.
func (d *Dir) publish(tmp, key string) error {
	return d.place(tmp, key, false)
}

// publishNew links the temporary file tmp to key's path, which must not
// exist: link(2) checks and creates the name in one step, so of two
// writers exactly one wins. The caller removes tmp. On a file system
// without hard links it falls back to a check and a rename under a lock,
// which holds between the writers of this Dir only.
func (d *Dir) publishNew(tmp, key string) error {
	err := d.place(tmp, key, true)
	if !errors.Is(err, errNoLinks) {
		return err
	}
	d.newMu.Lock()
	defer d.newMu.Unlock()
	if _, err := d.root.Lstat(blobPath(key)); err == nil {
		return d.existsError(key)
	} else if !isMissing(err) {
		return fsError(err, "publish blob "+key)
	}
	return d.publish(tmp, key)
}

// errNoLinks is place's error when the file system has no hard links.
var errNoLinks = errors.New("hard links not supported")

// place renames tmp to key's path, or links it there when link is set,
// creating the directories above it, and fsyncs the directory it lands in.
func (d *Dir) place(tmp, key string, link bool) error {
	p := blobPath(key)
	parent := path.Dir(p)
	op := d.root.Rename
	if link {
		op = d.link
	}
	var err error
	// A concurrent Delete may remove a directory we just created because
	// it was empty: make it again.
	for range 100 {
		err = d.mkdirs(key, parent)
		if err == nil {
			err = op(tmp, p)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		switch {
		case link && errors.Is(err, syscall.EEXIST):
			return d.existsError(key)
		case link && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EMLINK)):
			return errNoLinks
		case errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY):
			return errs.Errorf(errs.Conflict, "blob key %q is a directory of other blobs", ClipKey(key))
		case errors.Is(err, syscall.ENOTDIR):
			return conflictParent(key)
		}
		return fsError(err, "publish blob "+key)
	}
	if err := d.syncDir(parent); err != nil && !isMissing(err) {
		return fsError(err, "sync directory of blob "+key)
	}
	return nil
}

// existsError is PutIfAbsent's error when key's path exists: a blob, or a
// directory of other blobs.
func (d *Dir) existsError(key string) error {
	if fi, err := d.root.Lstat(blobPath(key)); err == nil && fi.IsDir() {
		return errs.Errorf(errs.Conflict, "blob key %q is a directory of other blobs", ClipKey(key))
	}
	return errs.Errorf(errs.AlreadyExists, "blob %q already exists", ClipKey(key))
}

// mkdirs creates dir (a path under blobs/) and its missing parents, and
// fsyncs the parent of each directory it creates.
func (d *Dir) mkdirs(key, dir string) error {
	var missing []string
	for p := dir; p != dirBlobs; p = path.Dir(p) {
		fi, err := d.root.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return conflictParent(key)
			}
			break
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return conflictParent(key)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "create directories of blob "+key)
		}
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		err := d.root.Mkdir(missing[i], 0o700)
		switch {
		case err == nil, errors.Is(err, fs.ErrExist):
		case errors.Is(err, fs.ErrNotExist):
			return err // a parent was removed meanwhile: publish retries
		case errors.Is(err, syscall.ENOTDIR):
			return conflictParent(key)
		default:
			return fsError(err, "create directories of blob "+key)
		}
	}
	for _, m := range missing {
		if err := d.syncDir(path.Dir(m)); err != nil && !isMissing(err) {
			return fsError(err, "sync directories of blob "+key)
		}
	}
	return nil
}

// removeEmptyDirs removes dir and its parents up to blobs/ while they are
// empty. Failures only leave an empty directory behind.
func (d *Dir) removeEmptyDirs(dir string) {
	for ; dir != dirBlobs && dir != "."; dir = path.Dir(dir) {
		if err := d.root.Remove(dir); err != nil {
			return // not empty, or gone
		}
	}
}

func (d *Dir) syncDir(name string) error {
	f, err := d.root.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// blobError maps the error of opening or stating a blob's path.
func (d *Dir) blobError(err error, key, op string) error {
	if isMissing(err) {
		return notFound(key)
	}
	return fsError(err, op+" "+key)
}

func conflictParent(key string) error {
	return errs.Errorf(errs.Conflict, "blob key %q is under another blob, not a directory", ClipKey(key))
}

// blobPath is the path of key's blob relative to the root.
func blobPath(key string) string { return dirBlobs + "/" + key }

func readDir(r *os.Root, name string) ([]os.DirEntry, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// isMissing reports whether err says a path does not exist, or that a
// component of it is not a directory (so it cannot exist).
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// fsError wraps a file system error: a full disk or quota becomes
// errs.InsufficientStorage, anything else errs.Internal. An *errs.Error
// passes through.
func fsError(err error, op string) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return err // mapped already
	}
	if isDiskFull(err) {
		return &errs.Error{
			Code: errs.InsufficientStorage,
			Msg:  "not enough storage space",
			Hint: "free space on the volume of the blob directory, or raise its quota",
			Err:  fmt.Errorf("%s: %w", op, err),
		}
	}
	return errs.Wrap(errs.Internal, err, op)
}

func fileInfo(key string, fi fs.FileInfo) Info {
	mt := fi.ModTime()
	return Info{
		Key:     key,
		Size:    fi.Size(),
		ModTime: mt,
		// Inode, size and nanosecond mtime: a Put makes a new inode and
		// stamps the time, so two versions never share an ETag.
		ETag: fmt.Sprintf("%x-%x-%x", fileIno(fi), fi.Size(), mt.UnixNano()),
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// fileReader reads [off, end) of an open file.
type fileReader struct {
	f        *os.File
	off, end int64
}

// Read implements io.Reader with ReadAt, so it never moves the file offset.
func (r *fileReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	if rem := r.end - r.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF {
		if r.off < r.end {
			return n, errs.Wrap(errs.Internal, io.ErrUnexpectedEOF, "blob file shrank while being read")
		}
		err = nil
	}
	return n, err
}

// WriteTo implements io.WriterTo: it hands w an *io.LimitedReader of the
// *os.File itself, which lets w's ReadFrom (a TCP connection's, an
// http.ResponseWriter's, a file's) copy in the kernel.
func (r *fileReader) WriteTo(w io.Writer) (int64, error) {
	if r.off >= r.end {
		return 0, nil
	}
	if _, err := r.f.Seek(r.off, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.Copy(w, &io.LimitedReader{R: r.f, N: r.end - r.off})
	r.off += n
	if err == nil && r.off < r.end {
		err = errs.Wrap(errs.Internal, io.ErrUnexpectedEOF, "blob file shrank while being read")
	}
	return n, err
}

// Close closes the file.
func (r *fileReader) Close() error { return r.f.Close() }
