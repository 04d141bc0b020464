package blobtest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the server if the test process dies
// without stopping it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
