package blob

import (
	"os"
	"syscall"
)

// WaitReaped returns once the blobs and trees deleted so far are removed
// from tmp/.
func (d *Dir) WaitReaped() { d.waitReaped() }

// WithoutHardLinks makes d act as on a file system without hard links, so
// that PutIfAbsent takes its fallback.
func (d *Dir) WithoutHardLinks() {
	d.link = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
}
