package blob_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/blobtest"
)

// benchSize is the blob size of the benchmarks: large enough that a Put to
// S3 goes multipart with the default 16 MiB parts.
const benchSize = 64 << 20

// benchStores runs fn against each backend: a Dir in a temporary directory
// and an S3 store on the test server (a MinIO the benchmark starts unless
// SEXTANT_TEST_S3_ENDPOINT is set; SEXTANT_TEST_S3=off skips it).
func benchStores(b *testing.B, fn func(b *testing.B, s blob.Store)) {
	b.Run("backend=dir", func(b *testing.B) { fn(b, MustOpenDir(b, b.TempDir())) })
	b.Run("backend=s3", func(b *testing.B) { fn(b, blobtest.MustS3Server(b).MustOpen(b)) })
}

// BenchmarkPut stores a 64 MiB blob of known size from a plain reader (no
// Seek, no WriteTo, like a request body). MB/s is the upload rate.
//
//	go test -run '^$' -bench 'BenchmarkPut$' -count 6 ./internal/blob/ | tee new.txt
func BenchmarkPut(b *testing.B) {
	data := blobtest.RandomBytes(benchSize, 1)
	benchStores(b, func(b *testing.B, s blob.Store) {
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Put(b.Context(), "bench/put", readerOnly{bytes.NewReader(data)}, benchSize); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGet reads a 64 MiB blob with Read into a 1 MiB buffer. MB/s is
// the download rate.
//
//	go test -run '^$' -bench 'BenchmarkGet$' -count 6 ./internal/blob/ | tee new.txt
func BenchmarkGet(b *testing.B) {
	data := blobtest.RandomBytes(benchSize, 2)
	buf := make([]byte, 1<<20)
	benchStores(b, func(b *testing.B, s blob.Store) {
		blobtest.MustPut(b, s, "bench/get", data)
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			rc, _, err := s.Open(b.Context(), "bench/get", 0, -1)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(writerOnly{io.Discard}, readerOnly{rc}, buf)
			rc.Close()
			if err != nil || n != benchSize {
				b.Fatalf("read %d bytes, %v", n, err)
			}
		}
	})
}

// readerOnly and writerOnly hide ReadFrom and WriteTo, so that io.Copy
// goes through the given buffer.
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }
