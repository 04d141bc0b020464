//go:build !unix

package gpu

import (
	"fmt"
	"io"
	"os"
)

// lockDir creates path; other systems get no lock, so do not point two
// agents at one spool directory there.
func lockDir(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock spool directory: %w", err)
	}
	return f, nil
}
