package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

func testRoundTrip(t *testing.T, open func(t *testing.T) blob.Store) {
	for name, size := range map[string]int{"Empty": 0, "OneByte": 1, "TenMiB": 10 << 20} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			data := RandomBytes(int64(size), uint64(size))
			key := "exp/1/run/abc/artifacts/blob-" + name
			n, err := s.Put(t.Context(), key, bytes.NewReader(data), int64(size))
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if n != int64(size) {
				t.Errorf("Put stored %d bytes, want %d", n, size)
			}
			got, info := MustRead(t, s, key)
			if sha256.Sum256(got) != sha256.Sum256(data) {
				t.Fatalf("read back %d bytes that differ from the %d put", len(got), len(data))
			}
			if info.Key != key || info.Size != int64(size) {
				t.Errorf("Open info = %+v, want key %q size %d", info, key, size)
			}
		})
	}
}

func testUnknownSize(t *testing.T, open func(t *testing.T) blob.Store) {
	// 20 MiB is over the S3 backend's default part size: it goes multipart.
	for name, size := range map[string]int{"Empty": 0, "Small": 1000, "TwentyMiB": 20 << 20} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			data := RandomBytes(int64(size), 7)
			n, err := s.Put(t.Context(), "k", onlyReader{bytes.NewReader(data)}, -1)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if n != int64(size) {
				t.Errorf("Put stored %d bytes, want %d", n, size)
			}
			if got, _ := MustRead(t, s, "k"); !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes that differ from the %d put", len(got), len(data))
			}
		})
	}
}

func testRange(t *testing.T, open func(t *testing.T) blob.Store) {
	s := open(t)
	data := RandomBytes(1000, 3)
	MustPut(t, s, "r", data)
	MustPut(t, s, "empty", nil)
	tests := map[string]struct {
		key            string
		offset, length int64
		want           []byte
		code           errs.Code
	}{
		"Start":          {"r", 0, 10, data[:10], ""},
		"Middle":         {"r", 100, 50, data[100:150], ""},
		"End":            {"r", 990, 10, data[990:], ""},
		"PastEnd":        {"r", 990, 100, data[990:], ""},
		"ToEnd":          {"r", 500, -1, data[500:], ""},
		"Whole":          {"r", 0, -1, data, ""},
		"ZeroLength":     {"r", 10, 0, nil, ""},
		"AtEnd":          {"r", 1000, -1, nil, ""},
		"AtEndLength":    {"r", 1000, 5, nil, ""},
		"EmptyBlob":      {"empty", 0, 5, nil, ""},
		"EmptyBlobToEnd": {"empty", 0, -1, nil, ""},
		"OffsetPastEnd":  {"r", 1001, -1, nil, errs.Invalid},
		"NegativeOffset": {"r", -1, 5, nil, errs.Invalid},
		"BadLength":      {"r", 0, -2, nil, errs.Invalid},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rc, info, err := s.Open(t.Context(), tt.key, tt.offset, tt.length)
			if tt.code != "" {
				if err == nil {
					rc.Close()
				}
				WantCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("read %d bytes, want %d (%x... vs %x...)", len(got), len(tt.want), head(got), head(tt.want))
			}
			if wantSize := int64(len(data)); tt.key == "r" && info.Size != wantSize {
				t.Errorf("Info.Size = %d, want the blob's size %d", info.Size, wantSize)
			}
		})
	}
}

func testOverwrite(t *testing.T, s blob.Store) {
	MustPut(t, s, "a/b", []byte("first version, longer"))
	old, err := s.Stat(t.Context(), "a/b")
	if err != nil {
		t.Fatal(err)
	}
	MustPut(t, s, "a/b", []byte("second"))
	if got, info := MustRead(t, s, "a/b"); string(got) != "second" || info.Size != 6 {
		t.Fatalf("after overwrite read %q (size %d), want %q", got, info.Size, "second")
	}
	info, err := s.Stat(t.Context(), "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag == old.ETag {
		t.Errorf("ETag %q did not change on overwrite", info.ETag)
	}
}

func testConcurrentPuts(t *testing.T, s blob.Store) {
	const n = 8
	const size = 1 << 20
	sums := map[[32]byte]int{}
	datas := make([][]byte, n)
	for i := range datas {
		datas[i] = RandomBytes(size, uint64(100+i))
		sums[sha256.Sum256(datas[i])] = i
	}
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			// Small reads interleave the writers as much as possible.
			_, err := s.Put(t.Context(), "same/key", &chunkReader{data: datas[i], chunk: 4096}, size)
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Errorf("Put: %v", err)
		}
	}
	got, _ := MustRead(t, s, "same/key")
	if _, ok := sums[sha256.Sum256(got)]; !ok || len(got) != size {
		t.Fatalf("after %d concurrent Puts the blob (%d bytes) is none of them", n, len(got))
	}
}

