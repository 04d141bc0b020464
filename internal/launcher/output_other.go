//go:build !linux

package launcher

import (
	"errors"
	"os"
)

// openFileOutput is Linux only (it punches holes): elsewhere the job's
// output goes through pipes.
func openFileOutput(string) (*os.File, output, error) {
	return nil, nil, errors.New("output files need Linux")
}
