package volumes

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// Files inside volumes. A file is a blob under "<volume id>/<path>"; a
// directory exists while something is under it, or while it holds the
// DirMarker that MakeDir leaves, so that `mkdir -p` makes directories that
// stay until they are deleted. Uploads are atomic (the blob store's Put):
// a file is visible only once completely written.

// MetadataName is the file a PyTorch Distributed Checkpoint writes last,
// which marks the checkpoint of its directory complete. An upload of a file
// with this name is refused while other uploads into its directory are in
// flight (on any replica: uploads are claimed in the store), so that no
// client can publish it before the shards it describes have landed.
const MetadataName = ".metadata"

// MaxPageSize is the largest (and the default) page of a directory
// listing.
const MaxPageSize = 1000

// FileInfo describes a file in a volume.
type FileInfo struct {
	Path    Path
	Size    int64
	ModTime time.Time
	// ETag changes whenever the file is written.
	ETag string
}

// DirEntry is one child of a listed directory.
type DirEntry struct {
	// Name is the child's name (no slash).
	Name    string
	IsDir   bool
	Size    int64     // files only
	ModTime time.Time // files only
}

func blobKey(v *Volume, rel string) string { return v.ID + "/" + rel }

func dirPrefix(v *Volume, rel string) string {
	if rel == "" {
		return v.ID + "/"
	}
	return v.ID + "/" + rel + "/"
}

// fileError replaces the blob store's messages, which name internal keys,
// with ones about the volume path.
func fileError(err error, p Path) error {
	switch errs.CodeOf(err) {
	case errs.NotFound:
		return errs.Wrap(errs.NotFound, err, "file "+p.String()+" does not exist")
	case errs.Conflict:
		return errs.Wrap(errs.Conflict, err, p.String()+": a directory exists at this path, or a file at one of its parent directories")
	}
	return err
}

// PutFile stores the bytes of r (size bytes, -1 if unknown) as the file p
// (CAN_EDIT on the volume), creating its directories. The file appears
// only once completely written. With overwrite false an existing file is
// errs.AlreadyExists. A volume deleted while the file was being written is
// errs.NotFound and keeps nothing.
func (s *Service) PutFile(ctx context.Context, sub *workspace.Subject, p Path, r io.Reader, size int64, overwrite bool) (FileInfo, error) {
	if p.Rel == "" {
		return FileInfo{}, errs.Errorf(errs.Invalid, "%s is the root of a volume, not a file path", p)
	}
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	if err != nil {
		return FileInfo{}, err
	}
	end, err := s.beginUpload(ctx, v, p, overwrite)
	if err != nil {
		return FileInfo{}, err
	}
	landed := false
	defer func() { end(landed) }()
	if err := s.checkFileSlot(ctx, v, p); err != nil {
		return FileInfo{}, err
	}
	key := blobKey(v, p.Rel)
	if err := s.refuseExisting(ctx, v, p, overwrite); err != nil {
		return FileInfo{}, err
	}
	put := s.blobs.Put
	if !overwrite {
		// The claim refuses a second upload in flight; PutIfAbsent also
		// covers one that landed since refuseExisting looked.
		put = s.blobs.PutIfAbsent
	}
	if _, err := put(ctx, key, r, size); err != nil {
		if errs.Is(err, errs.AlreadyExists) {
			return FileInfo{}, errs.Errorf(errs.AlreadyExists, "file %s already exists (overwrite=false)", p)
		}
		return FileInfo{}, fileError(err, p)
	}
	// The file is there: earlier uploads of it (attempts this one retries,
	// perhaps through a server that died since) hold nothing back now.
	landed = true
	return s.landed(ctx, v, p)
}

