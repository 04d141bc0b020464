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
//
// restore gives every thread the priority the process had, once the job
// has ended: a process that embeds the launcher (the CLI's tests run it
// in-process, many times) must not stay at the lowest priority, where
// any other work on the machine starves it. Raising a priority again needs
// privilege (root has it); without it the threads keep the lower one.
func yieldCPU(steps int) (restore func(), err error) {
	restore = func() {}
	if steps <= 0 {
		return restore, nil
	}
	// The raw getpriority system call answers 20 - nice.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, os.Getpid())
	if err != nil {
		return restore, err
	}
	orig := 20 - raw
	if err := setThreadsNice(min(orig+steps, 19)); err != nil {
		return restore, err
	}
	return func() { _ = setThreadsNice(orig) }, nil
}

// setThreadsNice sets the nice value of every thread of the process.
func setThreadsNice(nice int) error {
	// Twice: a thread started during the first pass may have inherited
	// the priority its creator had before it changed.
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
