package blob

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// A multipart upload in a Dir is the directory uploads/<id>, where id is
// 128 random bits in hex. It holds the file "key" (the key the upload is
// for) and one file per uploaded part, "<n>.<etag>", with etag the part's
// MD5 in hex: CompleteMultipart finds a part by number and ETag, so the
// ETag check costs nothing and a part uploaded again under the same number
// with other bytes never gets mixed up with the first one.

const uploadKeyFile = "key"

// CreateMultipart implements Store.
func (d *Dir) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	id := randomHex(16)
	dir := dirUploads + "/" + id
	if err := d.root.Mkdir(dir, 0o755); err != nil {
		return "", fsError(err, "create multipart upload")
	}
	f, err := d.root.OpenFile(dir+"/"+uploadKeyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = io.WriteString(f, key)
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err == nil {
		err = d.syncDir(dir)
	}
	if err == nil {
		err = d.syncDir(dirUploads)
	}
	if err != nil {
		_ = d.root.RemoveAll(dir)
		return "", fsError(err, "create multipart upload")
	}
	return id, nil
}

// PutPart implements Store.
func (d *Dir) PutPart(ctx context.Context, key, uploadID string, partNumber int, r io.Reader, size int64) (string, error) {
	if err := validatePart(key, uploadID, partNumber, size); err != nil {
		return "", err
	}
	dir, err := d.upload(key, uploadID)
	if err != nil {
		return "", err
	}
	tmp, f, err := d.createTemp("part")
	if err != nil {
		return "", err
	}
	defer d.discard(tmp, f)
	h := md5.New()
	_, rerr, werr := copyBody(io.MultiWriter(f, h), newBodyReader(ctx, r, size))
	switch {
	case rerr != nil:
		return "", rerr
	case werr != nil:
		return "", fsError(werr, "write part of "+key)
	}
	if err := d.finishTemp(ctx, tmp, f); err != nil {
		return "", err
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if err := d.root.Rename(tmp, partPath(dir, partNumber, etag)); err != nil {
		if isMissing(err) {
			return "", uploadNotFound(key, uploadID) // aborted meanwhile
		}
		return "", fsError(err, "store part of "+key)
	}
	if err := d.syncDir(dir); err != nil && !isMissing(err) {
		return "", fsError(err, "sync part of "+key)
	}
	return etag, nil
}

// CompleteMultipart implements Store. It checks every part before copying
// any, then concatenates them into a temporary file (copy_file_range where
// the file system has it) and renames that into place.
func (d *Dir) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	if uploadID == "" {
		return Info{}, errs.E(errs.Invalid, "upload ID is empty")
	}
	if err := validateParts(parts); err != nil {
		return Info{}, err
	}
	dir, err := d.upload(key, uploadID)
	if err != nil {
		return Info{}, err
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		etag := strings.ToLower(strings.Trim(p.ETag, `"`))
		if !isHex(etag, md5.Size*2) {
			return Info{}, errs.Errorf(errs.Invalid, "part %d: ETag %q does not match the uploaded part", p.Number, clip(p.ETag))
		}
		names[i] = partPath(dir, p.Number, etag)
		fi, err := d.root.Stat(names[i])
		if err != nil {
			if !isMissing(err) {
				return Info{}, fsError(err, "read part of "+key)
			}
			if _, err := d.root.Stat(dir); isMissing(err) {
				return Info{}, uploadNotFound(key, uploadID)
			}
			return Info{}, errs.Errorf(errs.Invalid, "part %d with ETag %q was not uploaded", p.Number, clip(p.ETag))
		}
		if i < len(parts)-1 && fi.Size() < MinPartSize {
			return Info{}, errs.Errorf(errs.Invalid, "part %d is %d bytes: every part but the last must have at least %d", p.Number, fi.Size(), MinPartSize)
		}
	}

	tmp, f, err := d.createTemp("complete")
	if err != nil {
		return Info{}, err
	}
	defer d.discard(tmp, f)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return Info{}, err
		}
		if err := appendFile(f, d.root, name); err != nil {
			if isMissing(err) {
				return Info{}, uploadNotFound(key, uploadID) // aborted meanwhile
			}
			return Info{}, fsError(err, "concatenate parts of "+key)
		}
	}
	if err := d.finishTemp(ctx, tmp, f); err != nil {
		return Info{}, err
	}
	if err := d.publish(tmp, key); err != nil {
		return Info{}, err
	}
	if err := d.removeTree(dir); err != nil {
		d.log.Warn("removing a completed multipart upload failed", "upload", uploadID, "err", err)
	}
	return d.Stat(context.WithoutCancel(ctx), key)
}

// AbortMultipart implements Store.
func (d *Dir) AbortMultipart(ctx context.Context, key, uploadID string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if uploadID == "" {
		return errs.E(errs.Invalid, "upload ID is empty")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, err := d.upload(key, uploadID)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil
		}
		return err
	}
	if err := d.removeTree(dir); err != nil {
		return fsError(err, "abort multipart upload")
	}
	return nil
}

// upload returns the directory of the upload uploadID for key, or
// errs.NotFound when there is none (a malformed ID included: it cannot
// exist, and the other backend has opaque IDs).
func (d *Dir) upload(key, uploadID string) (string, error) {
	if !isHex(uploadID, 32) {
		return "", uploadNotFound(key, uploadID)
	}
	dir := dirUploads + "/" + uploadID
	got, err := d.root.ReadFile(dir + "/" + uploadKeyFile)
	if err != nil {
		if isMissing(err) {
			return "", uploadNotFound(key, uploadID)
		}
		return "", fsError(err, "read multipart upload")
	}
	if string(got) != key {
		return "", uploadNotFound(key, uploadID)
	}
	return dir, nil
}

func partPath(dir string, n int, etag string) string {
	return dir + "/" + strconv.Itoa(n) + "." + etag
}

// appendFile copies the file name under r to the end of dst.
func appendFile(dst *os.File, r *os.Root, name string) error {
	src, err := r.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	// *os.File's ReadFrom uses copy_file_range for an *io.LimitedReader of
	// another *os.File.
	n, err := io.Copy(dst, &io.LimitedReader{R: src, N: fi.Size()})
	if err == nil && n != fi.Size() {
		err = fmt.Errorf("part %s: %w", name, io.ErrUnexpectedEOF)
	}
	return err
}

// isHex reports whether s is n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

