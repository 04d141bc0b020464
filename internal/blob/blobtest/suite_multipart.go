package blobtest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

func testMultipart(t *testing.T, s blob.Store) {
	ctx := t.Context()
	key := "ckpt/model.safetensors"
	parts := [][]byte{RandomBytes(blob.MinPartSize, 11), RandomBytes(blob.MinPartSize+123, 12), RandomBytes(4567, 13)}
	id, err := s.CreateMultipart(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if id == "" {
		t.Fatal("CreateMultipart returned an empty upload ID")
	}
	// Upload out of order, two of them at once.
	etags := make([]string, len(parts))
	var wg sync.WaitGroup
	for _, i := range []int{2, 0} {
		wg.Go(func() {
			etags[i] = MustPutPart(t, s, key, id, i+1, parts[i])
		})
	}
	wg.Wait()
	// Part 2 first uploaded with other bytes, then again: the last wins.
	wrong := MustPutPart(t, s, key, id, 2, RandomBytes(blob.MinPartSize+123, 99))
	etags[1] = MustPutPart(t, s, key, id, 2, parts[1])
	if wrong == etags[1] {
		t.Fatalf("two different part bodies got the same ETag %q", wrong)
	}
	if _, err := s.Stat(ctx, key); !errs.Is(err, errs.NotFound) {
		t.Fatalf("blob visible before CompleteMultipart: %v", err)
	}

	// A wrong ETag is refused and leaves the upload usable.
	_, err = s.CompleteMultipart(ctx, key, id, []blob.Part{{Number: 1, ETag: etags[0]}, {Number: 2, ETag: wrong}, {Number: 3, ETag: etags[2]}})
	WantCode(t, err, errs.Invalid)
	_, err = s.CompleteMultipart(ctx, key, id, []blob.Part{{Number: 1, ETag: etags[0]}, {Number: 2, ETag: "0123456789abcdef0123456789abcdef"}, {Number: 3, ETag: etags[2]}})
	WantCode(t, err, errs.Invalid)

	info, err := s.CompleteMultipart(ctx, key, id, []blob.Part{{Number: 1, ETag: etags[0]}, {Number: 2, ETag: `"` + etags[1] + `"`}, {Number: 3, ETag: etags[2]}})
	if err != nil {
		t.Fatalf("CompleteMultipart: %v", err)
	}
	want := bytes.Join(parts, nil)
	if info.Key != key || info.Size != int64(len(want)) {
		t.Errorf("CompleteMultipart info = %+v, want key %s size %d", info, key, len(want))
	}
	got, oinfo := MustRead(t, s, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("completed blob (%d bytes) is not the concatenation of the parts (%d bytes)", len(got), len(want))
	}
	if oinfo.ETag != info.ETag {
		t.Errorf("ETag of CompleteMultipart %q differs from Open's %q", info.ETag, oinfo.ETag)
	}
	// The upload is over.
	_, err = s.CompleteMultipart(ctx, key, id, []blob.Part{{Number: 1, ETag: etags[0]}, {Number: 2, ETag: etags[1]}, {Number: 3, ETag: etags[2]}})
	WantCode(t, err, errs.NotFound)
	_, err = s.PutPart(ctx, key, id, 4, bytes.NewReader([]byte("x")), 1)
	WantCode(t, err, errs.NotFound)
	if err := s.AbortMultipart(ctx, key, id); err != nil {
		t.Errorf("AbortMultipart of a completed upload: %v", err)
	}

	t.Run("SinglePart", func(t *testing.T) {
		id, err := s.CreateMultipart(ctx, "single")
		if err != nil {
			t.Fatal(err)
		}
		etag := MustPutPart(t, s, "single", id, 7, []byte("tiny"))
		if _, err := s.CompleteMultipart(ctx, "single", id, []blob.Part{{Number: 7, ETag: etag}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := MustRead(t, s, "single"); string(got) != "tiny" {
			t.Errorf("read %q, want tiny", got)
		}
	})
	t.Run("Abort", func(t *testing.T) {
		id, err := s.CreateMultipart(ctx, "aborted")
		if err != nil {
			t.Fatal(err)
		}
		etag := MustPutPart(t, s, "aborted", id, 1, []byte("data"))
		if err := s.AbortMultipart(ctx, "aborted", id); err != nil {
			t.Fatal(err)
		}
		_, err = s.CompleteMultipart(ctx, "aborted", id, []blob.Part{{Number: 1, ETag: etag}})
		WantCode(t, err, errs.NotFound)
		_, err = s.PutPart(ctx, "aborted", id, 2, bytes.NewReader([]byte("x")), 1)
		WantCode(t, err, errs.NotFound)
		if err := s.AbortMultipart(ctx, "aborted", id); err != nil {
			t.Errorf("second AbortMultipart: %v", err)
		}
		_, err = s.Stat(ctx, "aborted")
		WantCode(t, err, errs.NotFound)
	})
}

func testMultipartErrors(t *testing.T, s blob.Store) {
	ctx := t.Context()
	id, err := s.CreateMultipart(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	small1 := MustPutPart(t, s, "k", id, 1, []byte("small"))
	small2 := MustPutPart(t, s, "k", id, 2, []byte("small too"))

	t.Run("SmallPart", func(t *testing.T) {
		_, err := s.CompleteMultipart(ctx, "k", id, []blob.Part{{Number: 1, ETag: small1}, {Number: 2, ETag: small2}})
		WantCode(t, err, errs.Invalid)
	})
	t.Run("Order", func(t *testing.T) {
		_, err := s.CompleteMultipart(ctx, "k", id, []blob.Part{{Number: 2, ETag: small2}, {Number: 1, ETag: small1}})
		WantCode(t, err, errs.Invalid)
		_, err = s.CompleteMultipart(ctx, "k", id, []blob.Part{{Number: 1, ETag: small1}, {Number: 1, ETag: small1}})
		WantCode(t, err, errs.Invalid)
		_, err = s.CompleteMultipart(ctx, "k", id, nil)
		WantCode(t, err, errs.Invalid)
	})
	t.Run("MissingPart", func(t *testing.T) {
		_, err := s.CompleteMultipart(ctx, "k", id, []blob.Part{{Number: 3, ETag: small1}})
		WantCode(t, err, errs.Invalid)
	})
	t.Run("PartNumber", func(t *testing.T) {
		for _, n := range []int{0, -1, blob.MaxPartNumber + 1} {
			_, err := s.PutPart(ctx, "k", id, n, bytes.NewReader([]byte("x")), 1)
			WantCode(t, err, errs.Invalid)
			_, err = s.CompleteMultipart(ctx, "k", id, []blob.Part{{Number: n, ETag: small1}})
			WantCode(t, err, errs.Invalid)
		}
	})
	t.Run("PartBody", func(t *testing.T) {
		_, err := s.PutPart(ctx, "k", id, 3, bytes.NewReader([]byte("x")), -1)
		WantCode(t, err, errs.Invalid)
		_, err = s.PutPart(ctx, "k", id, 3, onlyReader{bytes.NewReader([]byte("short"))}, 10)
		WantCode(t, err, errs.Invalid)
		_, err = s.PutPart(ctx, "k", id, 3, onlyReader{bytes.NewReader([]byte("longer than said"))}, 3)
		WantCode(t, err, errs.Invalid)
	})
	t.Run("UnknownUpload", func(t *testing.T) {
		for _, bad := range []string{"0123456789abcdef0123456789abcdef", "nope", id + "0"} {
			_, err := s.CompleteMultipart(ctx, "k", bad, []blob.Part{{Number: 1, ETag: small1}})
			WantCode(t, err, errs.NotFound)
			_, err = s.PutPart(ctx, "k", bad, 1, bytes.NewReader([]byte("x")), 1)
			WantCode(t, err, errs.NotFound)
			if err := s.AbortMultipart(ctx, "k", bad); err != nil {
				t.Errorf("AbortMultipart of unknown upload %q: %v", bad, err)
			}
		}
		// An upload belongs to its key.
		_, err := s.PutPart(ctx, "other", id, 1, bytes.NewReader([]byte("x")), 1)
		WantCode(t, err, errs.NotFound)
		_, err = s.CompleteMultipart(ctx, "other", id, []blob.Part{{Number: 1, ETag: small1}})
		WantCode(t, err, errs.NotFound)
		for _, err := range []error{
			func() error { _, err := s.PutPart(ctx, "k", "", 1, bytes.NewReader(nil), 0); return err }(),
			func() error {
				_, err := s.CompleteMultipart(ctx, "k", "", []blob.Part{{Number: 1, ETag: small1}})
				return err
			}(),
			s.AbortMultipart(ctx, "k", ""),
		} {
			WantCode(t, err, errs.Invalid)
		}
	})
	// After all those refusals the upload still completes.
	if _, err := s.CompleteMultipart(ctx, "k", id, []blob.Part{{Number: 2, ETag: small2}}); err != nil {
		t.Fatalf("CompleteMultipart after refusals: %v", err)
	}
	if got, _ := MustRead(t, s, "k"); string(got) != "small too" {
		t.Errorf("read %q", got)
	}
}