// landed checks a file just published: a volume deleted meanwhile has had
// its files removed, or is about to, so the file must not stay. It returns
// the file's Info.
func (s *Service) landed(ctx context.Context, v *Volume, p Path) (FileInfo, error) {
	key := blobKey(v, p.Rel)
	cur, err := s.store.GetVolume(ctx, v.Catalog, v.Schema, v.Name)
	if (err == nil && cur.ID != v.ID) || errs.Is(err, errs.NotFound) {
		if derr := s.blobs.Delete(context.WithoutCancel(ctx), key); derr != nil {
			s.log.Warn("drop a file written into a deleted volume", "volume_id", v.ID, "err", derr)
		}
		return FileInfo{}, errs.Errorf(errs.NotFound, "volume %s was deleted while %s was being written; nothing was stored", v.FullName(), p)
	}
	if err != nil {
		return FileInfo{}, err
	}
	info, err := s.blobs.Stat(ctx, key)
	if err != nil {
		return FileInfo{}, fileError(err, p)
	}
	return FileInfo{Path: p, Size: info.Size, ModTime: info.ModTime, ETag: info.ETag}, nil
}

// refuseExisting is errs.AlreadyExists when p exists and overwrite is
// false.
func (s *Service) refuseExisting(ctx context.Context, v *Volume, p Path, overwrite bool) error {
	if overwrite {
		return nil
	}
	if _, err := s.blobs.Stat(ctx, blobKey(v, p.Rel)); err == nil {
		return errs.Errorf(errs.AlreadyExists, "file %s already exists (overwrite=false)", p)
	} else if !errs.Is(err, errs.NotFound) {
		return err
	}
	return nil
}

// checkFileSlot refuses a file path that is a directory, or that has a
// file as one of its directories (the S3 store would accept both).
func (s *Service) checkFileSlot(ctx context.Context, v *Volume, p Path) error {
	entries, err := s.blobs.List(ctx, dirPrefix(v, p.Rel), "", 1)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return errs.Errorf(errs.Conflict, "%s is a directory", p)
	}
	for d := p.Dir(); d.Rel != ""; d = d.Dir() {
		if _, err := s.blobs.Stat(ctx, blobKey(v, d.Rel)); err == nil {
			return errs.Errorf(errs.Conflict, "%s is a file, so it cannot hold %s", d, p)
		} else if !errs.Is(err, errs.NotFound) {
			return err
		}
	}
	return nil
}

// StatFile returns a file's Info (CAN_READ on the volume).
func (s *Service) StatFile(ctx context.Context, sub *workspace.Subject, p Path) (FileInfo, error) {
	v, err := s.access(ctx, sub, p, workspace.CanRead)
	if err != nil {
		return FileInfo{}, err
	}
	return s.statFile(ctx, v, p)
}

func (s *Service) statFile(ctx context.Context, v *Volume, p Path) (FileInfo, error) {
	if p.Rel == "" {
		return FileInfo{}, errs.Errorf(errs.NotFound, "%s is a directory, not a file", p)
	}
	info, err := s.blobs.Stat(ctx, blobKey(v, p.Rel))
	if err != nil {
		if errs.Is(err, errs.NotFound) && s.dirExists(ctx, v, p) {
			return FileInfo{}, errs.Errorf(errs.NotFound, "%s is a directory, not a file", p)
		}
		return FileInfo{}, fileError(err, p)
	}
	return FileInfo{Path: p, Size: info.Size, ModTime: info.ModTime, ETag: info.ETag}, nil
}

// OpenFile opens a file for reading (CAN_READ on the volume): it stats the
// file, asks pick which byte range to read given its Info (pick may refuse
// with an error, such as an unsatisfiable range), and opens that range of
// one version of the file, even while it is being overwritten. When the
// open finds a newer version than the stat did, that version is kept if
// pick chooses the same range for it (an overwrite of the same size), so
// overwrites in a loop do not starve the reader; else the range is picked
// again for the version the open found. The caller closes the reader.
func (s *Service) OpenFile(ctx context.Context, sub *workspace.Subject, p Path, pick func(FileInfo) (offset, length int64, err error)) (io.ReadCloser, FileInfo, error) {
	v, err := s.access(ctx, sub, p, workspace.CanRead)
	if err != nil {
		return nil, FileInfo{}, err
	}
	st, err := s.statFile(ctx, v, p)
	if err != nil {
		return nil, FileInfo{}, err
	}
	for range 5 {
		off, n, err := pick(st)
		if err != nil {
			return nil, st, err
		}
		rc, info, err := s.blobs.Open(ctx, blobKey(v, p.Rel), off, n)
		if err != nil {
			// Deleted, or replaced by a version shorter than the range's
			// start, between the stat and the open: look again.
			if !errs.Is(err, errs.NotFound) && !errs.Is(err, errs.Invalid) {
				return nil, st, fileError(err, p)
			}
			if st, err = s.statFile(ctx, v, p); err != nil {
				return nil, FileInfo{}, err
			}
			continue
		}
		got := FileInfo{Path: p, Size: info.Size, ModTime: info.ModTime, ETag: info.ETag}
		if got.ETag == st.ETag && got.Size == st.Size {
			return rc, st, nil
		}
		if off2, n2, err := pick(got); err == nil && off2 == off && n2 == n {
			return rc, got, nil
		}
		rc.Close()
		st = got
	}
	return nil, FileInfo{}, errs.Errorf(errs.Unavailable, "%s is being rewritten, retry", p)
}

