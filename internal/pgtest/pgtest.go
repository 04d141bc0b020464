// Package pgtest starts throwaway PostgreSQL servers for tests and
// benchmarks: initdb into a temporary directory, postgres on a free
// loopback port, fresh databases on demand, everything removed at the end.
//
// The server binaries come from PATH or /usr/lib/postgresql/<version>/bin.
// PostgreSQL refuses to run as root, so when the caller is root the server
// runs as the "postgres" user (the Debian package creates it).
//
// Tests that need PostgreSQL call NewDatabase; the package's TestMain calls
// Main so that the shared server is stopped. SEXTANT_TEST_POSTGRES_URL
// points the tests at a running server instead (a superuser URL), and
// SEXTANT_TEST_POSTGRES=off skips them; otherwise a missing PostgreSQL fails
// the tests, so that they never pass untested.
package pgtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Environment variables read by NewDatabase.
const (
	EnvURL = "SEXTANT_TEST_POSTGRES_URL"
	EnvOff = "SEXTANT_TEST_POSTGRES"
)

// Server is a running PostgreSQL server.
type Server struct {
	// URL is a superuser URL of its "postgres" database.
	URL string

	dir  string
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// Start initialises a cluster in a new temporary directory and starts
// postgres on a free loopback port. Settings favour speed over durability
// (fsync off): the data is thrown away anyway.
func Start() (*Server, error) {
	bindir, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sextant-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	cred, err := credential()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bindir, "initdb"), "-D", data, "-U", "sextant", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var errList []error
	for range 3 {
		err := s.start(bindir, data, cred)
		if err == nil {
			return s, nil
		}
		errList = append(errList, err)
	}
	os.RemoveAll(dir)
	return nil, errors.Join(errList...)
}

func (s *Server) start(bindir, data string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bindir, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-h", "127.0.0.1", "-k", s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=128MB")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	// The server dies with the test process, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	s.cmd, s.log = cmd, log
	s.done = make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()
	s.URL = fmt.Sprintf("postgres://sextant@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.done:
			out, _ := os.ReadFile(logPath)
			log.Close()
			return fmt.Errorf("postgres exited during start-up (%v):\n%s", err, out)
		default:
		}
		if err := ping(s.URL); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("postgres not ready after 60s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	if s.log != nil {
		s.log.Close()
	}
	os.RemoveAll(s.dir)
}

// CreateDatabase creates a fresh database and returns its URL.
func CreateDatabase(ctx context.Context, serverURL string) (string, error) {
	db, err := sql.Open("pgx", serverURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	name := "t_" + randomHex(8)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDatabase drops a database made by CreateDatabase, closing its
// remaining connections.
func DropDatabase(ctx context.Context, serverURL, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", serverURL)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+strings.TrimPrefix(u.Path, "/")+" WITH (FORCE)")
	return err
}

var shared struct {
	once sync.Once
	srv  *Server
	url  string
	err  error
}

// Main runs a package's tests and then stops the server NewDatabase
// started, if any. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	return code
}

// NewDatabase returns the URL of a fresh, empty database on the shared
// server (started on first use), dropped at tb's cleanup.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	if os.Getenv(EnvOff) == "off" {
		tb.Skipf("PostgreSQL tests disabled by %s=off", EnvOff)
	}
	shared.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			shared.url = u
			return
		}
		shared.srv, shared.err = Start()
		if shared.err == nil {
			shared.url = shared.srv.URL
		}
	})
	if shared.err != nil {
		tb.Fatalf("no PostgreSQL for the tests: %v\n\nInstall PostgreSQL (apt-get install postgresql), point %s at a running server, or skip these tests with %s=off.",
			shared.err, EnvURL, EnvOff)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := CreateDatabase(ctx, shared.url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := DropDatabase(ctx, shared.url, u); err != nil {
			tb.Logf("drop test database: %v", err)
		}
	})
	return u
}

// binDir finds the directory of initdb and postgres: PATH first, then the
// newest /usr/lib/postgresql/<version>/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// A link on PATH (/usr/local/bin/initdb) may have no postgres
		// beside it; its target's directory has all of them.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb not found on PATH or in /usr/lib/postgresql/*/bin")
}

// credential returns the postgres user's credential when running as root
// (PostgreSQL will not run as root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := cmp.Or(os.Getenv("SEXTANT_TEST_POSTGRES_USER"), "postgres")
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL must run as another user, and user %q does not exist: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func ping(u string) error {
	db, err := sql.Open("pgx", u)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
