package blob

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
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
// Failure to write f (werr).
//
// A write with O_DIRECT returns only once its block is on the device, so
// the next block is read from src meanwhile, into a second buffer: one
// stream then keeps the device and the socket busy at once (uploads of
// 1.3-1.7 GB/s from one stream, 1.7-2.0 from four, on the development VM's
// disk, whose O_DIRECT limit measured with dd is about 2.1).
func copyBodyDirect(f *os.File, src io.Reader) (written int64, rerr, werr error) {
	if !setDirect(f, true) {
		return copyBody(f, src)
	}
	type block struct {
		bp *[]byte
		n  int
	}
	free := make(chan *[]byte, 2)
	for range 2 {
		bp := directBufPool.Get().(*[]byte)
		defer directBufPool.Put(bp)
		free <- bp
	}
	full := make(chan block, 1)
	done := make(chan struct{})
	var failed atomic.Bool
	go func() {
		defer close(done)
		w := directWriter{f: f, direct: true}
		for b := range full {
			if werr == nil {
				werr = w.write((*b.bp)[:b.n])
				written = w.written
				if werr != nil {
					failed.Store(true)
				}
			}
			free <- b.bp
		}
	}()
	for !failed.Load() {
		bp := <-free
		n, err := io.ReadFull(src, *bp)
		full <- block{bp, n}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	close(full)
	<-done
	if werr != nil {
		rerr = nil // the write failed first; what the read did after does not matter
	}
	return written, rerr, werr
}

// directWriter writes the blocks of copyBodyDirect in order: whole aligned
// ones with O_DIRECT, the partial last one through the page cache.
type directWriter struct {
	f       *os.File
	direct  bool
	written int64
}

func (w *directWriter) write(buf []byte) error {
	n := len(buf)
	full := n &^ (directAlign - 1)
	if !w.direct {
		full = n
	}
	if full > 0 {
		m, err := w.f.Write(buf[:full])
		if w.direct && m == 0 && errors.Is(err, syscall.EINVAL) && setDirect(w.f, false) {
			// A device whose blocks are larger than directAlign, or a
			// file system that takes the flag but not the writes: on
			// through the page cache.
			w.direct = false
			m, err = w.f.Write(buf[:full])
		}
		w.written += int64(m)
		if err != nil {
			return err
		}
	}
	if full < n { // only while direct
		// The end: an unaligned tail, written through the page cache.
		if !setDirect(w.f, false) {
			return errors.New("turn O_DIRECT off for the last block")
		}
		w.direct = false
		m, err := w.f.Write(buf[full:n])
		w.written += int64(m)
		if err != nil {
			return err
		}
	}
	return nil
}
