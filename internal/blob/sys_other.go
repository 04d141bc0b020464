//go:build !unix

package blob

import (
	"errors"
	"io/fs"
	"syscall"
)

// fileIno returns 0: ETags rely on size and modification time alone.
func fileIno(fs.FileInfo) uint64 { return 0 }

// isDiskFull reports whether err says the file system is out of space.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC)
}
