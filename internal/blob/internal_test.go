package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sextant/sextant/internal/errs"
)

func TestBodyReader(t *testing.T) {
	errBoom := errors.New("boom")
	tests := map[string]struct {
		body     io.Reader
		size     int64
		want     string
		wantCode errs.Code
		wantErr  error
	}{
		"Exact":        {body: strings.NewReader("hello"), size: 5, want: "hello"},
		"Unsized":      {body: strings.NewReader("hello"), size: -1, want: "hello"},
		"Empty":        {body: strings.NewReader(""), size: 0, want: ""},
		"ErrShort":     {body: strings.NewReader("hell"), size: 5, wantCode: errs.Invalid},
		"ErrLong":      {body: strings.NewReader("hello!"), size: 5, wantCode: errs.Invalid},
		"ErrLongEmpty": {body: strings.NewReader("x"), size: 0, wantCode: errs.Invalid},
		"ErrRead":      {body: io.MultiReader(strings.NewReader("he"), errReader{errBoom}), size: 5, wantErr: errBoom},
		"ErrReadAfter": {body: io.MultiReader(strings.NewReader("hello"), errReader{errBoom}), size: 5, wantErr: errBoom},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBodyReader(t.Context(), tt.body, tt.size)
			got, err := io.ReadAll(b)
			switch {
			case tt.wantCode != "":
				if !errs.Is(err, tt.wantCode) {
					t.Fatalf("err = %v, want code %s", err, tt.wantCode)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			default:
				if err != nil || string(got) != tt.want {
					t.Fatalf("read %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if b.failure() == nil {
				t.Error("failure() = nil after an error")
			}
			if _, err2 := b.Read(make([]byte, 1)); err2 != err {
				t.Errorf("error is not sticky: %v then %v", err, err2)
			}
		})
	}
	// The surplus check happens before the last bytes are handed over.
	t.Run("LongNoLastBytes", func(t *testing.T) {
		b := newBodyReader(t.Context(), strings.NewReader("abcdef"), 3)
		n, err := b.Read(make([]byte, 10))
		if n != 0 || !errs.Is(err, errs.Invalid) {
			t.Errorf("Read = %d, %v; want 0 and an invalid error", n, err)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := io.ReadAll(newBodyReader(ctx, strings.NewReader("x"), -1))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestFSError(t *testing.T) {
	pathErr := func(e error) error { return &fs.PathError{Op: "write", Path: "/x", Err: e} }
	tests := map[string]struct {
		err  error
		want errs.Code
	}{
		"ENOSPC":      {pathErr(syscall.ENOSPC), errs.InsufficientStorage},
		"EDQUOT":      {pathErr(syscall.EDQUOT), errs.InsufficientStorage},
		"Wrapped":     {fmt.Errorf("sync: %w", pathErr(syscall.ENOSPC)), errs.InsufficientStorage},
		"EIO":         {pathErr(syscall.EIO), errs.Internal},
		"Passthrough": {errs.E(errs.Invalid, "bad"), errs.Invalid},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := errs.CodeOf(fsError(tt.err, "op")); got != tt.want {
				t.Errorf("code %s, want %s", got, tt.want)
			}
		})
	}
}

func TestS3Error(t *testing.T) {
	s := &S3{bucket: "b"}
	resp := func(code string, status int) error {
		return minio.ErrorResponse{Code: code, StatusCode: status, Message: "msg " + code}
	}
	tests := map[string]struct {
		err  error
		want errs.Code
	}{
		"NoSuchKey":      {resp("NoSuchKey", 404), errs.NotFound},
		"NoSuchUpload":   {resp("NoSuchUpload", 404), errs.NotFound},
		"NoSuchBucket":   {resp("NoSuchBucket", 404), errs.Internal},
		"InvalidPart":    {resp("InvalidPart", 400), errs.Invalid},
		"EntityTooSmall": {resp("EntityTooSmall", 400), errs.Invalid},
		"StorageFull":    {resp("XMinioStorageFull", 507), errs.InsufficientStorage},
		"Status507":      {resp("Whatever", 507), errs.InsufficientStorage},
		"SlowDown":       {resp("SlowDown", 503), errs.Unavailable},
		"Status500":      {resp("Other", 500), errs.Unavailable},
		"Status429":      {resp("", 429), errs.Unavailable},
		"AccessDenied":   {resp("AccessDenied", 403), errs.Internal},
		"Wrapped":        {fmt.Errorf("x: %w", resp("NoSuchKey", 404)), errs.NotFound},
		"Refused":        {&url.Error{Op: "Put", URL: "http://x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, errs.Unavailable},
		"UnexpectedEOF":  {io.ErrUnexpectedEOF, errs.Unavailable},
		"Ours":           {errs.E(errs.Invalid, "short body"), errs.Invalid},
		"Other":          {errors.New("weird"), errs.Internal},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := errs.CodeOf(s.error(t.Context(), tt.err, "op", "k")); got != tt.want {
				t.Errorf("code %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.error(ctx, resp("InternalError", 500), "op", "k"); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestContentRangeTotal(t *testing.T) {
	f := func(h string, want int64, wantOK bool) {
		t.Helper()
		if got, ok := contentRangeTotal(h); got != want || ok != wantOK {
			t.Errorf("contentRangeTotal(%q) = %d, %v; want %d, %v", h, got, ok, want, wantOK)
		}
	}
	f("bytes 0-9/100", 100, true)
	f("bytes 5-5/6", 6, true)
	f("bytes */100", 100, true)
	f("bytes 0-9/*", 0, false)
	f("", 0, false)
	f("0-9/100", 0, false)
}

func TestPartSize(t *testing.T) {
	s := &S3{opts: S3Options{PartSize: 16 << 20}}
	f := func(size int64, num int, want int64) {
		t.Helper()
		if got := s.partSize(size, num); got != want {
			t.Errorf("partSize(%d, %d) = %d, want %d", size, num, got, want)
		}
	}
	f(100<<20, 1, 16<<20)
	f(1<<40, 1, (1<<40+MaxPartNumber-1)/MaxPartNumber) // 1 TiB: parts over 16 MiB
	f(-1, 1, 16<<20)
	f(-1, 2000, 16<<20)
	f(-1, 2001, 32<<20)
	f(-1, 10000, 256<<20)
	var total int64
	for n := 1; n <= MaxPartNumber; n++ {
		total += s.partSize(-1, n)
	}
	if total < 900<<30 {
		t.Errorf("unknown-size uploads reach only %d GiB", total>>30)
	}
}

// errReader fails every Read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
