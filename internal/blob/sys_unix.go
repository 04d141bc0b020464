//go:build unix

package blob

import (
	"errors"
	"io/fs"
	"syscall"
)

// fileIno returns the inode number of fi.
func fileIno(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// isDiskFull reports whether err says the file system is out of space or
// the user out of quota.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
