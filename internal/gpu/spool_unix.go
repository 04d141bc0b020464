//go:build unix

package gpu

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on path, created if needed. The
// lock goes away with the process, so a crashed agent leaves none behind.
func lockDir(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock spool directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s)", ErrSpoolLocked, path)
		}
		return nil, fmt.Errorf("lock spool directory: %w", err)
	}
	return f, nil
}
