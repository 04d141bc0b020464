package launcher

import (
	"errors"
	"io"
	"os"
	"time"
)

// output is the launcher's end of one of the job's output streams.
type output interface {
	io.Reader
	// finish is called once the job's process has exited: reading goes on
	// until nothing can write any more (EOF), or until deadline
	// (os.ErrDeadlineExceeded). alive reports whether a process of the
	// job's group is left.
	finish(deadline time.Time, alive func() bool)
	// unread reports whether the job has written bytes that were not read
	// yet: an unfinished line may go on in them.
	unread() bool
	Close() error
}

// pipeOutput is a pipe from the job: the job waits whenever the pipe is
// full, and EOF comes once every process holding the write end closed it.
//
// The deadline finish sets bounds the wait for more output, not the
// reading of what the job wrote before it: once it has passed, Read still
// returns what the pipe held at that moment (up to the pipe's 16 MiB,
// more than a busy launcher may read in Options.Drain), then
// os.ErrDeadlineExceeded.
type pipeOutput struct {
	*os.File
	// late is what Read may still return past the deadline, counted when
	// it first met the deadline (draining). Only the reading goroutine
	// touches them.
	draining bool
	late     int
}

func (p *pipeOutput) finish(deadline time.Time, _ func() bool) { _ = p.SetReadDeadline(deadline) }

// Read implements io.Reader.
func (p *pipeOutput) Read(b []byte) (int, error) {
	if !p.draining {
		n, err := p.File.Read(b)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		p.draining, p.late = true, p.buffered()
	}
	if p.late <= 0 || len(b) == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n, err := p.readBuffered(b[:min(len(b), p.late)])
	if n > 0 {
		p.late -= n
		return n, nil
	}
	if err == nil {
		return 0, io.EOF
	}
	return 0, os.ErrDeadlineExceeded
}