func testBadBody(t *testing.T, open func(t *testing.T) blob.Store) {
	// The large cases go over the S3 backend's part size (16 MiB).
	tests := map[string]struct {
		body    int64
		size    int64
		readErr bool
		code    errs.Code
	}{
		"Short":            {body: 10, size: 20, code: errs.Invalid},
		"Long":             {body: 30, size: 20, code: errs.Invalid},
		"EmptyButSized":    {body: 0, size: 1, code: errs.Invalid},
		"ShortLarge":       {body: 17 << 20, size: 20 << 20, code: errs.Invalid},
		"LongLarge":        {body: 21 << 20, size: 20 << 20, code: errs.Invalid},
		"ReadError":        {body: 1000, size: 2000, readErr: true},
		"ReadErrorLarge":   {body: 18 << 20, size: 20 << 20, readErr: true},
		"ReadErrorUnsized": {body: 18 << 20, size: -1, readErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			MustPut(t, s, "old", []byte("old content"))
			errBoom := errors.New("boom")
			for _, key := range []string{"new", "old"} {
				var r io.Reader = onlyReader{bytes.NewReader(RandomBytes(tt.body, 1))}
				if tt.readErr {
					r = io.MultiReader(r, errReader{errBoom})
				}
				_, err := s.Put(t.Context(), key, r, tt.size)
				if err == nil {
					t.Fatalf("Put %s of a %d-byte body with size %d succeeded", key, tt.body, tt.size)
				}
				if tt.readErr {
					if !errors.Is(err, errBoom) {
						t.Errorf("Put %s error %v does not wrap the reader's error", key, err)
					}
				} else {
					WantCode(t, err, tt.code)
				}
			}
			_, err := s.Stat(t.Context(), "new")
			WantCode(t, err, errs.NotFound)
			if got, _ := MustRead(t, s, "old"); string(got) != "old content" {
				t.Errorf("a failed Put changed the old blob to %d bytes", len(got))
			}
		})
	}
}

func testCancel(t *testing.T, open func(t *testing.T) blob.Store) {
	tests := map[string]struct{ total, cancelAt, size int64 }{
		"Small":        {total: 4 << 20, cancelAt: 1 << 20, size: 4 << 20},
		"Large":        {total: 24 << 20, cancelAt: 18 << 20, size: 24 << 20},
		"LargeUnsized": {total: 24 << 20, cancelAt: 18 << 20, size: -1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			MustPut(t, s, "old", []byte("old content"))
			for _, key := range []string{"new", "old"} {
				ctx, cancel := context.WithCancel(t.Context())
				r := &cancelReader{r: bytes.NewReader(RandomBytes(tt.total, 2)), after: tt.cancelAt, cancel: cancel}
				_, err := s.Put(ctx, key, r, tt.size)
				cancel()
				if err == nil {
					t.Fatalf("Put %s cancelled after %d bytes succeeded", key, tt.cancelAt)
				}
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Put %s error %v does not wrap context.Canceled", key, err)
				}
			}
			_, err := s.Stat(t.Context(), "new")
			WantCode(t, err, errs.NotFound)
			if got, _ := MustRead(t, s, "old"); string(got) != "old content" {
				t.Errorf("a cancelled Put changed the old blob to %d bytes", len(got))
			}
		})
	}
}

func testStat(t *testing.T, s blob.Store) {
	before := time.Now().Add(-time.Minute)
	MustPut(t, s, "dir/file.bin", RandomBytes(1234, 4))
	info, err := s.Stat(t.Context(), "dir/file.bin")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "dir/file.bin" || info.Size != 1234 || info.ETag == "" {
		t.Errorf("Stat = %+v, want key dir/file.bin, size 1234 and an ETag", info)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Errorf("Stat ModTime %v is not about now", info.ModTime)
	}
	_, oinfo := MustRead(t, s, "dir/file.bin")
	if oinfo.Size != info.Size || oinfo.ETag != info.ETag {
		t.Errorf("Open info %+v differs from Stat's %+v", oinfo, info)
	}
}

func testNotFound(t *testing.T, s blob.Store) {
	ctx := t.Context()
	MustPut(t, s, "a/b/c", []byte("x"))
	for _, key := range []string{"missing", "a/missing", "a/b", "a", "a/b/c/d"} {
		_, err := s.Stat(ctx, key)
		WantCode(t, err, errs.NotFound)
		rc, _, err := s.Open(ctx, key, 0, -1)
		if err == nil {
			rc.Close()
		}
		WantCode(t, err, errs.NotFound)
		rc, _, err = s.Open(ctx, key, 5, 10)
		if err == nil {
			rc.Close()
		}
		WantCode(t, err, errs.NotFound)
		if err := s.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) of a missing blob: %v", key, err)
		}
	}
	if got, _ := MustRead(t, s, "a/b/c"); string(got) != "x" {
		t.Errorf("deleting missing keys changed a/b/c to %q", got)
	}
}
