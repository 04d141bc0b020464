package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// fileOutput follows a file that the job writes as its stdout or stderr.
//
// Through a pipe, a job that prints faster than the launcher reads waits
// for the launcher: on a busy machine that alone slowed a job printing
// 200 MB by a quarter (docs/run.md). Into a file the job never waits: it
// writes as it would into a file of its own, and the launcher follows the
// file a moment behind. The file is unlinked as soon as it is open, so it
// never outlives the two processes, and the launcher punches the bytes it
// has read out of it, so it holds on disk only what the launcher has not
// read yet.
type fileOutput struct {
	f        *os.File
	off      atomic.Int64 // next byte to read
	released int64        // bytes before this were punched out

	mu       sync.Mutex
	finished bool
	deadline time.Time
	alive    func() bool
}

const (
	fallocKeepSize  = 0x1 // FALLOC_FL_KEEP_SIZE
	fallocPunchHole = 0x2 // FALLOC_FL_PUNCH_HOLE

	// releaseBytes is how much read output accumulates before it is
	// punched out of the file: large steps, few system calls.
	releaseBytes = 8 << 20
	// followMaxWait is the longest pause between looks at a file that has
	// not grown: the delay before the terminal shows a line, at worst.
	followMaxWait = 20 * time.Millisecond
)

// openFileOutput creates, in dir, an unlinked file for one of the job's
// streams: w is the job's end (append only), r the launcher's. It fails
// where the file system cannot punch holes, and the caller then uses a
// pipe.
func openFileOutput(dir string) (w *os.File, r output, err error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, ".sextant-output-*")
	if err != nil {
		return nil, nil, err
	}
	w, err = os.OpenFile(f.Name(), os.O_WRONLY|os.O_APPEND, 0)
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	if err == nil {
		err = syscall.Fallocate(int(f.Fd()), fallocPunchHole|fallocKeepSize, 0, 4096)
		if err != nil {
			err = fmt.Errorf("punch a hole: %w", err)
		}
	}
	if err != nil {
		f.Close()
		if w != nil {
			w.Close()
		}
		return nil, nil, err
	}
	return w, &fileOutput{f: f}, nil
}

// Read returns the next bytes the job wrote, waiting for them: at first
// briefly, then up to followMaxWait between looks.
func (o *fileOutput) Read(p []byte) (int, error) {
	wait := 100 * time.Microsecond
	for {
		// Whether anything can still write is checked before the read: a
		// process that wrote and then exited has its bytes in the file.
		last, expired := o.ending()
		n, err := o.f.ReadAt(p, o.off.Load())
		if n > 0 {
			o.off.Add(int64(n))
			o.release()
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		switch {
		case last:
			return 0, io.EOF
		case expired:
			return 0, os.ErrDeadlineExceeded
		}
		time.Sleep(wait)
		wait = min(2*wait, followMaxWait)
	}
}

// ending reports, once finish was called, whether no process of the job
// is left (last) or the deadline passed (expired).
func (o *fileOutput) ending() (last, expired bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.finished {
		return false, false
	}
	return !o.alive(), !time.Now().Before(o.deadline)
}

// release punches what was read out of the file, in releaseBytes steps.
// A failure leaves the bytes on disk until the file is closed; nothing is
// lost.
func (o *fileOutput) release() {
	off := o.off.Load()
	if off-o.released < releaseBytes {
		return
	}
	end := off &^ (releaseBytes - 1)
	if syscall.Fallocate(int(o.f.Fd()), fallocPunchHole|fallocKeepSize, o.released, end-o.released) == nil {
		o.released = end
	}
}

func (o *fileOutput) finish(deadline time.Time, alive func() bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished, o.deadline, o.alive = true, deadline, alive
}

func (o *fileOutput) unread() bool {
	fi, err := o.f.Stat()
	return err == nil && fi.Size() > o.off.Load()
}

func (o *fileOutput) Close() error { return o.f.Close() }