// OpenWholeFile opens a whole file for reading (CAN_READ on the volume)
// with one open of the blob, and no stat to agree with: the version it
// reads is the one that was there when it opened, so overwrites in a loop
// cannot starve it (and on S3 it takes one request instead of two). check
// may refuse the file given its Info (a failed If-Unmodified-Since). The
// caller closes the reader.
func (s *Service) OpenWholeFile(ctx context.Context, sub *workspace.Subject, p Path, check func(FileInfo) error) (io.ReadCloser, FileInfo, error) {
	v, err := s.access(ctx, sub, p, workspace.CanRead)
	if err != nil {
		return nil, FileInfo{}, err
	}
	if p.Rel == "" {
		return nil, FileInfo{}, errs.Errorf(errs.NotFound, "%s is a directory, not a file", p)
	}
	rc, info, err := s.blobs.Open(ctx, blobKey(v, p.Rel), 0, -1)
	if err != nil {
		if !errs.Is(err, errs.NotFound) {
			return nil, FileInfo{}, fileError(err, p)
		}
		// The stat says why: no such file, or a directory.
		if _, err := s.statFile(ctx, v, p); err != nil {
			return nil, FileInfo{}, err
		}
		return nil, FileInfo{}, errs.Errorf(errs.Unavailable, "%s was being written, retry", p)
	}
	st := FileInfo{Path: p, Size: info.Size, ModTime: info.ModTime, ETag: info.ETag}
	if err := check(st); err != nil {
		rc.Close()
		return nil, st, err
	}
	return rc, st, nil
}

// DeleteFile deletes a file (CAN_EDIT on the volume).
func (s *Service) DeleteFile(ctx context.Context, sub *workspace.Subject, p Path) error {
	if p.Rel == "" {
		return errs.Errorf(errs.Invalid, "%s is the root of a volume: delete the volume instead", p)
	}
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	if err != nil {
		return err
	}
	key := blobKey(v, p.Rel)
	if _, err := s.blobs.Stat(ctx, key); err != nil {
		if errs.Is(err, errs.NotFound) && s.dirExists(ctx, v, p) {
			return errs.Errorf(errs.Invalid, "%s is a directory: delete it with DELETE /api/2.0/fs/directories%s once it is empty", p, p)
		}
		return fileError(err, p)
	}
	return s.blobs.Delete(ctx, key)
}

// dirExists reports whether something is under the directory p.
func (s *Service) dirExists(ctx context.Context, v *Volume, p Path) bool {
	entries, err := s.blobs.List(ctx, dirPrefix(v, p.Rel), "", 1)
	return err == nil && len(entries) > 0
}

// MakeDir creates the directory p and its parents, as `mkdir -p` does
// (CAN_EDIT on the volume). Existing directories are fine; a file in the
// way is errs.Conflict.
func (s *Service) MakeDir(ctx context.Context, sub *workspace.Subject, p Path) error {
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	if err != nil {
		return err
	}
	if p.Rel == "" {
		return nil
	}
	segs := strings.Split(p.Rel, "/")
	for i := range segs {
		d := Path{Catalog: p.Catalog, Schema: p.Schema, Volume: p.Volume, Rel: strings.Join(segs[:i+1], "/")}
		if _, err := s.blobs.Stat(ctx, blobKey(v, d.Rel)); err == nil {
			return errs.Errorf(errs.Conflict, "%s is a file", d)
		} else if !errs.Is(err, errs.NotFound) {
			return err
		}
		marker := blobKey(v, d.Rel+"/"+DirMarker)
		if _, err := s.blobs.Stat(ctx, marker); err == nil {
			continue
		} else if !errs.Is(err, errs.NotFound) {
			return err
		}
		if _, err := s.blobs.Put(ctx, marker, strings.NewReader(""), 0); err != nil {
			return fileError(err, d)
		}
	}
	return nil
}

