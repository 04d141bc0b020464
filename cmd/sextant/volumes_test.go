package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs one client command against the server at addr and returns its
// stdout, or fails the test with its output.
func cli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := tryCLI(t, addr, args...)
	if err != nil {
		t.Fatalf("sextant %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func tryCLI(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"MLFLOW_TRACKING_URI": "http://" + addr}
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
	err := m.Run(context.Background(), args)
	return stdout.String() + stderr.String(), err
}

func TestVolumesCLI(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	out := cli(t, addr, "volumes", "create", "main.team.data", "-p", "--comment", "training data")
	if !strings.Contains(out, "created volume main.team.data (/Volumes/main/team/data)") {
		t.Fatalf("create: %s", out)
	}
	if _, err := tryCLI(t, addr, "volumes", "create", "main.team.data"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create again: %v", err)
	}
	if out := cli(t, addr, "volumes", "ls", "main.team"); !strings.Contains(out, "main.team.data") || !strings.Contains(out, "training data") {
		t.Fatalf("ls: %s", out)
	}

	src := t.TempDir()
	files := map[string]string{"a.txt": "alpha", "sub/b.bin": strings.Repeat("b", 100_000), "sub/deeper/c": ""}
	for name, data := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(src, "empty"), 0o755)
	if _, err := tryCLI(t, addr, "volumes", "cp", src, "/Volumes/main/team/data/ds"); err == nil || !strings.Contains(err.Error(), "-r") {
		t.Fatalf("cp of a directory without -r: %v", err)
	}
	if out := cli(t, addr, "volumes", "cp", "-r", src, "/Volumes/main/team/data/ds", "-j", "2"); !strings.Contains(out, "copied 3 file(s)") {
		t.Fatalf("cp up: %s", out)
	}
	if out := cli(t, addr, "volumes", "ls", "/Volumes/main/team/data/ds"); !strings.Contains(out, "empty/") || !strings.Contains(out, "a.txt") {
		t.Fatalf("ls dir: %s", out)
	}
	dst := filepath.Join(t.TempDir(), "back")
	cli(t, addr, "volumes", "cp", "-r", "/Volumes/main/team/data/ds", dst)
	for name, data := range files {
		b, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name)))
		if err != nil || string(b) != data {
			t.Fatalf("%s came back as %q, %v", name, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() {
		t.Fatalf("empty directory did not come back: %v", err)
	}
	one := filepath.Join(t.TempDir(), "one")
	cli(t, addr, "volumes", "cp", "/Volumes/main/team/data/ds/a.txt", one)
	if b, _ := os.ReadFile(one); string(b) != "alpha" {
		t.Fatalf("single file: %q", b)
	}
	// Errors say what is wrong: no such file, or a directory without -r.
	if _, err := tryCLI(t, addr, "volumes", "cp", "/Volumes/main/team/data/ds/nope.txt", one); err == nil || err.Error() != "/Volumes/main/team/data/ds/nope.txt: no such file or directory" {
		t.Fatalf("cp of a missing file: %v", err)
	}
	if _, err := tryCLI(t, addr, "volumes", "cp", "/Volumes/main/team/data/ds", one); err == nil || err.Error() != "/Volumes/main/team/data/ds is a directory: use -r" {
		t.Fatalf("cp of a directory without -r: %v", err)
	}
	if _, err := tryCLI(t, addr, "volumes", "cp", filepath.Join(src, "nope.txt"), "/Volumes/main/team/data/ds/"); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Fatalf("cp of a missing local file: %v", err)
	}
	if _, err := tryCLI(t, addr, "volumes", "cp", filepath.Join(src, "a.txt"), "/Volumes/main/team/data/ds/a.txt", "--overwrite=false"); err == nil || !strings.Contains(err.Error(), "ALREADY_EXISTS") {
		t.Fatalf("cp --overwrite=false over a file: %v", err)
	}
	if _, err := tryCLI(t, addr, "volumes", "cp", src, "/Volumes/main/team/../x"); err == nil {
		t.Fatal("cp to a path with '..' worked")
	}
	if _, err := tryCLI(t, addr, "volumes", "rm", "/Volumes/main/team/data/ds"); err == nil || !strings.Contains(err.Error(), "rm -r") {
		t.Fatalf("rm of a directory without -r: %v", err)
	}
	if out := cli(t, addr, "volumes", "rm", "-r", "/Volumes/main/team/data/ds"); !strings.Contains(out, "3 file(s)") {
		t.Fatalf("rm -r: %s", out)
	}
	if out := cli(t, addr, "volumes", "ls", "/Volumes/main/team/data"); strings.TrimSpace(out) != "" {
		t.Fatalf("left after rm -r: %s", out)
	}
	if _, err := tryCLI(t, addr, "volumes", "rm", "main.team"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("rm of a schema with volumes: %v", err)
	}
	cli(t, addr, "volumes", "rm", "main", "--force")
	if out := cli(t, addr, "volumes", "ls"); strings.Contains(out, "main") {
		t.Fatalf("catalog left: %s", out)
	}
}

