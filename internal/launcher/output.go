package launcher

import (
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
type pipeOutput struct{ *os.File }

func (p pipeOutput) finish(deadline time.Time, _ func() bool) { _ = p.SetReadDeadline(deadline) }
