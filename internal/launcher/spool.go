package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// spool is the queue's overflow on disk: one file of encoded lines,
// appended at the end and read from the front. It is emptied (truncated)
// whenever everything in it has been read and acked, and it never grows
// past its bound. It is not shared and not durable: it lets a launcher
// ride out a server that is down for a while, not a crash of the launcher.
type spool struct {
	f     *os.File
	max   int64
	r, w  int64 // read and write offsets
	count int   // lines between r and w
	buf   []byte
}

func openSpool(dir string, max int64) (*spool, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "sextant-run-spool-*")
	if err != nil {
		return nil, fmt.Errorf("create spool: %w", err)
	}
	return &spool{f: f, max: max}, nil
}

// append adds the count encoded lines of b; false when they would not fit
// (or the write failed: the caller drops lines then, rather than stopping
// the job).
func (s *spool) append(b *blocks, count int) bool {
	if s.count == 0 && s.r > 0 {
		s.reset()
	}
	if s.w+b.size > s.max {
		return false
	}
	w := s.w
	err := b.segments(func(seg []byte) error {
		_, err := s.f.WriteAt(seg, w)
		w += int64(len(seg))
		return err
	})
	if err != nil {
		return false
	}
	s.w = w
	s.count += count
	return true
}

// peek reads up to maxLines lines and about maxBytes from the front.
func (s *spool) peek(maxLines, maxBytes int) ([]byte, int, error) {
	want := min(int64(maxBytes)+1<<20+64, s.w-s.r) // room for one line over maxBytes
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	buf := s.buf[:want]
	if _, err := s.f.ReadAt(buf, s.r); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("read spool: %w", err)
	}
	out, n := scanRecords(buf, min(maxLines, s.count), maxBytes)
	if n == 0 && s.count > 0 {
		return nil, 0, errBadRecord
	}
	return out, n, nil
}

// advance drops n bytes holding count lines from the front.
func (s *spool) advance(n, count int) {
	s.r += int64(n)
	s.count -= count
	if s.count == 0 {
		s.reset()
	}
}

// reset empties the spool.
func (s *spool) reset() {
	s.r, s.w, s.count = 0, 0, 0
	_ = s.f.Truncate(0)
}

func (s *spool) remove() error {
	name := s.f.Name()
	return errors.Join(s.f.Close(), os.Remove(name))
}
