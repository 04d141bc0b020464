//go:build !linux

package blob

import (
	"io"
	"os"
)

// copyBodyDirect is copyBody outside Linux.
func copyBodyDirect(f *os.File, src io.Reader) (written int64, rerr, werr error) {
	return copyBody(f, src)
}
