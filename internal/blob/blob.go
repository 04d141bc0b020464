// Package blob stores blobs (run artifacts, checkpoint files) under
// slash-separated keys behind one interface, Store, with two backends: a
// local directory (Dir, the default, here) and an S3-compatible object
// store (package blob/s3).
//
// Blobs can be many GiB: every method streams, and memory use does not grow
// with a blob's size (each backend documents its bound). Writes are atomic:
// a reader sees the old blob or the complete new one, never a part.
//
// It holds the rules every backend applies (keys, ranges, parts), for
// blob/s3 too, and imports only the standard library: the domain packages
// store blobs through Store without pulling in an S3 or HTTP library. The
// conformance suite every backend passes is in blob/blobtest.
package blob

import (
	"context"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// Limits of keys and multipart uploads. The multipart ones are S3's, and
// every backend enforces them so that a client that works with one backend
// works with all.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 1024
	// MaxSegmentLen is the longest segment of a key (the part between two
	// slashes), in bytes: the longest file name of common file systems.
	MaxSegmentLen = 255
	// MinPartSize is the smallest part of a multipart upload, in bytes,
	// except the last part, which may be smaller.
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part of a multipart upload, in bytes.
	MaxPartSize = 5 << 30
	// MaxPartNumber is the highest part number of a multipart upload. Part
	// numbers start at 1.
	MaxPartNumber = 10000
)

// Store holds blobs under slash-separated keys such as
// "exp/1/run/abc/artifacts/model/MLmodel" (see ValidateKey for the rules).
//
// Every method validates its key and returns errs.Invalid for a bad one;
// prefixes are "" (everything) or a valid key followed by "/". Errors carry
// an errs.Code: errs.NotFound for a missing blob or upload, errs.Invalid for
// a bad argument, errs.InsufficientStorage when the storage is full,
// errs.Unavailable for a transient failure of a remote store (retrying may
// help), errs.Internal for anything else. An error caused by ctx wraps
// ctx.Err().
//
// All methods are safe for concurrent use. Keys are not directories: a
// "directory" is the set of keys that share a prefix, and it exists while one
// of them does. Backends that store directories for real (Dir) refuse with
// errs.Conflict a key that names a directory of other keys ("a" while "a/b"
// exists) or has a blob as a directory ("a/b" while "a" exists); S3 allows
// both.
type Store interface {
	// Put stores the bytes of r under key and returns the number stored.
	// It is atomic: readers see the old blob or the complete new one,
	// never a part of it, and when Put fails (an error reading r, ctx
	// cancelled) nothing changes under key. size is the length of r's
	// content, or -1 when unknown: if r ends before size bytes, or has more,
	// Put fails with errs.Invalid and stores nothing. Of two concurrent Puts
	// to one key, one wins and the blob is exactly its content. Put reads r
	// until EOF (or size bytes and a check for more) and never closes it.
	Put(ctx context.Context, key string, r io.Reader, size int64) (int64, error)

	// PutIfAbsent is Put that stores r only if no blob is under key: when
	// one is (already, or stored by another writer while r was read), it
	// stores nothing and returns errs.AlreadyExists. The check and the
	// publication are one atomic step, so of concurrent PutIfAbsents to a
	// free key exactly one succeeds and the blob is its content; a Put
	// racing with it may replace it afterwards. It is what overwrite=false
	// means for the Files API.
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (int64, error)

	// Open returns a reader of the bytes [offset, offset+length) of the blob
	// under key, and the blob's Info (its whole size, not the range's). A
	// length of -1 reads to the end; a range that runs past the end stops at
	// the end, and an offset equal to the size gives an empty reader. An
	// offset past the end, a negative offset or a length below -1 is
	// errs.Invalid; a missing blob is errs.NotFound. The reader sees the
	// blob as it was when Open returned, even if it is replaced or deleted
	// meanwhile (on S3, the blob as it was when the request was answered).
	// The caller must close it; reads may fail with the causes of Open's
	// errors, and on S3 when ctx ends.
	Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, Info, error)

	// Stat returns the Info of the blob under key, or errs.NotFound.
	Stat(ctx context.Context, key string) (Info, error)

	// List returns the immediate children of the directory prefix ("" for
	// the root, otherwise ending with "/"): the blobs directly under it and
	// the directories that hold more, sorted by Entry.Name in byte order.
	// Pagination: it returns the entries whose Name sorts after after ("" for
	// the first page), at most limit of them (limit <= 0: all). A prefix with
	// nothing under it gives an empty list, not an error.
	List(ctx context.Context, prefix, after string, limit int) ([]Entry, error)

	// Delete removes the blob under key. A missing blob is not an error.
	Delete(ctx context.Context, key string) error

	// DeleteAll removes every blob whose key starts with prefix, which must
	// end with "/" (so "a/" never removes "ab/x"); the empty prefix is
	// refused with errs.Invalid rather than wiping the store. Nothing under
	// prefix is not an error. Uploads in progress under prefix are not
	// touched. On S3 readers may see a partly deleted prefix meanwhile.
	DeleteAll(ctx context.Context, prefix string) error

	// CreateMultipart starts a multipart upload to key and returns its ID:
	// parts are uploaded with PutPart, in any order and in parallel, then
	// CompleteMultipart publishes them as one blob atomically, or
	// AbortMultipart drops them. An upload survives a restart of the
	// server, so a client can resume it; Dir removes uploads left untouched
	// for DirOptions.UploadMaxAge, S3 keeps them until aborted or removed by
	// a bucket lifecycle rule.
	CreateMultipart(ctx context.Context, key string) (uploadID string, err error)

	// PutPart stores part partNumber (1 to MaxPartNumber) of an upload and
	// returns its ETag, which CompleteMultipart needs. size is the part's
	// length and must be known (0 to MaxPartSize); a body shorter or longer
	// is errs.Invalid. Uploading a part number again replaces that part. An
	// unknown upload (or one for another key) is errs.NotFound.
	PutPart(ctx context.Context, key, uploadID string, partNumber int, r io.Reader, size int64) (etag string, err error)

	// CompleteMultipart publishes the concatenation of parts (in ascending
	// part number order, each with the ETag PutPart returned, every part
	// but the last at least MinPartSize) as the blob under key, atomically
	// as Put does, ends the upload and returns the blob's Info. A wrong
	// order, an ETag that does not match, a missing or small part is
	// errs.Invalid and leaves the upload as it was; an unknown upload is
	// errs.NotFound.
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) (Info, error)

	// AbortMultipart ends an upload and drops its parts. Aborting an
	// unknown, completed or aborted upload is not an error.
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Info describes a stored blob.
type Info struct {
	// Key is the blob's key.
	Key string
	// Size is the blob's length in bytes.
	Size int64
	// ModTime is when the blob was last written.
	ModTime time.Time
	// ETag changes whenever the blob is written, so it suits HTTP ETags
	// and caches. It is opaque: S3's ETag on S3 (an MD5 for simple uploads,
	// not for multipart ones), a value derived from the file's identity,
	// size and modification time in a Dir.
	ETag string
}

