package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A server on SQLite holds an exclusive lock on sextant.lock in its data
// directory for as long as it runs, so that a second server on the same
// directory refuses to start instead of serving the same database beside
// it, and so that a starting server knows that the servers before it are
// gone: only then may it release their upload claims (volumes.Service.Start).
// The operating system drops the lock when the process ends, however it
// ends, so a crash leaves nothing to clean up. The file says who holds it
// (pid, address, start time), for the message of the server refused.
//
// With PostgreSQL (--db) several replicas share the database on purpose,
// and liveness is the instances table's business: no lock is taken.

// dataDirLockFile is the lock file's name in the data directory.
const dataDirLockFile = "sextant.lock"

// DataDirLockedError is the error of a server whose data directory is in
// use by another running server.
type DataDirLockedError struct {
	Dir string
	// Holder is what the lock file says of the running server: its pid,
	// address and start time (empty when it has not written them yet).
	Holder lockHolder
}

// Error implements error.
func (e *DataDirLockedError) Error() string {
	who := "another sextant server"
	if h := e.Holder.String(); h != "" {
		who += " (" + h + ")"
	}
	return fmt.Sprintf("the data directory %s is in use by %s: stop that server first, or start this one with another --data-dir "+
		"(two servers on one SQLite directory would serve the same database side by side)", e.Dir, who)
}

// lockHolder is the content of the lock file.
type lockHolder struct {
	PID     int
	Addr    string
	Started time.Time
}

func (h lockHolder) String() string {
	var parts []string
	if h.PID > 0 {
		parts = append(parts, "pid "+strconv.Itoa(h.PID))
	}
	if h.Addr != "" {
		parts = append(parts, "listening on "+h.Addr)
	}
	if !h.Started.IsZero() {
		parts = append(parts, "started "+h.Started.Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

func (h lockHolder) marshal() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "pid=%d\n", h.PID)
	if h.Addr != "" {
		fmt.Fprintf(&b, "addr=%s\n", h.Addr)
	}
	fmt.Fprintf(&b, "started=%s\n", h.Started.UTC().Format(time.RFC3339))
	return []byte(b.String())
}

func parseLockHolder(b []byte) lockHolder {
	var h lockHolder
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "pid":
			h.PID, _ = strconv.Atoi(v)
		case "addr":
			h.Addr = v
		case "started":
			h.Started, _ = time.Parse(time.RFC3339, v)
		}
	}
	return h
}

// dataDirLock is the lock a running server holds on its data directory.
type dataDirLock struct {
	f      *os.File
	holder lockHolder
}

// errLockUnsupported is returned by lockFile where the file system cannot
// lock files.
var errLockUnsupported = errors.New("file locks are not supported here")

// lockDataDir takes the data directory's lock, which must exist, or
// returns a *DataDirLockedError naming the server that holds it.
func lockDataDir(dir string) (*dataDirLock, error) {
	l, err := lockDataDirQuiet(dir)
	if err != nil {
		var le *DataDirLockedError
		if errors.As(err, &le) || errors.Is(err, errLockUnsupported) {
			return nil, err
		}
		return nil, fmt.Errorf("lock the data directory (%s): %w", filepath.Join(dir, dataDirLockFile), err)
	}
	l.holder = lockHolder{PID: os.Getpid(), Started: time.Now()}
	if err := l.write(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// dataDirHolder tells whether a server holds the lock of the data
// directory dir, and what the lock file says of it. It takes the lock only
// for as long as it takes to look.
func dataDirHolder(dir string) (lockHolder, bool) {
	if dir == "" {
		return lockHolder{}, false
	}
	l, err := lockDataDirQuiet(dir)
	var le *DataDirLockedError
	if errors.As(err, &le) {
		return le.Holder, true
	}
	if l != nil {
		l.f.Close() // releases the lock; the file is left as it was
	}
	return lockHolder{}, false
}

// lockDataDirQuiet is lockDataDir without writing the lock file.
func lockDataDirQuiet(dir string) (*dataDirLock, error) {
	name := filepath.Join(dir, dataDirLockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	locked, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if !locked {
		b, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		return nil, &DataDirLockedError{Dir: absPath(dir), Holder: parseLockHolder(b)}
	}
	return &dataDirLock{f: f}, nil
}

// setAddr records the address the server listens on, for the message of a
// second server.
func (l *dataDirLock) setAddr(addr string) error {
	l.holder.Addr = addr
	return l.write()
}

func (l *dataDirLock) write() error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write the data directory's lock: %w", err)
	}
	if _, err := l.f.WriteAt(l.holder.marshal(), 0); err != nil {
		return fmt.Errorf("write the data directory's lock: %w", err)
	}
	return nil
}

// Close empties the lock file and releases the lock. The file stays: a
// server starting meanwhile may have it open already.
func (l *dataDirLock) Close() error {
	if l == nil {
		return nil
	}
	err := l.f.Truncate(0)
	return errors.Join(err, l.f.Close()) // closing the file releases the lock
}
