//go:build unix && !linux

package launcher

import "syscall"

// yieldCPU lowers the launcher's CPU priority by steps nice levels (up to
// 19), below the job that it started at its own priority. Outside Linux
// the priority belongs to the process. restore gives it back where the
// process may (see the Linux version).
func yieldCPU(steps int) (restore func(), err error) {
	restore = func() {}
	if steps <= 0 {
		return restore, nil
	}
	cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return restore, err
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, min(cur+steps, 19)); err != nil {
		return restore, err
	}
	return func() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, cur) }, nil
}
