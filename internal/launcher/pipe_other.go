//go:build !linux

package launcher

import "os"

// growPipe does nothing outside Linux.
func growPipe(*os.File) {}

// unread is not known outside Linux: an unfinished line is flushed on time
// alone.
func (pipeOutput) unread() bool { return false }