func TestCkptCLI(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	cli(t, addr, "volumes", "create", "main.team.ckpt", "-p")
	put := func(p, data string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", "http://"+addr+"/api/2.0/fs/files/Volumes/main/team/ckpt/"+p, strings.NewReader(data))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("put %s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	// step_1 and step_10 complete; step_3 lost its writer; step_11 is being
	// written (a fresh lock); notes/ is no checkpoint.
	put("run/step_1/__0_aa_0.distcp", "s1")
	put("run/step_1/.metadata", "m1")
	put("run/step_3/__0_bb_0.distcp", "s3")
	put("run/step_10/__0_cc_0.distcp", "s10")
	put("run/step_10/__1_cc_0.distcp", "s10")
	put("run/step_10/.metadata", "m10")
	put("run/step_11/__0_dd_0.distcp", "s11")
	put("run/step_11/.sextant-writer", `{"save":"dd"}`)
	put("run/notes/readme.txt", "not a checkpoint")

	out := cli(t, addr, "ckpt", "ls", "/Volumes/main/team/ckpt/run")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"step_1 complete", "step_3 incomplete", "step_10 complete", "step_11 writing"}
	if len(lines) != 5 {
		t.Fatalf("ls:\n%s", out)
	}
	for i, w := range want {
		if f := strings.Fields(lines[i+1]); len(f) < 2 || f[0]+" "+f[1] != w {
			t.Fatalf("ls line %d: %q, want %q\n%s", i+1, lines[i+1], w, out)
		}
	}
	if out := cli(t, addr, "ckpt", "latest", "/Volumes/main/team/ckpt/run"); strings.TrimSpace(out) != "/Volumes/main/team/ckpt/run/step_10" {
		t.Fatalf("latest: %q", out)
	}
	out = cli(t, addr, "ckpt", "gc", "/Volumes/main/team/ckpt/run", "--keep-last", "1", "--grace", "0s", "--dry-run")
	if !strings.Contains(out, "would delete step_1") || !strings.Contains(out, "would delete step_3") || strings.Contains(out, "step_10 (") || strings.Contains(out, "step_11") ||
		!strings.Contains(out, "would keep 2 checkpoint(s) and delete 2") || strings.Contains(out, "2 deleted") {
		t.Fatalf("gc --dry-run:\n%s", out)
	}
	out = cli(t, addr, "ckpt", "gc", "/Volumes/main/team/ckpt/run", "--keep-last", "1", "--grace", "0s")
	if !strings.Contains(out, "kept 2 checkpoint(s); 2 deleted") {
		t.Fatalf("gc:\n%s", out)
	}
	out = cli(t, addr, "ckpt", "ls", "/Volumes/main/team/ckpt/run")
	if strings.Contains(out, "step_1 ") || strings.Contains(out, "step_3") || !strings.Contains(out, "step_10") || !strings.Contains(out, "step_11") {
		t.Fatalf("after gc:\n%s", out)
	}
	if out := cli(t, addr, "volumes", "ls", "/Volumes/main/team/ckpt/run"); !strings.Contains(out, "notes/") || strings.Contains(out, "step_1/") {
		t.Fatalf("gc touched other directories or left step_1:\n%s", out)
	}
	// An incomplete checkpoint inside the grace period stays.
	put("run/step_12/__0_ee_0.distcp", "s12")
	if out := cli(t, addr, "ckpt", "gc", "/Volumes/main/team/ckpt/run", "--keep-last", "1"); !strings.Contains(out, "0 deleted") {
		t.Fatalf("gc within the grace period:\n%s", out)
	}
	_, err := tryCLI(t, addr, "ckpt", "latest", "/Volumes/main/team/ckpt/run/notes")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("latest without checkpoints: %v", err)
	}
	if _, err := tryCLI(t, addr, "ckpt", "gc", "/Volumes/main/team/ckpt/run"); err == nil || !strings.Contains(err.Error(), "--keep-last") {
		t.Fatalf("gc without --keep-last: %v", err)
	}
	if _, err := tryCLI(t, addr, "ckpt", "ls", "relative/path"); err == nil {
		t.Fatal("ls of a non-volume path worked")
	}
}
