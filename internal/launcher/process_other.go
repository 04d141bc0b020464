//go:build !unix

package launcher

import (
	"fmt"
	"os"
	"syscall"

	"github.com/sextant/sextant/internal/errs"
)

// child is not supported outside Unix: the launcher needs process groups.
type child struct {
	pgid           int
	stdout, stderr output
}

func startChild(argv, env []string, dir string, stdin *os.File, outDir string, pipes bool) (*child, error) {
	return nil, errs.E(errs.NotImplemented, "sextant run needs a Unix system (Linux or macOS)")
}

func (c *child) signal(sig syscall.Signal) error                 { return nil }
func (c *child) groupAlive() bool                                { return false }
func (c *child) inGroup(pid int) bool                            { return false }
func (c *child) signalMember(pid int, sig syscall.Signal) error  { return nil }
func (c *child) wait() (code int, sig syscall.Signal, err error) { return 1, 0, nil }
func (c *child) reclaimTTY()                                     {}
func (c *child) groupSignal() syscall.Signal                     { return 0 }

func signalName(sig syscall.Signal) string { return fmt.Sprintf("signal %d", int(sig)) }

func yieldCPU(steps int) (restore func(), err error) { return func() {}, nil }
