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
// for) and one file per uploaded part, named by its number ("1", "2", ...):
// the part's MD5 in hex (32 bytes, its ETag), then the part's bytes. A part
// uploaded again replaces the file atomically by rename, like a blob, so the
// last upload of a number wins, and CompleteMultipart checks ETags by
// reading 32 bytes.

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
	if err := d.root.Mkdir(dir, 0o700); err != nil {
		return "", fsError(err, "create multipart upload")
	}
	f, err := d.root.OpenFile(dir+"/"+uploadKeyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
	if err := ValidatePart(key, uploadID, partNumber, size); err != nil {
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
	// Room for the ETag, written once the bytes are hashed.
	if _, err := f.Write(make([]byte, etagLen)); err != nil {
		return "", fsError(err, "write part of "+key)
	}
	h := md5.New()
	_, rerr, werr := copyBody(io.MultiWriter(f, h), NewBodyReader(ctx, r, size))
	switch {
	case rerr != nil:
		return "", rerr
	case werr != nil:
		return "", fsError(werr, "write part of "+key)
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if _, err := f.WriteAt([]byte(etag), 0); err != nil {
		return "", fsError(err, "write part of "+key)
	}
	if err := d.finishTemp(ctx, tmp, f); err != nil {
		return "", err
	}
	if err := d.root.Rename(tmp, partPath(dir, partNumber)); err != nil {
		if isMissing(err) {
			return "", UploadNotFound(key, uploadID) // aborted meanwhile
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
	if err := ValidateParts(parts); err != nil {
		return Info{}, err
	}
	dir, err := d.upload(key, uploadID)
	if err != nil {
		return Info{}, err
	}
	// Check every part before copying any.
	for i, p := range parts {
		size, err := d.checkPart(dir, p)
		if err != nil {
			if isMissing(err) {
				if _, err := d.root.Stat(dir); isMissing(err) {
					return Info{}, UploadNotFound(key, uploadID)
				}
				return Info{}, errs.Errorf(errs.Invalid, "part %d was not uploaded", p.Number)
			}
			return Info{}, fsError(err, "read part of "+key)
		}
		if i < len(parts)-1 && size < MinPartSize {
			return Info{}, errs.Errorf(errs.Invalid, "part %d is %d bytes: every part but the last must have at least %d", p.Number, size, MinPartSize)
		}
	}

	tmp, f, err := d.createTemp("complete")
	if err != nil {
		return Info{}, err
	}
	defer d.discard(tmp, f)
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return Info{}, err
		}
		if err := appendPart(f, d.root, partPath(dir, p.Number), p.ETag); err != nil {
			if errs.Is(err, errs.Invalid) {
				return Info{}, err // replaced meanwhile
			}
			if isMissing(err) {
				return Info{}, UploadNotFound(key, uploadID) // aborted meanwhile
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
		return "", UploadNotFound(key, uploadID)
	}
	dir := dirUploads + "/" + uploadID
	got, err := d.root.ReadFile(dir + "/" + uploadKeyFile)
	if err != nil {
		if isMissing(err) {
			return "", UploadNotFound(key, uploadID)
		}
		return "", fsError(err, "read multipart upload")
	}
	if string(got) != key {
		return "", UploadNotFound(key, uploadID)
	}
	return dir, nil
}

// etagLen is the length of a part's ETag, and of the header of its file.
const etagLen = 2 * md5.Size

func partPath(dir string, n int) string {
	return dir + "/" + strconv.Itoa(n)
}

// checkPart returns the size of part p, or errs.Invalid if its ETag is not
// p.ETag, or the file system's error (missing: not uploaded).
func (d *Dir) checkPart(dir string, p Part) (int64, error) {
	f, err := d.root.Open(partPath(dir, p.Number))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fsError(err, "read part")
	}
	if err := checkETag(f, p.Number, p.ETag); err != nil {
		return 0, err
	}
	return fi.Size() - etagLen, nil
}

// checkETag reads the ETag header of part file f and compares it with
// etag (quotes and case do not matter).
func checkETag(f *os.File, n int, etag string) error {
	var stored [etagLen]byte
	if _, err := f.ReadAt(stored[:], 0); err != nil {
		return fsError(err, "read part")
	}
	if strings.ToLower(strings.Trim(etag, `"`)) != string(stored[:]) {
		return errs.Errorf(errs.Invalid, "part %d: ETag %q does not match the uploaded part", n, ClipKey(etag))
	}
	return nil
}

// appendPart copies the bytes of part file name to the end of dst, after
// checking its ETag again (the part may have been uploaded anew).
func appendPart(dst *os.File, r *os.Root, name, etag string) error {
	src, err := r.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(name[strings.LastIndexByte(name, '/')+1:])
	if err := checkETag(src, n, etag); err != nil {
		return err
	}
	if _, err := src.Seek(etagLen, io.SeekStart); err != nil {
		return err
	}
	// *os.File's ReadFrom uses copy_file_range for an *io.LimitedReader of
	// another *os.File.
	size := fi.Size() - etagLen
	copied, err := io.Copy(dst, &io.LimitedReader{R: src, N: size})
	if err == nil && copied != size {
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
