package launcher

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// yieldCPU lowers the launcher's CPU priority by steps nice levels (up to
// 19), below the job that it started at its own priority. Linux
// priorities belong to threads: every thread of the process is lowered,
// and threads the Go runtime starts later inherit the priority of the
// thread that starts them. Lowering a priority needs no privilege.
func yieldCPU(steps int) error {
	if steps <= 0 {
		return nil
	}
	// The raw getpriority system call answers 20 - nice.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, os.Getpid())
	if err != nil {
		return err
	}
	nice := min(20-raw+steps, 19)
	// Twice: a thread started during the first pass may have inherited
	// the priority its creator had before that was lowered.
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			err = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
			if err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: the thread has exited
				return err
			}
		}
	}
	return nil
}
