package blob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/blobtest"
	"github.com/sextant/sextant/internal/errs"
)

func TestDir(t *testing.T) {
	blobtest.RunStoreTests(t, func(t *testing.T) blob.Store { return MustOpenDir(t, t.TempDir()) })
}

// TestDirWithoutHardLinks runs the suite on a Dir whose file system has no
// hard links, where PutIfAbsent falls back to a check and a rename under a
// lock.
func TestDirWithoutHardLinks(t *testing.T) {
	blobtest.RunStoreTests(t, func(t *testing.T) blob.Store {
		d := MustOpenDir(t, t.TempDir())
		d.WithoutHardLinks()
		return d
	})
}

// MustOpenDir opens a Dir at root, closed at tb's cleanup, or fails tb.
func MustOpenDir(tb testing.TB, root string) *blob.Dir {
	tb.Helper()
	d, err := blob.OpenDir(root, blob.DirOptions{})
	if err != nil {
		tb.Fatalf("OpenDir(%s): %v", root, err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

func TestDirLayout(t *testing.T) {
	root := t.TempDir()
	d := MustOpenDir(t, root)
	blobtest.MustPut(t, d, "exp/1/model.bin", []byte("weights"))
	got, err := os.ReadFile(filepath.Join(root, "blobs", "exp", "1", "model.bin"))
	if err != nil || string(got) != "weights" {
		t.Fatalf("blob file: %q, %v", got, err)
	}
	id, err := d.CreateMultipart(t.Context(), "exp/1/big")
	if err != nil {
		t.Fatal(err)
	}
	blobtest.MustPutPart(t, d, "exp/1/big", id, 1, []byte("part"))
	if _, err := os.Stat(filepath.Join(root, "uploads", id, "1")); err != nil {
		t.Errorf("part file: %v", err)
	}
	if err := d.AbortMultipart(t.Context(), "exp/1/big", id); err != nil {
		t.Fatal(err)
	}
	// Every write went through tmp/ and left nothing there.
	d.WaitReaped()
	for _, dir := range []string{"tmp", "uploads"} {
		if des, err := os.ReadDir(filepath.Join(root, dir)); err != nil || len(des) != 0 {
			t.Errorf("%s/ holds %v (%v), want nothing", dir, des, err)
		}
	}
}

func TestDirRemoveStale(t *testing.T) {
	root := t.TempDir()
	MustOpenDir(t, root).Close()
	old := time.Now().Add(-2 * time.Hour)
	veryOld := time.Now().Add(-8 * 24 * time.Hour)
	files := map[string]time.Time{
		"tmp/put-old":          old,
		"tmp/put-fresh":        time.Now(),
		"tmp/del-fresh/a/b":    time.Now(),
		"uploads/old/key":      veryOld,
		"uploads/recent/key":   old,
		"blobs/keep/untouched": veryOld,
	}
	for name, mt := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{p, filepath.Dir(p)} {
			if err := os.Chtimes(q, mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	}
	MustOpenDir(t, root)
	for name, wantGone := range map[string]bool{
		"tmp/put-old": true, "tmp/put-fresh": false, "tmp/del-fresh": true, "uploads/old": true, "uploads/recent": false, "blobs/keep/untouched": false,
	} {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
		if gone := errors.Is(err, fs.ErrNotExist); gone != wantGone {
			t.Errorf("%s: removed = %v, want %v", name, gone, wantGone)
		}
	}
}

func TestDirConflict(t *testing.T) {
	d := MustOpenDir(t, t.TempDir())
	blobtest.MustPut(t, d, "file", []byte("x"))
	blobtest.MustPut(t, d, "dir/child", []byte("y"))
	for _, key := range []string{"file/child", "file/a/b", "dir"} {
		_, err := d.Put(t.Context(), key, strings.NewReader("z"), 1)
		blobtest.WantCode(t, err, errs.Conflict)
		_, err = d.PutIfAbsent(t.Context(), key, strings.NewReader("z"), 1)
		blobtest.WantCode(t, err, errs.Conflict)
	}
	if got, _ := blobtest.MustRead(t, d, "file"); string(got) != "x" {
		t.Errorf("file changed to %q", got)
	}
	if got := blobtest.MustList(t, d, "", "", 0); len(got) != 2 {
		t.Errorf("List after conflicts = %v", got)
	}
}

// TestDirSymlinkEscape plants a symbolic link under blobs/ that points
// outside the root: no method follows it out.
func TestDirSymlinkEscape(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := MustOpenDir(t, root)
	if err := os.Symlink(outside, filepath.Join(root, "blobs", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(root, "blobs", "up")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, dir := range []string{"link", "up"} {
		if rc, _, err := d.Open(ctx, dir+"/secret", 0, -1); err == nil {
			rc.Close()
			t.Errorf("Open(%s/secret) followed the link out", dir)
		}
		if _, err := d.Stat(ctx, dir+"/secret"); err == nil {
			t.Errorf("Stat(%s/secret) followed the link out", dir)
		}
		if _, err := d.Put(ctx, dir+"/planted", strings.NewReader("x"), 1); err == nil {
			t.Errorf("Put(%s/planted) followed the link out", dir)
		}
		if _, err := d.PutIfAbsent(ctx, dir+"/planted2", strings.NewReader("x"), 1); err == nil {
			t.Errorf("PutIfAbsent(%s/planted2) followed the link out", dir)
		}
		if got, err := d.List(ctx, dir+"/", "", 0); err == nil && len(got) > 0 {
			t.Errorf("List(%s/) listed outside: %v", dir, got)
		}
		_ = d.Delete(ctx, dir+"/secret")
		_ = d.DeleteAll(ctx, dir+"/")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a Put wrote outside the root")
	}
	if got, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(got) != "secret" {
		t.Errorf("the file outside the root was changed: %q, %v", got, err)
	}
}

// FuzzDirKey stores a blob under every key ValidateKey accepts and checks
// that the file lands under the root's blobs/ directory at the key's path.
//
//	go test -run '^$' -fuzz '^FuzzDirKey$' -fuzztime 20s ./internal/blob/
func FuzzDirKey(f *testing.F) {
	for _, k := range append([]string{"a", "a/b", "../x", "a/../../x", "./x", "x/.", "/etc/passwd"}, blobtest.SpecialKeys()...) {
		f.Add(k)
	}
	root := f.TempDir()
	d := MustOpenDir(f, root)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if blob.ValidateKey(key) != nil {
			return
		}
		ctx := context.Background()
		if _, err := d.Put(ctx, key, strings.NewReader("fuzz"), 4); err != nil {
			if errs.Is(err, errs.Conflict) {
				return
			}
			t.Fatalf("Put(%q): %v", key, err)
		}
		defer d.Delete(ctx, key)
		p, err := filepath.EvalSymlinks(filepath.Join(root, "blobs", filepath.FromSlash(key)))
		if err != nil {
			t.Fatalf("blob of %q not at its path: %v", key, err)
		}
		rel, err := filepath.Rel(filepath.Join(realRoot, "blobs"), p)
		if err != nil || !filepath.IsLocal(rel) || filepath.ToSlash(rel) != key {
			t.Fatalf("blob of %q is at %s, outside %s/blobs or elsewhere (%q)", key, p, realRoot, rel)
		}
	})
}

// TestDirDiskFull fills a 1 MiB tmpfs: Put fails with
// errs.InsufficientStorage and leaves no temporary file. It needs to mount
// a tmpfs (root on Linux) and skips otherwise.
func TestDirDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	d := MustOpenDir(t, filepath.Join(mnt, "blobs"))
	blobtest.MustPut(t, d, "small", []byte("fits"))
	_, err := d.Put(t.Context(), "big", bytes.NewReader(make([]byte, 2<<20)), 2<<20)
	blobtest.WantCode(t, err, errs.InsufficientStorage)
	var e *errs.Error
	if errors.As(err, &e) && e.Hint == "" {
		t.Errorf("InsufficientStorage error %v has no hint", err)
	}
	if des, _ := os.ReadDir(filepath.Join(mnt, "blobs", "tmp")); len(des) != 0 {
		t.Errorf("tmp/ holds %d files after the failed Put", len(des))
	}
	// Multipart too.
	id, err := d.CreateMultipart(t.Context(), "big")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.PutPart(t.Context(), "big", id, 1, bytes.NewReader(make([]byte, 2<<20)), 2<<20)
	blobtest.WantCode(t, err, errs.InsufficientStorage)
	if got, _ := blobtest.MustRead(t, d, "small"); string(got) != "fits" {
		t.Errorf("small blob changed to %q", got)
	}
}

// TestDirOpenWriteTo checks the kernel-copy path of the reader Open
// returns: io.Copy to a file, a TCP connection and a buffer.
func TestDirOpenWriteTo(t *testing.T) {
	d := MustOpenDir(t, t.TempDir())
	data := blobtest.RandomBytes(3<<20+17, 9)
	blobtest.MustPut(t, d, "big", data)
	ranges := map[string]struct{ off, n int64 }{"Whole": {0, -1}, "Middle": {1<<20 + 3, 1 << 20}, "Tail": {3 << 20, -1}}
	for name, r := range ranges {
		want := data[r.off:]
		if r.n >= 0 {
			want = want[:r.n]
		}
		t.Run(name+"/File", func(t *testing.T) {
			rc, _, err := d.Open(t.Context(), "big", r.off, r.n)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("head"); err != nil {
				t.Fatal(err)
			}
			if n, err := io.Copy(f, rc); err != nil || n != int64(len(want)) {
				t.Fatalf("io.Copy to file = %d, %v; want %d", n, err, len(want))
			}
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got, append([]byte("head"), want...)) {
				t.Error("file content differs")
			}
		})
		t.Run(name+"/TCP", func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			done := make(chan []byte)
			go func() {
				c, err := l.Accept()
				if err != nil {
					done <- nil
					return
				}
				defer c.Close()
				b, _ := io.ReadAll(c)
				done <- b
			}()
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			rc, _, err := d.Open(t.Context(), "big", r.off, r.n)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(c, rc)
			rc.Close()
			c.Close()
			if err != nil || n != int64(len(want)) {
				t.Fatalf("io.Copy to TCP = %d, %v; want %d", n, err, len(want))
			}
			if got := <-done; !bytes.Equal(got, want) {
				t.Errorf("received %d bytes that differ", len(got))
			}
		})
		t.Run(name+"/Buffer", func(t *testing.T) {
			rc, _, err := d.Open(t.Context(), "big", r.off, r.n)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, rc); err != nil || !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("io.Copy to buffer: %d bytes, %v", buf.Len(), err)
			}
		})
	}
}

