package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

func TestS3Error(t *testing.T) {
	s := &Store{bucket: "b"}
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
	s := &Store{opts: Options{PartSize: 16 << 20}}
	f := func(size int64, num int, want int64) {
		t.Helper()
		if got := s.partSize(size, num); got != want {
			t.Errorf("partSize(%d, %d) = %d, want %d", size, num, got, want)
		}
	}
	f(100<<20, 1, 16<<20)
	f(1<<40, 1, (1<<40+blob.MaxPartNumber-1)/blob.MaxPartNumber) // 1 TiB: parts over 16 MiB
	f(-1, 1, 16<<20)
	f(-1, 2000, 16<<20)
	f(-1, 2001, 32<<20)
	f(-1, 10000, 256<<20)
	var total int64
	for n := 1; n <= blob.MaxPartNumber; n++ {
		total += s.partSize(-1, n)
	}
	if total < 900<<30 {
		t.Errorf("unknown-size uploads reach only %d GiB", total>>30)
	}
}
