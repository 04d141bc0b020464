//go:build unix && !linux

package launcher

import "syscall"

// yieldCPU lowers the launcher's CPU priority by steps nice levels (up to
// 19), below the job that it started at its own priority. Outside Linux
// the priority belongs to the process.
func yieldCPU(steps int) error {
	if steps <= 0 {
		return nil
	}
	cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return err
	}
	return syscall.Setpriority(syscall.PRIO_PROCESS, 0, min(cur+steps, 19))
}
