//go:build unix

package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// child is the job's process, the leader of its own process group, so
// that signals reach everything it started (torchrun's workers, data
// loader processes) and the launcher can clean up what is left.
type child struct {
	cmd            *exec.Cmd
	pgid           int
	stdout, stderr output // the launcher's ends of the job's output
	tty            int    // the terminal given to the child's group, or -1
	sentinel       *exec.Cmd
	sentinelIn     *os.File // the write end of the sentinel's stdin
}

// startChild starts argv in a new process group, its output into two
// unlinked files in outDir that the launcher follows (see fileOutput), or
// through two pipes when pipes is set or the files cannot be made. When
// stdin is the terminal and the launcher is in the foreground, the child's
// group becomes the terminal's foreground group: Ctrl-C reaches the job
// directly and the job can read the terminal (a debugger prompt) without
// being stopped.
func startChild(argv, env []string, dir string, stdin *os.File, outDir string, pipes bool) (*child, error) {
	outW, outR, err := openOutput(outDir, pipes)
	if err != nil {
		return nil, fmt.Errorf("create the stdout of the job: %w", err)
	}
	errW, errR, err := openOutput(outDir, pipes)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create the stderr of the job: %w", err), outR.Close(), outW.Close())
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &child{cmd: cmd, stdout: outR, stderr: errR, tty: -1}
	if stdin != nil && isForegroundTTY(int(stdin.Fd())) {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = int(stdin.Fd())
		c.tty = int(stdin.Fd())
	}
	err = cmd.Start()
	// The child has its own copies of the write ends; closing ours makes
	// pipes reach EOF once every process holding them is gone.
	cerr := errors.Join(outW.Close(), errW.Close())
	if err != nil {
		return nil, errors.Join(err, cerr, outR.Close(), errR.Close())
	}
	c.pgid = cmd.Process.Pid
	c.startSentinel()
	return c, nil
}

// groupSignals are the signals the sentinel reports: those a terminal
// (Ctrl-C, Ctrl-\, hang-up) or a scheduler sends to stop a job.
var groupSignals = map[syscall.Signal]bool{syscall.SIGINT: true, syscall.SIGTERM: true, syscall.SIGHUP: true, syscall.SIGQUIT: true}

// startSentinel starts a process that only waits, in the child's process
// group, with the default disposition of every signal, so that a signal
// sent to the whole group ends it. When the job has the terminal, Ctrl-C
// reaches the job's group and not the launcher; the job may catch the
// SIGINT and exit with any code (Lightning exits 1), and the sentinel's
// end is how the launcher learns that the job was interrupted. The kernel
// records the first fatal signal a process gets as its exit status, so the
// answer does not depend on who runs first. The sentinel is cat reading a
// pipe of the launcher's: it also ends when the launcher does. Without sh
// there is no sentinel, and an interrupt the launcher did not see is told
// by the job's exit alone.
func (c *child) startSentinel() {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	// The launcher forwards SIGUSR1 and SIGUSR2 to the group (Lightning's
	// requeue signal): ignored here, and ignored across the exec, they
	// leave the sentinel waiting for an interrupt.
	s := exec.Command(sh, "-c", `trap "" USR1 USR2; exec cat`)
	s.Stdin = r
	s.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: c.pgid}
	err = s.Start() // fails when the group is gone already
	r.Close()
	if err != nil {
		w.Close()
		return
	}
	c.sentinel, c.sentinelIn = s, w
}

// groupSignal stops the sentinel and returns the signal that was sent to
// the child's whole process group, or 0 if none was. Call it once the child
// has exited, before looking for processes left in the group.
func (c *child) groupSignal() syscall.Signal {
	s := c.sentinel
	if s == nil {
		return 0
	}
	c.sentinel = nil
	// SIGKILL does not change the status of a process already ended by a
	// signal, so a group signal sent before this one is still reported.
	_ = s.Process.Signal(syscall.SIGKILL)
	_ = s.Wait()
	_ = c.sentinelIn.Close()
	st, ok := s.ProcessState.Sys().(syscall.WaitStatus)
	if ok && st.Signaled() && groupSignals[st.Signal()] {
		return st.Signal()
	}
	return 0
}

// openOutput returns the two ends of one output stream of the job: a
// followed file unless pipes is set or the file cannot be made, else a
// pipe.
func openOutput(dir string, pipes bool) (w *os.File, r output, err error) {
	if !pipes {
		if w, r, err := openFileOutput(dir); err == nil {
			return w, r, nil
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	growPipe(pr)
	return pw, &pipeOutput{File: pr}, nil
}

// signal sends sig to the child's whole process group.
func (c *child) signal(sig syscall.Signal) error {
	err := syscall.Kill(-c.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// inGroup reports whether process pid is alive and in the child's group,
// or (on Linux) a descendant of the child: torchrun starts its workers in
// sessions of their own.
func (c *child) inGroup(pid int) bool {
	g, err := syscall.Getpgid(pid)
	if err != nil {
		return false
	}
	if g == c.pgid {
		return true
	}
	for range 64 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 {
			return false
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil || ppid <= 1 {
			return false
		}
		if ppid == c.pgid {
			return true
		}
		pid = ppid
	}
	return false
}

// signalMember sends sig to process pid if it is still in the child's
// group (a pid reused by another program after the job's process exited
// is not signalled).
func (c *child) signalMember(pid int, sig syscall.Signal) error {
	if !c.inGroup(pid) {
		return syscall.ESRCH
	}
	return syscall.Kill(pid, sig)
}

// groupAlive reports whether any process of the child's group is left.
func (c *child) groupAlive() bool {
	return syscall.Kill(-c.pgid, 0) == nil
}

// wait waits for the child (not its group) to exit.
func (c *child) wait() (code int, sig syscall.Signal, err error) {
	err = c.cmd.Wait()
	st, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return -1, 0, err
	}
	switch {
	case st.Signaled():
		return 128 + int(st.Signal()), st.Signal(), nil
	case st.Exited():
		return st.ExitStatus(), 0, nil
	}
	return -1, 0, err
}

// reclaimTTY gives the terminal back to the launcher's group once the
// child has exited.
func (c *child) reclaimTTY() {
	if c.tty < 0 {
		return
	}
	// A background group that sets the foreground group gets SIGTTOU
	// unless it ignores it.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := syscall.Getpgrp()
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(c.tty), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}

func isForegroundTTY(fd int) bool {
	var pgrp int32
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return e == 0 && int(pgrp) == syscall.Getpgrp()
}

// signalName names a signal the way tags and messages show it: "SIGTERM".
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return fmt.Sprintf("signal %d", int(sig))
}
