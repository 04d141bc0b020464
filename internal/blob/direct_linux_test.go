package blob

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// chunkyReader returns data in reads of random sizes, and calls peek
// before each read.
type chunkyReader struct {
	r    io.Reader
	rng  *rand.Rand
	peek func()
}

func (c *chunkyReader) Read(p []byte) (int, error) {
	if c.peek != nil {
		c.peek()
	}
	n := 1 + c.rng.IntN(min(len(p), 300_000))
	return c.r.Read(p[:n])
}

// fdFlags reads the open flags of f from /proc.
func fdFlags(t *testing.T, f *os.File) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatal("no flags in fdinfo")
	return 0
}

// TestCopyBodyDirect: every size, aligned or not, shorter or longer than
// the buffer, read in chunks of any size, lands byte for byte; the
// copy runs with O_DIRECT on where the file system takes it, and the file
// is left without it.
func TestCopyBodyDirect(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 4095, 4096, 4097, copyBufSize - 1, copyBufSize, copyBufSize + 1, 3*copyBufSize + 12345} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			f, err := os.Create(filepath.Join(dir, strconv.Itoa(size)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sawDirect := false
			src := &chunkyReader{r: bytes.NewReader(want), rng: rng, peek: func() {
				sawDirect = sawDirect || fdFlags(t, f)&syscall.O_DIRECT != 0
			}}
			n, rerr, werr := copyBodyDirect(f, src)
			if n != int64(size) || rerr != nil || werr != nil {
				t.Fatalf("copied %d, %v, %v; want %d", n, rerr, werr, size)
			}
			if !sawDirect {
				t.Logf("the file system of %s does not take O_DIRECT: the copy went through the page cache", dir)
			}
			if fdFlags(t, f)&syscall.O_DIRECT != 0 && size%directAlign != 0 {
				t.Fatal("O_DIRECT still on after an unaligned tail")
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the file differs from what was copied (%d bytes, want %d)", len(got), len(want))
			}
		})
	}
}

// TestCopyBodyDirectReadError: a failing source is reported as a read
// error, after what was read before it.
func TestCopyBodyDirectReadError(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	boom := fmt.Errorf("boom")
	src := io.MultiReader(bytes.NewReader(make([]byte, copyBufSize+10)), errReader{boom})
	_, rerr, werr := copyBodyDirect(f, src)
	if rerr != boom || werr != nil {
		t.Fatalf("got %v, %v; want the read error", rerr, werr)
	}
}