// Entry is one child of a directory in a List result.
type Entry struct {
	// Name is the child's key relative to the listed prefix: a blob's last
	// key segment ("MLmodel"), or a directory's followed by "/" ("model/").
	// The slash keeps a blob and a directory of the same name apart (S3
	// can hold both) and makes byte order the order of keys.
	Name string
	// IsDir reports whether the child is a directory (Name ends with "/").
	IsDir bool
	// Size is a blob's length in bytes; 0 for a directory.
	Size int64
	// ModTime is when a blob was last written; zero for a directory.
	ModTime time.Time
}

// Part names one uploaded part of a multipart upload, for
// CompleteMultipart.
type Part struct {
	// Number is the part number given to PutPart.
	Number int
	// ETag is the ETag PutPart returned.
	ETag string
}

// ValidateKey returns an errs.Invalid error naming the first rule key
// breaks, or nil. A key is valid UTF-8 of 1 to MaxKeyLen bytes made of
// segments separated by single slashes; it does not start or end with a
// slash; no segment is empty, ".", ".." or longer than MaxSegmentLen bytes;
// and it holds no backslash and no control character (NUL, newline, DEL,
// C1 controls). Any other character is allowed, spaces, '#', '%', '+' and
// non-ASCII letters included. A valid key is always a local relative path
// (filepath.IsLocal) on Unix.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return errs.E(errs.Invalid, "invalid blob key: empty")
	case len(key) > MaxKeyLen:
		return errs.Errorf(errs.Invalid, "invalid blob key: longer than %d bytes (%d)", MaxKeyLen, len(key))
	case !utf8.ValidString(key):
		return invalidKey(key, "not valid UTF-8")
	case key[0] == '/':
		return invalidKey(key, "starts with /: keys are relative")
	case key[len(key)-1] == '/':
		return invalidKey(key, "ends with /")
	}
	for _, r := range key {
		switch {
		case r == '\\':
			return invalidKey(key, "contains a backslash")
		case unicode.IsControl(r):
			return invalidKey(key, "contains a control character")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return invalidKey(key, "contains an empty segment (//)")
		case seg == "." || seg == "..":
			return invalidKey(key, "contains a "+seg+" segment")
		case len(seg) > MaxSegmentLen:
			return invalidKey(key, "has a segment longer than 255 bytes")
		}
	}
	return nil
}

