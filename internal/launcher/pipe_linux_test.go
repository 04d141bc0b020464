package launcher

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"
)

// TestPipeOutputReadsPastDeadline: the drain deadline bounds the wait for
// more output, not the reading of output the job already wrote. What the
// pipe holds when the deadline passes is read in full (a grown pipe holds
// up to 16 MiB, which a busy launcher may not get through in Options.Drain;
// it used to be dropped without a word), and only then does Read report
// the deadline; what is written later is left alone.
func TestPipeOutputReadsPastDeadline(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close() // a process the job left behind holds the write end
	p := &pipeOutput{File: pr}
	defer p.Close()
	// Less than Linux's smallest pipe (64 KiB): the writes cannot block.
	written := bytes.Repeat([]byte("0123456789abcdef"), 3<<10)
	for i := 0; i < len(written); i += 16 << 10 {
		if _, err := pw.Write(written[i : i+16<<10]); err != nil {
			t.Fatal(err)
		}
	}
	p.finish(time.Now().Add(-time.Second), func() bool { return true })
	var got bytes.Buffer
	buf := make([]byte, 5000)
	for {
		n, err := p.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read: %v, want the deadline", err)
			}
			break
		}
		if n == 0 {
			t.Fatal("read returned nothing and no error")
		}
		if got.Len() == len(written) {
			// Written after the deadline: not read.
			if _, err := pw.Write([]byte("later")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !bytes.Equal(got.Bytes(), written) {
		t.Fatalf("read %d bytes past the deadline, want the %d in the pipe", got.Len(), len(written))
	}
	if n, err := p.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read again: %d bytes, %v; want the deadline", n, err)
	}
}
