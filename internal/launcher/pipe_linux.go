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

// unread reports whether the pipe holds bytes.
func (p *pipeOutput) unread() bool { return p.buffered() > 0 }

// buffered returns how many bytes the pipe holds (FIONREAD).
func (p *pipeOutput) buffered() int {
	rc, err := p.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	})
	return int(n)
}

// readBuffered reads what the pipe holds without waiting and whatever the
// read deadline: one read(2) on the non-blocking descriptor, which returns
// 0 and no error at EOF.
func (p *pipeOutput) readBuffered(b []byte) (n int, err error) {
	rc, err := p.SyscallConn()
	if err != nil {
		return 0, err
	}
	if cerr := rc.Control(func(fd uintptr) { n, err = syscall.Read(int(fd), b) }); cerr != nil {
		return 0, cerr
	}
	return max(n, 0), err
}
