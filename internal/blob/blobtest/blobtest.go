// Package blobtest holds the conformance suite that every blob.Store
// backend passes, and an S3 server (a MinIO it starts, or one named by the
// environment) for the tests of the S3 backend and of its users.
package blobtest

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// RunStoreTests runs the conformance suite against the stores open returns.
// open is called once per subtest and must return an empty store, which it
// closes at the subtest's cleanup if needed.
func RunStoreTests(t *testing.T, open func(t *testing.T) blob.Store) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("UnknownSize", func(t *testing.T) { testUnknownSize(t, open) })
	t.Run("Range", func(t *testing.T) { testRange(t, open) })
	t.Run("Overwrite", func(t *testing.T) { testOverwrite(t, open(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { testConcurrentPuts(t, open(t)) })
	t.Run("BadBody", func(t *testing.T) { testBadBody(t, open) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, open) })
	t.Run("Stat", func(t *testing.T) { testStat(t, open(t)) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, open(t)) })
	t.Run("List", func(t *testing.T) { testList(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("DeleteAll", func(t *testing.T) { testDeleteAll(t, open(t)) })
	t.Run("Multipart", func(t *testing.T) { testMultipart(t, open(t)) })
	t.Run("MultipartErrors", func(t *testing.T) { testMultipartErrors(t, open(t)) })
	t.Run("InvalidKeys", func(t *testing.T) { testInvalidKeys(t, open(t)) })
	t.Run("SpecialKeys", func(t *testing.T) { testSpecialKeys(t, open(t)) })
	t.Run("Usage", func(t *testing.T) { testUsage(t, open(t)) })
}

// MustPut stores data under key or fails tb.
func MustPut(tb testing.TB, s blob.Store, key string, data []byte) {
	tb.Helper()
	n, err := s.Put(tb.Context(), key, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		tb.Fatalf("Put(%q): %v", clipKey(key), err)
	}
	if n != int64(len(data)) {
		tb.Fatalf("Put(%q) stored %d bytes, want %d", clipKey(key), n, len(data))
	}
}

// MustRead returns the content and Info of the blob under key or fails tb.
func MustRead(tb testing.TB, s blob.Store, key string) ([]byte, blob.Info) {
	tb.Helper()
	rc, info, err := s.Open(tb.Context(), key, 0, -1)
	if err != nil {
		tb.Fatalf("Open(%q): %v", clipKey(key), err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		tb.Fatalf("read %q: %v", clipKey(key), err)
	}
	return data, info
}

// MustList lists prefix or fails tb.
func MustList(tb testing.TB, s blob.Store, prefix, after string, limit int) []blob.Entry {
	tb.Helper()
	got, err := s.List(tb.Context(), prefix, after, limit)
	if err != nil {
		tb.Fatalf("List(%q, %q, %d): %v", prefix, after, limit, err)
	}
	return got
}

// MustPutPart uploads a part or fails tb, and returns its ETag.
func MustPutPart(tb testing.TB, s blob.Store, key, uploadID string, n int, data []byte) string {
	tb.Helper()
	etag, err := s.PutPart(tb.Context(), key, uploadID, n, onlyReader{bytes.NewReader(data)}, int64(len(data)))
	if err != nil {
		tb.Errorf("PutPart(%q, part %d): %v", key, n, err)
		return ""
	}
	if etag == "" {
		tb.Errorf("PutPart(%q, part %d) returned an empty ETag", key, n)
	}
	return etag
}

// WantCode fails tb unless err carries code.
func WantCode(tb testing.TB, err error, code errs.Code) {
	tb.Helper()
	if err == nil {
		tb.Errorf("got no error, want an error with code %s", code)
		return
	}
	if got := errs.CodeOf(err); got != code {
		tb.Errorf("got error %v with code %s, want code %s", err, got, code)
	}
}

// RandomBytes returns n pseudo-random bytes from seed.
func RandomBytes(n int64, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	_, _ = r.Read(b)
	return b
}

func names(es []blob.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}

// sameEntries compares names, kinds and sizes, not times.
func sameEntries(a, b []blob.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y blob.Entry) bool {
		return x.Name == y.Name && x.IsDir == y.IsDir && x.Size == y.Size
	})
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

func clipKey(k string) string {
	if len(k) > 60 {
		return fmt.Sprintf("%s…(%d bytes)", k[:60], len(k))
	}
	return k
}

// onlyReader hides every method but Read (bytes.Reader's Seek, ReadAt and
// WriteTo), as a network body would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// chunkReader returns data at most chunk bytes per Read.
type chunkReader struct {
	data  []byte
	chunk int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// errReader fails every Read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cancelReader calls cancel once it has returned after bytes, and from then
// on returns its bytes slowly, as a client that is still sending would.
type cancelReader struct {
	r      io.Reader
	after  int64
	n      int64
	cancel func()
}

func (c *cancelReader) Read(p []byte) (int, error) {
	if c.n >= c.after {
		c.cancel()
		time.Sleep(time.Millisecond)
		p = p[:min(len(p), 4096)]
	} else {
		p = p[:min(int64(len(p)), c.after-c.n)]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