// TestDirConcurrentDelete races Puts into a directory with Deletes that
// remove it when it becomes empty: every Put must succeed.
func TestDirConcurrentDelete(t *testing.T) {
	d := MustOpenDir(t, t.TempDir())
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("shared/sub/%d-%d", g, i)
				if _, err := d.Put(ctx, key, strings.NewReader("x"), 1); err != nil {
					t.Errorf("Put(%s): %v", key, err)
					return
				}
				if err := d.Delete(ctx, key); err != nil {
					t.Errorf("Delete(%s): %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := blobtest.MustList(t, d, "", "", 0); len(got) != 0 {
		t.Errorf("List after all deletes = %v", got)
	}
}

// A Delete moves the blob out of the way at once and frees it in the
// background: a reader that has it open still reads it whole, and once the
// reaper is done (Close waits for it) nothing is left in tmp/.
func TestDirDeleteReapsInBackground(t *testing.T) {
	root := t.TempDir()
	d, err := blob.OpenDir(root, blob.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	blobtest.MustPut(t, d, "ckpt/step_1/a.distcp", data)
	rc, _, err := d.Open(ctx, "ckpt/step_1/a.distcp", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for i := range 20 {
		blobtest.MustPut(t, d, fmt.Sprintf("ckpt/step_1/%d", i), data)
	}
	if err := d.Delete(ctx, "ckpt/step_1/a.distcp"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stat(ctx, "ckpt/step_1/a.distcp"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("Stat after Delete: %v, want NotFound", err)
	}
	for i := range 20 {
		if err := d.Delete(ctx, fmt.Sprintf("ckpt/step_1/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := blobtest.MustList(t, d, "", "", 0); len(got) != 0 {
		t.Errorf("List after the deletes = %v", got)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
		t.Errorf("reading a blob deleted while open: %d bytes, %v", len(got), err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"tmp", "blobs"} {
		if des, err := os.ReadDir(filepath.Join(root, dir)); err != nil || len(des) != 0 {
			t.Errorf("%s/ holds %v (%v) after Close, want nothing", dir, des, err)
		}
	}
}

// TestDirFileModes: every file the Dir writes is 0600 and every directory
// 0700, whatever the umask lets through: blobs hold users' data.
func TestDirFileModes(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	d := MustOpenDir(t, root)
	blobtest.MustPut(t, d, "exp/1/model.bin", []byte("weights"))
	id, err := d.CreateMultipart(t.Context(), "exp/1/big")
	if err != nil {
		t.Fatal(err)
	}
	blobtest.MustPutPart(t, d, "exp/1/big", id, 1, []byte("part"))
	err = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if de.IsDir() {
			want = 0o700
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", p, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDirRemovesStaleOnATimer: an abandoned upload goes while the Dir is
// open, not only at the next OpenDir; until then its parts count in Usage.
func TestDirRemovesStaleOnATimer(t *testing.T) {
	root := t.TempDir()
	d, err := blob.OpenDir(root, blob.DirOptions{UploadMaxAge: time.Hour, StaleEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id, err := d.CreateMultipart(t.Context(), "exp/1/big")
	if err != nil {
		t.Fatal(err)
	}
	blobtest.MustPutPart(t, d, "exp/1/big", id, 1, []byte("12345"))
	u, err := d.Usage(t.Context())
	if err != nil || u.Bytes < 5 {
		t.Fatalf("usage with an upload in progress: %+v, %v", u, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(root, "uploads", id), old, old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(root, "uploads", id)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned upload is still there")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := d.PutPart(t.Context(), "exp/1/big", id, 2, bytes.NewReader([]byte("x")), 1); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a part of the removed upload: %v, want NotFound", err)
	}
}
