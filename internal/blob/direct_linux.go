package blob

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Large blobs are written with O_DIRECT where the file system allows it:
// the bytes go from the copy buffer to the disk, without a second copy
// into page-cache pages that a server storing checkpoints would only evict
// again. That copy was a third of the machine's CPU time while four ranks
// saved a checkpoint through the server (docs/volumes.md).

const directAlign = 4096

var directBufPool = sync.Pool{New: func() any {
	b := make([]byte, copyBufSize+directAlign)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	b = b[off : off+copyBufSize]
	return &b
}}

// setDirect turns O_DIRECT on or off for f; false when the file system
// refuses it.
func setDirect(f *os.File, on bool) bool {
	fd := int(f.Fd())
	fl, err := fcntl(fd, syscall.F_GETFL, 0)
	if err != nil {
		return false
	}
	if on {
		fl |= syscall.O_DIRECT
	} else {
		fl &^= syscall.O_DIRECT
	}
	_, err = fcntl(fd, syscall.F_SETFL, fl)
	return err == nil
}

func fcntl(fd, cmd, arg int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// copyBodyDirect copies src to f, at offset 0 of an empty file, with
// O_DIRECT: whole aligned blocks of copyBufSize, and the last, partial one
// with O_DIRECT off again. Where O_DIRECT cannot be turned on it is
// copyBody. Like copyBody it tells a failure to read src (rerr) from a
// failure to write f (werr).
func copyBodyDirect(f *os.File, src io.Reader) (written int64, rerr, werr error) {
	if !setDirect(f, true) {
		return copyBody(f, src)
	}
	bp := directBufPool.Get().(*[]byte)
	defer directBufPool.Put(bp)
	buf := *bp
	direct := true
	for {
		n, err := io.ReadFull(src, buf)
		full := n &^ (directAlign - 1)
		if !direct {
			full = n
		}
		if full > 0 {
			m, werr := f.Write(buf[:full])
			if direct && m == 0 && errors.Is(werr, syscall.EINVAL) && setDirect(f, false) {
				// A device whose blocks are larger than directAlign, or a
				// file system that takes the flag but not the writes: on
				// through the page cache.
				direct = false
				m, werr = f.Write(buf[:full])
			}
			written += int64(m)
			if werr != nil {
				return written, nil, werr
			}
		}
		if full < n { // only while direct
			// The end: an unaligned tail, written through the page cache.
			if !setDirect(f, false) {
				return written, nil, errors.New("turn O_DIRECT off for the last block")
			}
			m, werr := f.Write(buf[full:n])
			written += int64(m)
			if werr != nil {
				return written, nil, werr
			}
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return written, nil, nil
		case err != nil:
			return written, err, nil
		}
	}
}
