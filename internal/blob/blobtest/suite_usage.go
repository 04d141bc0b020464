package blobtest

import (
	"testing"

	"github.com/sextant/sextant/internal/blob"
)

// testUsage: a store measures the blobs it holds, nested ones included,
// and a deleted blob no longer counts.
func testUsage(t *testing.T, s blob.Store) {
	ctx := t.Context()
	m, ok := s.(blob.Measurer)
	if !ok {
		t.Fatalf("%T does not implement blob.Measurer", s)
	}
	usage := func() blob.Usage {
		t.Helper()
		u, err := m.Usage(ctx)
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		return u
	}
	if u := usage(); u != (blob.Usage{}) {
		t.Fatalf("empty store: %+v", u)
	}
	for key, size := range map[string]int64{"a": 10, "d/b": 200, "d/e/f/c": 3000} {
		MustPut(t, s, key, RandomBytes(size, 7))
	}
	if u, want := usage(), (blob.Usage{Objects: 3, Bytes: 3210}); u != want {
		t.Fatalf("three blobs: %+v, want %+v", u, want)
	}
	if err := s.Delete(ctx, "d/b"); err != nil {
		t.Fatal(err)
	}
	if u, want := usage(), (blob.Usage{Objects: 2, Bytes: 3010}); u != want {
		t.Fatalf("after a delete: %+v, want %+v", u, want)
	}
}
