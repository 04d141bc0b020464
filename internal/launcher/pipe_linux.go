package launcher

import (
	"os"
	"syscall"
	"unsafe"
)

// growPipe raises a pipe's capacity from Linux's 64 KiB: to 16 MiB where
// allowed (root), else to the system's maximum for users (1 MiB by
// default, /proc/sys/fs/pipe-max-size), so that a job printing in bursts
// does not wait for the launcher when the launcher is briefly off the CPU.
// Failure is harmless: the pipe keeps its size.
func growPipe(f *os.File) {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		for _, size := range []uintptr{16 << 20, 1 << 20} {
			if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, size); e == 0 {
				return
			}
		}
	})
}

// unread reports whether the pipe holds bytes (FIONREAD).
func (p pipeOutput) unread() bool {
	rc, err := p.SyscallConn()
	if err != nil {
		return false
	}
	var n int32
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	})
	return n > 0
}
