package main

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBuildPrintsNothing: a first build of the server (what `go run
// ./cmd/sextant server` does on a fresh clone) prints nothing, so a new
// user never mistakes a working build for a broken one. Go caches compiled
// packages and does not print a cached package's compiler warnings again,
// and only C code (cgo: SQLite, NVML, the runtime's own) can warn, so the
// test compiles every C file of the binary afresh: a CGO_CFLAGS define no
// cache entry has makes each cgo package a cache miss, and the pure Go
// packages come from the cache. It fails on any line of output, a compiler
// warning or anything else.
func TestBuildPrintsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every C file of the server afresh (about a minute)")
	}
	flags, err := exec.Command("go", "env", "CGO_CFLAGS").Output()
	if err != nil {
		t.Fatalf("go env CGO_CFLAGS: %v", err)
	}
	fresh := strings.TrimSpace(string(flags)) + " -DSEXTANT_FRESH_BUILD=" + strconv.FormatUint(rand.Uint64(), 36)
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "sextant"), ".")
	cmd.Env = append(os.Environ(), "CGO_CFLAGS="+fresh)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if len(out) > 0 {
		lines := strings.Count(string(out), "\n")
		t.Errorf("go build printed %d lines (CGO_CFLAGS=%q); a first build must print nothing:\n%s", lines, fresh, out)
	}
}

// TestDomainImportsNoAdapters keeps the layering docs/architecture.md
// draws: the domain packages import the standard library and each other,
// never an HTTP server or client, SQL, the S3 SDK or Prometheus (their
// adapters are sqlstore, blob/s3 and httpapi).
func TestDomainImportsNoAdapters(t *testing.T) {
	domain := []string{"tracking", "tracking/search", "metrics", "runlogs", "runevents", "gpu", "volumes", "workspace", "artifacts", "blob", "errs", "gpuhours", "progress"}
	args := []string{"list", "-deps"}
	for _, d := range domain {
		args = append(args, "github.com/sextant/sextant/internal/"+d)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < len(domain) {
		t.Fatalf("go list -deps named %d packages", len(deps))
	}
	for _, dep := range deps {
		switch {
		case dep == "net/http", dep == "database/sql",
			strings.HasPrefix(dep, "github.com/minio/"), strings.HasPrefix(dep, "github.com/jackc/"),
			strings.HasPrefix(dep, "github.com/mattn/"), strings.HasPrefix(dep, "github.com/prometheus/"):
			t.Errorf("a domain package depends on %s", dep)
		}
	}
}
