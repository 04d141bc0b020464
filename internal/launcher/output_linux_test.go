package launcher

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestFileOutputReleasesWhatWasRead: the launcher's file holds on disk only
// what it has not read yet; every byte comes out once, in order.
func TestFileOutputReleasesWhatWasRead(t *testing.T) {
	w, r, err := openFileOutput(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	const chunks = 64
	var got bytes.Buffer
	buf := make([]byte, 300<<10)
	for i := range chunks {
		chunk[0] = byte(i)
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		for got.Len() < (i+1)*len(chunk) {
			n, err := r.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got.Write(buf[:n])
		}
	}
	for i := range chunks {
		if got.Bytes()[i*len(chunk)] != byte(i) {
			t.Fatalf("chunk %d out of order", i)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.(*fileOutput).f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != chunks<<20 || st.Blocks*512 > 2*releaseBytes {
		t.Fatalf("file of %d bytes holds %d bytes on disk after all was read: want at most %d", st.Size, st.Blocks*512, 2*releaseBytes)
	}
}

// TestFileOutputFinish: after the job's exit, reading ends at EOF once no
// process is left, and at the deadline while one is.
func TestFileOutputFinish(t *testing.T) {
	w, r, err := openFileOutput(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.WriteString("last words")
	w.Close()
	alive := true
	deadline := time.Now().Add(200 * time.Millisecond)
	r.finish(deadline, func() bool { return alive })
	b, err := io.ReadAll(io.LimitReader(r, 10))
	if err != nil || string(b) != "last words" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) || time.Now().Before(deadline) {
		t.Fatalf("with a process left: %v at %v before the deadline, want the deadline", err, time.Until(deadline))
	}
	alive = false
	r.finish(time.Now().Add(time.Hour), func() bool { return alive })
	if _, err := r.Read(make([]byte, 10)); err != io.EOF {
		t.Fatalf("with no process left: %v, want EOF", err)
	}
}
