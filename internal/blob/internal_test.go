package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"testing"

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
			b := NewBodyReader(t.Context(), tt.body, tt.size)
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
			if b.Failure() == nil {
				t.Error("failure() = nil after an error")
			}
			if _, err2 := b.Read(make([]byte, 1)); err2 != err {
				t.Errorf("error is not sticky: %v then %v", err, err2)
			}
		})
	}
	// The surplus check happens before the last bytes are handed over.
	t.Run("LongNoLastBytes", func(t *testing.T) {
		b := NewBodyReader(t.Context(), strings.NewReader("abcdef"), 3)
		n, err := b.Read(make([]byte, 10))
		if n != 0 || !errs.Is(err, errs.Invalid) {
			t.Errorf("Read = %d, %v; want 0 and an invalid error", n, err)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := io.ReadAll(NewBodyReader(ctx, strings.NewReader("x"), -1))
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

// errReader fails every Read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