// StatDir returns nil when the directory p exists (CAN_READ on the
// volume).
func (s *Service) StatDir(ctx context.Context, sub *workspace.Subject, p Path) error {
	v, err := s.access(ctx, sub, p, workspace.CanRead)
	if err != nil {
		return err
	}
	if p.Rel == "" || s.dirExists(ctx, v, p) {
		return nil
	}
	return s.noDir(ctx, v, p)
}

func (s *Service) noDir(ctx context.Context, v *Volume, p Path) error {
	if _, err := s.blobs.Stat(ctx, blobKey(v, p.Rel)); err == nil {
		return errs.Errorf(errs.NotFound, "%s is a file, not a directory", p)
	}
	return errs.Errorf(errs.NotFound, "directory %s does not exist", p)
}

// ListDir returns a page of the children of the directory p (CAN_READ on
// the volume), by name, and the token of the next page ("" at the end).
// pageSize <= 0 or above MaxPageSize means MaxPageSize.
func (s *Service) ListDir(ctx context.Context, sub *workspace.Subject, p Path, pageToken string, pageSize int) ([]DirEntry, string, error) {
	if pageSize <= 0 || pageSize > MaxPageSize {
		pageSize = MaxPageSize
	}
	after, err := decodePageToken(pageToken)
	if err != nil {
		return nil, "", err
	}
	v, err := s.access(ctx, sub, p, workspace.CanRead)
	if err != nil {
		return nil, "", err
	}
	raw, err := s.blobs.List(ctx, dirPrefix(v, p.Rel), after, pageSize+2)
	if err != nil {
		return nil, "", err
	}
	if len(raw) == 0 && after == "" && p.Rel != "" {
		return nil, "", s.noDir(ctx, v, p)
	}
	out := make([]DirEntry, 0, len(raw))
	for _, e := range raw {
		if e.Name == DirMarker {
			continue
		}
		out = append(out, DirEntry{Name: strings.TrimSuffix(e.Name, "/"), IsDir: e.IsDir, Size: e.Size, ModTime: e.ModTime})
	}
	next := ""
	if len(out) > pageSize {
		out = out[:pageSize]
		last := out[pageSize-1]
		name := last.Name
		if last.IsDir {
			name += "/"
		}
		next = base64.RawURLEncoding.EncodeToString([]byte(name))
	}
	return out, next, nil
}

func decodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	name := strings.TrimSuffix(string(b), "/")
	if err != nil || name == "" || strings.Contains(name, "/") || blob.ValidateKey(name) != nil {
		return "", errs.Errorf(errs.Invalid, "invalid page_token %q: pass the next_page_token of the previous page", errs.Truncate(tok, 120))
	}
	return string(b), nil
}

// DeleteDir deletes an empty directory (CAN_EDIT on the volume). One that
// holds files or directories is errs.Conflict: delete its contents first.
func (s *Service) DeleteDir(ctx context.Context, sub *workspace.Subject, p Path) error {
	if p.Rel == "" {
		return errs.Errorf(errs.Invalid, "%s is the root of a volume: delete the volume instead", p)
	}
	v, err := s.access(ctx, sub, p, workspace.CanEdit)
	if err != nil {
		return err
	}
	entries, err := s.blobs.List(ctx, dirPrefix(v, p.Rel), "", 2)
	if err != nil {
		return err
	}
	switch {
	case len(entries) == 0:
		return s.noDir(ctx, v, p)
	case len(entries) == 1 && entries[0].Name == DirMarker:
		return s.blobs.Delete(ctx, blobKey(v, p.Rel+"/"+DirMarker))
	}
	return errs.Errorf(errs.Conflict, "directory %s is not empty: delete what it holds first", p)
}

// ---- uploads in flight ----

