package blobtest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/blob/s3"
)

// Environment variables that point the S3 tests at a running server instead
// of a MinIO they start themselves.
const (
	// EnvS3 set to "off" disables the S3 tests (they are skipped); any
	// other value is ignored.
	EnvS3 = "SEXTANT_TEST_S3"
	// EnvS3Endpoint is the server's endpoint (host:port or an http(s) URL).
	EnvS3Endpoint = "SEXTANT_TEST_S3_ENDPOINT"
	// EnvS3AccessKey and EnvS3SecretKey are its credentials.
	EnvS3AccessKey = "SEXTANT_TEST_S3_ACCESS_KEY"
	EnvS3SecretKey = "SEXTANT_TEST_S3_SECRET_KEY"
	// EnvS3Bucket is the bucket the tests use (created if missing); each
	// store gets a fresh random prefix in it. Default "sextant-test".
	EnvS3Bucket = "SEXTANT_TEST_S3_BUCKET"
)

// S3Server is an S3 endpoint for tests.
type S3Server struct {
	// Endpoint, AccessKey, SecretKey and Bucket locate the server and the
	// bucket the tests use.
	Endpoint, AccessKey, SecretKey, Bucket string
}

// MustS3Server returns the S3 server the tests run against: the one that
// SEXTANT_TEST_S3_ENDPOINT names, or else a MinIO server that it starts for
// tb, on loopback ports with its data in a temporary directory, and stops
// at tb's cleanup. The MinIO binary comes from scripts/minio.sh, which
// builds it once (about 5 minutes) and caches it.
//
// It skips tb when SEXTANT_TEST_S3=off, and fails it, saying how to get a
// server, when there is none: an S3 test never passes silently untested.
func MustS3Server(tb testing.TB) *S3Server {
	tb.Helper()
	if os.Getenv(EnvS3) == "off" {
		tb.Skipf("S3 tests disabled by %s=off", EnvS3)
	}
	bucket := cmp.Or(os.Getenv(EnvS3Bucket), "sextant-test")
	if ep := os.Getenv(EnvS3Endpoint); ep != "" {
		return &S3Server{
			Endpoint:  ep,
			AccessKey: os.Getenv(EnvS3AccessKey),
			SecretKey: os.Getenv(EnvS3SecretKey),
			Bucket:    bucket,
		}
	}
	bin, err := minioBinary()
	if err != nil {
		tb.Fatalf("no S3 server for the S3 tests: %v\n\n"+
			"Get one of:\n"+
			"  - a MinIO binary: run ./scripts/minio.sh from the repository root (it builds MinIO from the Go\n"+
			"    module proxy once, about 5 minutes, and caches it), then rerun the tests;\n"+
			"  - a running S3-compatible server: set %s (and %s, %s, %s);\n"+
			"  - or skip the S3 tests explicitly with %s=off.",
			err, EnvS3Endpoint, EnvS3AccessKey, EnvS3SecretKey, EnvS3Bucket, EnvS3)
	}
	return startMinIO(tb, bin, bucket)
}

// Options returns options for a store in a fresh random prefix of the
// server's bucket (created if needed). The prefix's blobs are deleted at
// tb's cleanup.
func (s *S3Server) Options(tb testing.TB) s3.Options {
	tb.Helper()
	opts := s3.Options{
		Endpoint:     s.Endpoint,
		Bucket:       s.Bucket,
		AccessKey:    s.AccessKey,
		SecretKey:    s.SecretKey,
		CreateBucket: true,
		Prefix:       "t-" + randomHex(8) + "/",
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		root := opts
		root.Prefix = ""
		st, err := s3.Open(ctx, root)
		if err != nil {
			tb.Logf("cleaning up S3 prefix %s: %v", opts.Prefix, err)
			return
		}
		if err := st.DeleteAll(ctx, opts.Prefix); err != nil {
			tb.Logf("cleaning up S3 prefix %s: %v", opts.Prefix, err)
		}
	})
	return opts
}

// MustOpen opens a store in a fresh random prefix of the server's bucket
// (see Options).
func (s *S3Server) MustOpen(tb testing.TB) *s3.Store {
	tb.Helper()
	st, err := s3.Open(tb.Context(), s.Options(tb))
	if err != nil {
		tb.Fatalf("open S3 store: %v", err)
	}
	return st
}

// minioBinary runs scripts/minio.sh, found in the first parent of the
// working directory that has it, and returns the path it prints.
func minioBinary() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	script := ""
	for dir := wd; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "scripts", "minio.sh")
		if _, err := os.Stat(p); err == nil {
			script = p
			break
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("scripts/minio.sh not found above %s", wd)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s failed: %v\n%s", script, err, strings.TrimSpace(stderr.String()))
	}
	bin := strings.TrimSpace(stdout.String())
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%s printed %q, which is not a file", script, bin)
	}
	return bin, nil
}

// startMinIO starts a MinIO server for tb, retrying with other ports if the
// ones it picked were taken meanwhile.
func startMinIO(tb testing.TB, bin, bucket string) *S3Server {
	tb.Helper()
	var errList []error
	for range 3 {
		srv, err := tryStartMinIO(tb, bin, bucket)
		if err == nil {
			return srv
		}
		errList = append(errList, err)
	}
	tb.Fatalf("start MinIO (%s): %v", bin, errors.Join(errList...))
	return nil
}

func tryStartMinIO(tb testing.TB, bin, bucket string) (*S3Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	consoleAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	data := tb.TempDir()
	srv := &S3Server{Endpoint: addr, AccessKey: "sextant", SecretKey: "sextant-secret-" + randomHex(8), Bucket: bucket}
	var out syncBuffer
	cmd := exec.Command(bin, "server", data, "--address", addr, "--console-address", consoleAddr, "--quiet")
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+srv.AccessKey,
		"MINIO_ROOT_PASSWORD="+srv.SecretKey,
		// No outbound traffic and no surprises: no web console, no update
		// check, no call-home; MINIO_CI_CD accepts the root drive and keeps
		// the buffer pool small.
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CALLHOME_ENABLE=off",
		"MINIO_CI_CD=1",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("minio exited during start-up (%v):\n%s", err, out.String())
		default:
		}
		// /minio/health/live answers 200 before the object layer, bucket
		// metadata and IAM are up ("Server not initialized yet" errors);
		// /minio/health/cluster waits for all three.
		resp, err := client.Get("http://" + addr + "/minio/health/cluster")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("minio not ready after 60 s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("minio output:\n%s", out.String())
		}
	})
	return srv, nil
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// syncBuffer is a bytes.Buffer that the process's output goroutine may
// write while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