// ValidatePrefix checks a directory prefix: "" or a valid key plus "/".
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !strings.HasSuffix(prefix, "/") {
		return invalidKey(prefix, "a prefix must be empty or end with /")
	}
	if err := ValidateKey(prefix[:len(prefix)-1]); err != nil {
		return errs.Errorf(errs.Invalid, "invalid blob prefix %q: %s", ClipKey(prefix), strings.TrimPrefix(errs.MessageOf(err), "invalid blob key: "))
	}
	return nil
}

// ValidateAfter checks List's after argument: a child name, optionally with
// a trailing slash.
func ValidateAfter(after string) error {
	if after == "" {
		return nil
	}
	name := strings.TrimSuffix(after, "/")
	if strings.Contains(name, "/") {
		return errs.Errorf(errs.Invalid, "invalid list position %q: a name, not a path", ClipKey(after))
	}
	if err := ValidateKey(name); err != nil {
		return errs.Errorf(errs.Invalid, "invalid list position %q", ClipKey(after))
	}
	return nil
}

// ValidatePart checks the arguments of PutPart shared by the backends.
func ValidatePart(key, uploadID string, partNumber int, size int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if uploadID == "" {
		return errs.E(errs.Invalid, "upload ID is empty")
	}
	if partNumber < 1 || partNumber > MaxPartNumber {
		return errs.Errorf(errs.Invalid, "part number %d is out of range [1, %d]", partNumber, MaxPartNumber)
	}
	if size < 0 {
		return errs.E(errs.Invalid, "the size of a part must be known")
	}
	if size > MaxPartSize {
		return errs.Errorf(errs.Invalid, "part size %d is over the limit of %d bytes", size, int64(MaxPartSize))
	}
	return nil
}

// ValidateParts checks CompleteMultipart's part list: not empty, part
// numbers in range and strictly ascending, ETags present.
func ValidateParts(parts []Part) error {
	if len(parts) == 0 {
		return errs.E(errs.Invalid, "a multipart upload needs at least one part")
	}
	prev := 0
	for _, p := range parts {
		if p.Number < 1 || p.Number > MaxPartNumber {
			return errs.Errorf(errs.Invalid, "part number %d is out of range [1, %d]", p.Number, MaxPartNumber)
		}
		if p.Number <= prev {
			return errs.Errorf(errs.Invalid, "parts must be in ascending order of part number: %d after %d", p.Number, prev)
		}
		if p.ETag == "" {
			return errs.Errorf(errs.Invalid, "part %d has no ETag", p.Number)
		}
		prev = p.Number
	}
	return nil
}

// ValidateRange checks Open's offset and length.
func ValidateRange(offset, length int64) error {
	if offset < 0 {
		return errs.Errorf(errs.Invalid, "negative offset %d", offset)
	}
	if length < -1 {
		return errs.Errorf(errs.Invalid, "invalid length %d (-1 reads to the end)", length)
	}
	return nil
}

// ClampRange returns the end (exclusive) of [offset, offset+length) cut at
// size, or an errs.Invalid error when offset is past the end.
func ClampRange(key string, offset, length, size int64) (int64, error) {
	if offset > size {
		return 0, errs.Errorf(errs.Invalid, "offset %d is past the end of blob %q (%d bytes)", offset, ClipKey(key), size)
	}
	if length < 0 || length > size-offset {
		return size, nil
	}
	return offset + length, nil
}

func invalidKey(key, reason string) error {
	return errs.Errorf(errs.Invalid, "invalid blob key %q: %s", ClipKey(key), reason)
}

// ClipKey shortens s for an error message: its first 80 bytes, whole
// characters only, and "…" when it was cut.
func ClipKey(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return errs.Clip(s, n) + "…"
}

// notFound is the error for a missing blob.
func notFound(key string) error {
	return errs.Errorf(errs.NotFound, "blob %q not found", ClipKey(key))
}

// UploadNotFound is the error for a missing multipart upload.
func UploadNotFound(key, uploadID string) error {
	return errs.Errorf(errs.NotFound, "multipart upload %q for blob %q not found", ClipKey(uploadID), ClipKey(key))
}
