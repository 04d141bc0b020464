package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runServerLogged starts "sextant server" in-process like runServer and
// returns its address and a function that stops it and returns its log.
func runServerLogged(t *testing.T, env map[string]string, args ...string) (string, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	var stderr bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }, Ready: func(a string) { ready <- a }}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, append([]string{"server"}, args...)) }()
	select {
	case addr := <-ready:
		return addr, func() string {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
			return stderr.String()
		}
	case err := <-done:
		cancel()
		t.Fatalf("server exited: %v\n%s", err, stderr.String())
	case <-time.After(2 * time.Minute):
		cancel()
		<-done
		t.Fatalf("server did not start\n%s", stderr.String())
	}
	return "", nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestNoSecretsOnTheDebugListenerOrInTheLog: the debug listener serves no
// command line, and the start-up log shows no character of the S3 secret
// key.
func TestNoSecretsOnTheDebugListenerOrInTheLog(t *testing.T) {
	const secret = "S3cr3tK3yV4lu3Zq"
	dbg := freeAddr(t)
	_, stop := runServerLogged(t, map[string]string{"AWS_SECRET_ACCESS_KEY": secret},
		"--port", "0", "--data-dir", t.TempDir(), "--debug-addr", dbg, "--s3-secret-key", secret)
	resp, err := http.Get("http://" + dbg + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || strings.Contains(string(body), secret) || strings.Contains(string(body), "s3-secret-key") {
		t.Errorf("/debug/pprof/cmdline: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + dbg + "/debug/pprof/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the pprof index: %v %v", resp, err)
	}
	resp.Body.Close()
	log := stop()
	if !strings.Contains(log, "s3_secret_key") {
		t.Fatalf("the start-up log does not say whether a secret key is set:\n%s", log)
	}
	if !strings.Contains(log, "s3_secret_key=****") {
		t.Errorf("the start-up log does not show the secret key as ****:\n%s", log)
	}
	for i := 0; i+3 <= len(secret); i++ {
		if strings.Contains(log, secret[i:i+3]) {
			t.Fatalf("the log shows characters of the secret (%q):\n%s", secret[i:i+3], log)
		}
	}
}

func TestRedactDB(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := redactDB(in); got != want {
			t.Errorf("redactDB(%q) = %q, want %q", in, got, want)
		}
	}
	f("postgres://sextant:hunter2@db:5432/sextant", "postgres://sextant:****@db:5432/sextant")
	f("postgres://sextant:p@ss@db/sextant?sslmode=require", "postgres://sextant:****@db/sextant?sslmode=require")
	f("postgres://db/sextant?user=sextant&password=hunter2", "postgres://db/sextant?user=sextant&password=****")
	f("postgresql://u@db/x?sslpassword=k3y&sslmode=verify-full", "postgresql://u@db/x?sslpassword=****&sslmode=verify-full")
	f("postgres://u:pw@db/x?application_name=a@b", "postgres://u:****@db/x?application_name=a@b")
	f("/data/sextant.db", "/data/sextant.db")
	// Characters a URL should have escaped, in the password.
	f("postgres://u:pa?ss@db/x", "postgres://u:****@db/x")
	f("postgres://u:a?b@c@db:5432/x?sslmode=require&password=z", "postgres://u:****@db:5432/x?sslmode=require&password=****")
	f("postgres://u:p/w@db", "postgres://u:****@db")
	f("postgres://u@db/x?password=s3cret", "postgres://u@db/x?password=****")
	if mask("AKIAIOSFODNN7EXAMPLE") != "****" || mask("") != "" {
		t.Errorf("mask shows characters: %q", mask("AKIAIOSFODNN7EXAMPLE"))
	}
}

// TestDataDirModes: a new data directory is 0700 and its database 0600; a
// data directory open to other accounts gets a warning at start with the
// command that fixes it.
func TestDataDirModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, stop := runServerLogged(t, nil, "--port", "0", "--data-dir", dir)
	log := stop()
	if strings.Contains(log, "chmod") {
		t.Errorf("a new data directory got a warning:\n%s", log)
	}
	for p, want := range map[string]os.FileMode{
		dir: 0o700, filepath.Join(dir, "sextant.db"): 0o600, filepath.Join(dir, "secret"): 0o600,
		filepath.Join(dir, "artifacts"): 0o700, filepath.Join(dir, "artifacts", "blobs"): 0o700,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", p, got, want)
		}
	}

	open := filepath.Join(t.TempDir(), "open data")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	_, stop = runServerLogged(t, nil, "--port", "0", "--data-dir", open)
	log = stop()
	if want := "chmod -R go-rwx '" + open + "'"; !strings.Contains(log, want) || !strings.Contains(log, "0755") {
		t.Errorf("no warning with %q for a 0755 data directory:\n%s", want, log)
	}
}
