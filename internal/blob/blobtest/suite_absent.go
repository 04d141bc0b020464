package blobtest

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// testPutIfAbsent: PutIfAbsent stores a new blob, refuses an existing one
// with errs.AlreadyExists and leaves it as it was, and works again once
// the blob is deleted.
func testPutIfAbsent(t *testing.T, s blob.Store) {
	ctx := t.Context()
	if n, err := s.PutIfAbsent(ctx, "new/key", bytes.NewReader([]byte("first")), 5); err != nil || n != 5 {
		t.Fatalf("PutIfAbsent of a free key = %d, %v", n, err)
	}
	_, err := s.PutIfAbsent(ctx, "new/key", bytes.NewReader([]byte("second")), 6)
	WantCode(t, err, errs.AlreadyExists)
	if got, _ := MustRead(t, s, "new/key"); string(got) != "first" {
		t.Fatalf("a refused PutIfAbsent changed the blob to %q", got)
	}
	// Unknown size, and a body over the S3 backend's part size (a
	// multipart upload, whose completion carries the condition).
	big := RandomBytes(17<<20, 7)
	_, err = s.PutIfAbsent(ctx, "new/key", bytes.NewReader(big), -1)
	WantCode(t, err, errs.AlreadyExists)
	_, err = s.PutIfAbsent(ctx, "new/key", bytes.NewReader(big), int64(len(big)))
	WantCode(t, err, errs.AlreadyExists)
	if got, _ := MustRead(t, s, "new/key"); string(got) != "first" {
		t.Fatalf("a refused large PutIfAbsent changed the blob to %d bytes", len(got))
	}
	if n, err := s.PutIfAbsent(ctx, "new/big", bytes.NewReader(big), -1); err != nil || n != int64(len(big)) {
		t.Fatalf("large PutIfAbsent of a free key = %d, %v", n, err)
	}
	if got, _ := MustRead(t, s, "new/big"); !bytes.Equal(got, big) {
		t.Fatalf("large PutIfAbsent stored %d bytes, not its body", len(got))
	}
	MustPut(t, s, "new/key", []byte("put replaces")) // Put still overwrites
	if err := s.Delete(ctx, "new/key"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(ctx, "new/key", bytes.NewReader([]byte("again")), 5); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	if got, _ := MustRead(t, s, "new/key"); string(got) != "again" {
		t.Fatalf("read %q after PutIfAbsent following Delete", got)
	}
	_, err = s.PutIfAbsent(ctx, "bad//key", bytes.NewReader(nil), 0)
	WantCode(t, err, errs.Invalid)
	if got := MustList(t, s, "", "", 0); len(got) != 1 || got[0].Name != "new/" {
		t.Errorf("refused PutIfAbsents left %v", names(got))
	}
}

// testRacingPutIfAbsent: writers of one key that have all read their whole
// body before any of them publishes (a check followed by a Put would let
// every one of them win): exactly one succeeds, the others get
// errs.AlreadyExists, and the blob is the winner's, for small bodies and
// for bodies over the S3 backend's part size.
func testRacingPutIfAbsent(t *testing.T, s blob.Store) {
	sizes := map[string]int64{"Small": 1000, "Multipart": 17 << 20}
	for name, size := range sizes {
		t.Run(name, func(t *testing.T) {
			n, rounds := 8, 10
			if size > 1<<20 {
				n, rounds = 3, 1
			}
			for round := range rounds {
				key := "race/" + name + "/" + string(rune('a'+round))
				datas := make([][]byte, n)
				for i := range datas {
					datas[i] = RandomBytes(size, uint64(1000*round+i))
				}
				var ready sync.WaitGroup
				ready.Add(n)
				errsOf := make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						body := &barrierReader{r: bytes.NewReader(datas[i]), ready: &ready}
						_, errsOf[i] = s.PutIfAbsent(t.Context(), key, body, -1)
					})
				}
				wg.Wait()
				winner := -1
				for i, err := range errsOf {
					switch {
					case err == nil && winner >= 0:
						t.Fatalf("round %d: writers %d and %d both stored %s", round, winner, i, key)
					case err == nil:
						winner = i
					case errs.CodeOf(err) != errs.AlreadyExists:
						t.Fatalf("round %d: writer %d: %v, want nil or AlreadyExists", round, i, err)
					}
				}
				if winner < 0 {
					t.Fatalf("round %d: no writer stored %s", round, key)
				}
				if got, _ := MustRead(t, s, key); !bytes.Equal(got, datas[winner]) {
					t.Fatalf("round %d: the blob (%d bytes) is not the winner's", round, len(got))
				}
			}
		})
	}
}

// barrierReader reads r; at its end it waits until every reader sharing
// ready has reached its own end, then reports EOF.
type barrierReader struct {
	r     io.Reader
	ready *sync.WaitGroup
	done  bool
}

func (b *barrierReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.ready.Done()
		b.ready.Wait()
	}
	return n, err
}
