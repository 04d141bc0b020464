package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/blobtest"
	"github.com/sextant/sextant/internal/blob/s3"
	"github.com/sextant/sextant/internal/errs"
)

// TestS3 runs the conformance suite against an S3 server: the one
// SEXTANT_TEST_S3_ENDPOINT names, or a MinIO the test starts (see
// blobtest.MustS3Server). Without either it fails, unless SEXTANT_TEST_S3=off.
func TestS3(t *testing.T) {
	srv := blobtest.MustS3Server(t)
	blobtest.RunStoreTests(t, func(t *testing.T) blob.Store { return srv.MustOpen(t) })
}

func TestOpenS3(t *testing.T) {
	srv := blobtest.MustS3Server(t)
	ctx := t.Context()
	base := srv.Options(t)
	tests := map[string]struct {
		edit func(o *s3.Options)
		code errs.Code
	}{
		"ErrNoBucket":      {func(o *s3.Options) { o.Bucket = "missing-" + strings.ToLower(t.Name()[:4]); o.CreateBucket = false }, errs.NotFound},
		"ErrEmptyEndpoint": {func(o *s3.Options) { o.Endpoint = "" }, errs.Invalid},
		"ErrBadURL":        {func(o *s3.Options) { o.Endpoint = "ftp://x" }, errs.Invalid},
		"ErrPrefix":        {func(o *s3.Options) { o.Prefix = "no-slash" }, errs.Invalid},
		"ErrPartSize":      {func(o *s3.Options) { o.PartSize = 1 << 20 }, errs.Invalid},
		"ErrCredentials":   {func(o *s3.Options) { o.SecretKey = "wrong" }, errs.Internal},
		"ErrUnreachable": {func(o *s3.Options) {
			o.Endpoint = closedAddr(t)
			o.MaxAttempts = 1
		}, errs.Unavailable},
		"OKURL": {func(o *s3.Options) {
			if !strings.Contains(o.Endpoint, "://") {
				o.Endpoint = "http://" + o.Endpoint
			}
		}, ""},
		"OKHostPort": {func(o *s3.Options) {
			if u, err := url.Parse(o.Endpoint); err == nil && u.Host != "" {
				o.Endpoint, o.UseSSL = u.Host, u.Scheme == "https"
			}
		}, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			opts := base
			tt.edit(&opts)
			s, err := s3.Open(ctx, opts)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			blobtest.WantCode(t, err, tt.code)
		})
	}
}

// TestS3Prefix checks that a store keeps to its prefix of the bucket.
func TestS3Prefix(t *testing.T) {
	srv := blobtest.MustS3Server(t)
	ctx := t.Context()
	a, b := srv.MustOpen(t), srv.MustOpen(t)
	blobtest.MustPut(t, a, "k", []byte("a"))
	blobtest.MustPut(t, b, "k", []byte("b"))
	if got, _ := blobtest.MustRead(t, a, "k"); string(got) != "a" {
		t.Errorf("store a reads %q", got)
	}
	if err := a.DeleteAll(ctx, "k/"); err != nil {
		t.Fatal(err)
	}
	if got := blobtest.MustList(t, b, "", "", 0); len(got) != 1 || got[0].Name != "k" {
		t.Errorf("store b lists %v", got)
	}
}

// TestS3AbortsFailedPut checks that a large Put that fails midway (the
// body errs, the context is cancelled) leaves no multipart upload behind.
func TestS3AbortsFailedPut(t *testing.T) {
	srv := blobtest.MustS3Server(t)
	opts := srv.Options(t)
	opts.PartSize = blob.MinPartSize
	s, err := s3.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	body := func() io.Reader {
		return io.MultiReader(bytes.NewReader(blobtest.RandomBytes(12<<20, 1)), iotest.ErrReader(errors.New("boom")))
	}
	for _, size := range []int64{-1, 20 << 20} {
		if _, err := s.Put(t.Context(), "failed", body(), size); err == nil {
			t.Fatal("Put of a failing body succeeded")
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := s.Put(ctx, "cancelled", slowReader{}, -1); err == nil {
		t.Fatal("cancelled Put succeeded")
	}
	for _, key := range []string{"failed", "cancelled"} {
		uploads, err := s3.IncompleteUploads(t.Context(), s, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(uploads) != 0 {
			t.Errorf("failed Puts left %d multipart uploads of %q", len(uploads), key)
		}
	}
}

// slowReader returns up to 8 MiB of zeros a millisecond, forever.
type slowReader struct{}

func (slowReader) Read(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	return copy(p, make([]byte, min(len(p), 8<<20))), nil
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
