package blob

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/sextant/sextant/internal/errs"
)

// BodyReader reads an upload body, enforcing its declared size and ctx.
//
// With size >= 0 it fails with errs.Invalid when r ends early, and checks
// for surplus bytes as soon as the size-th byte has been read, before
// returning it: a consumer that publishes on seeing EOF (an HTTP request
// with a Content-Length) gets the error instead of the last bytes, so a
// body longer than declared never publishes a truncated blob. Once it has
// failed it keeps returning the same error.
type BodyReader struct {
	ctx  context.Context
	r    io.Reader
	size int64 // -1: unknown
	n    int64 // bytes returned so far
	err  error // sticky failure (not io.EOF)
	eof  bool
}

// NewBodyReader reads size bytes (-1: unknown) of r for an upload, failing
// once ctx is done.
func NewBodyReader(ctx context.Context, r io.Reader, size int64) *BodyReader {
	return &BodyReader{ctx: ctx, r: r, size: size}
}

// Read implements io.Reader.
func (b *BodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.eof {
		return 0, io.EOF
	}
	if err := b.ctx.Err(); err != nil {
		return 0, b.fail(fmt.Errorf("upload cancelled: %w", err))
	}
	if b.size >= 0 {
		rem := b.size - b.n
		if rem == 0 {
			return 0, b.probe()
		}
		if int64(len(p)) > rem {
			p = p[:rem]
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		if b.size >= 0 && b.n < b.size {
			return n, b.fail(errs.Errorf(errs.Invalid, "upload body ended after %d of %d bytes", b.n, b.size))
		}
		b.eof = true
		return n, io.EOF
	case err != nil:
		return n, b.fail(fmt.Errorf("read upload body: %w", err))
	case b.size >= 0 && b.n == b.size:
		// Check for surplus before handing over the last bytes.
		if err := b.probe(); err != io.EOF {
			return 0, err
		}
		return n, io.EOF
	}
	return n, nil
}

// probe reads past the declared size: io.EOF if there is nothing more,
// otherwise the (sticky) failure.
func (b *BodyReader) probe() error {
	var one [1]byte
	for range 100 {
		n, err := b.r.Read(one[:])
		if n > 0 {
			return b.fail(errs.Errorf(errs.Invalid, "upload body is longer than the declared %d bytes", b.size))
		}
		if err == io.EOF {
			b.eof = true
			return io.EOF
		}
		if err != nil {
			return b.fail(fmt.Errorf("read upload body: %w", err))
		}
	}
	return b.fail(fmt.Errorf("read upload body: %w", io.ErrNoProgress))
}

func (b *BodyReader) fail(err error) error {
	b.err = err
	return err
}

// Failure returns the error the body failed with, or nil. Backends check it
// after the transport failed, to report the body's error (a short body is
// the client's mistake) rather than the transport's wrapping of it.
func (b *BodyReader) Failure() error { return b.err }

// copyBufSize is the buffer of copyBody: large enough that a fast disk or
// network is not held back by system calls.
const copyBufSize = 1 << 20

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyBody copies src to dst through one pooled copyBufSize buffer and
// tells a failure to read src (rerr) from a failure to write dst (werr). It
// avoids io.Copy so that dst's ReadFrom (an *os.File's) cannot pick a
// 32 KiB buffer of its own.
func copyBody(dst io.Writer, src io.Reader) (written int64, rerr, werr error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			m, err := dst.Write(buf[:n])
			written += int64(m)
			if err != nil {
				return written, nil, err
			}
			if m != n {
				return written, nil, io.ErrShortWrite
			}
		}
		if err == io.EOF {
			return written, nil, nil
		}
		if err != nil {
			return written, err, nil
		}
	}
}