// uploadClaimTTL is how long an upload's claim lasts unless renewed; a
// claim is renewed every third of it while the upload runs. A claim also
// goes with the server instance carrying its request (Service.Start), and
// when a later upload of the same file lands.
const uploadClaimTTL = 2 * time.Minute

// beginUpload claims an upload of p into volume v in the store and returns
// the function that ends it, told whether the file landed. It refuses a
// MetadataName upload while other files of its directory are being
// uploaded, and, with overwrite false, an upload of a file that is being
// uploaded already, whichever replica serves them.
func (s *Service) beginUpload(ctx context.Context, v *Volume, p Path, overwrite bool) (func(landed bool), error) {
	u, err := s.claimUpload(ctx, v, p, overwrite, s.instance)
	if err != nil {
		return nil, err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(uploadClaimTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.renewClaim(ctx, u)
			}
		}
	}()
	return func(landed bool) {
		close(stop)
		<-done
		s.releaseClaim(ctx, u, landed)
	}, nil
}

// claimUpload records an upload of p in flight, carried by a request to
// instance ("" for a multipart upload; see Store.ClaimUpload): a .metadata
// waits for the other files of its directory, and with overwrite false a
// second upload of one file is refused.
func (s *Service) claimUpload(ctx context.Context, v *Volume, p Path, overwrite bool, instance string) (*Upload, error) {
	name := p.Name()
	now := s.nowMs()
	u := &Upload{VolumeID: v.ID, Dir: p.Dir().Rel, Name: name, Instance: instance, StartedMs: now, ExpiresMs: now + uploadClaimTTL.Milliseconds()}
	err := s.store.ClaimUpload(ctx, u, now, func(inFlight []Upload) error {
		if name == MetadataName {
			if busy := describeBusy(inFlight, name, now); busy != "" {
				return errs.Errorf(errs.Conflict, "%s: %s; a checkpoint's .metadata is published only after every shard has landed: retry once they have", p, busy)
			}
		}
		if !overwrite && slices.ContainsFunc(inFlight, func(o Upload) bool { return o.Name == name }) {
			return errs.Errorf(errs.AlreadyExists, "file %s is being written by another upload (overwrite=false)", p)
		}
		return nil
	})
	if errs.Is(err, errs.NotFound) {
		return nil, errs.Errorf(errs.NotFound, "volume %s does not exist", v.FullName())
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// describeBusy says which files other than self are being uploaded, and
// for how long, or "" when none is.
func describeBusy(inFlight []Upload, self string, nowMs int64) string {
	started := map[string]int64{}
	var names []string
	for _, o := range inFlight {
		if o.Name == self {
			continue
		}
		if _, ok := started[o.Name]; !ok {
			names = append(names, o.Name)
			started[o.Name] = o.StartedMs
		}
		started[o.Name] = min(started[o.Name], o.StartedMs)
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	parts := make([]string, 0, min(len(names), 5))
	for _, n := range names[:min(len(names), 5)] {
		if t := started[n]; t > 0 && nowMs >= t {
			n += fmt.Sprintf(" (for %s)", (time.Duration(nowMs-t) * time.Millisecond).Round(time.Second))
		}
		parts = append(parts, n)
	}
	more := ""
	if len(names) > len(parts) {
		more = fmt.Sprintf(" and %d more", len(names)-len(parts))
	}
	return fmt.Sprintf("%d other file(s) of this directory are still being uploaded: %s%s", len(names), errs.Truncate(strings.Join(parts, ", "), 120), more)
}

func (s *Service) renewClaim(ctx context.Context, u *Upload) {
	if err := s.store.RenewUpload(context.WithoutCancel(ctx), u.ID, s.nowMs()+uploadClaimTTL.Milliseconds()); err != nil {
		s.log.Warn("renew an upload's claim", "volume_id", u.VolumeID, "dir", u.Dir, "name", u.Name, "err", err)
	}
}

func (s *Service) releaseClaim(ctx context.Context, u *Upload, landed bool) {
	if err := s.store.ReleaseUpload(context.WithoutCancel(ctx), u, landed); err != nil {
		s.log.Warn("release an upload's claim (it expires on its own)", "volume_id", u.VolumeID, "dir", u.Dir, "name", u.Name, "err", err)
	}
}
