//go:build !linux

package launcher

import "os"

// growPipe does nothing outside Linux.
func growPipe(*os.File) {}

// unread is not known outside Linux: an unfinished line is flushed on time
// alone.
func (*pipeOutput) unread() bool { return false }

// buffered is not known outside Linux: reading stops at the deadline.
func (*pipeOutput) buffered() int { return 0 }

// readBuffered is not used outside Linux (buffered is 0).
func (*pipeOutput) readBuffered([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }
