package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRunAndLogsCommands(t *testing.T) {
	addr, stop := runServer(t, map[string]string{"SEXTANT_DATA_DIR": t.TempDir()}, "--port", "0")
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	env := map[string]string{"MLFLOW_TRACKING_URI": "http://" + addr}
	run := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := m.Run(ctx, args)
		return out.String(), errb.String(), err
	}

	// stdout and stderr are two pipes: lines written to both at once are
	// ordered as the launcher reads them, so the child pauses between them.
	out, stderr, err := run("run", "--experiment", "/Shared/cmd", "--run-name", "cmd-test", "--", "/bin/sh", "-c", "echo one; sleep 0.3; echo two >&2; exit 4")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 4 || out != "one\n" || !strings.Contains(stderr, "two\n") {
		t.Fatalf("run: %v, stdout %q, stderr %q", err, out, stderr)
	}
	m := regexp.MustCompile(`sextant: run ([0-9a-f]{32}) \(cmd-test\) in experiment /Shared/cmd`).FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(err.Error(), "FAILED") {
		t.Fatalf("stderr %q, err %v", stderr, err)
	}
	runID := m[1]

	// Flags after the run id, and filters.
	if out, _, err := run("logs", runID, "--labels"); err != nil || out != "[node 0 stdout] one\n[node 0 stderr] two\n" {
		t.Fatalf("logs: %q, %v", out, err)
	}
	if out, _, err := run("logs", "--grep", "^tw", runID); err != nil || out != "two\n" {
		t.Fatalf("logs --grep: %q, %v", out, err)
	}
	if out, _, err := run("logs", "-f", runID); err != nil || out != "one\ntwo\n" {
		t.Fatalf("logs -f of an ended run: %q, %v", out, err)
	}
	if _, stderr, err := run("logs", runID, "--save-artifact", "--artifact-name", "both"); err != nil || !strings.Contains(stderr, "logs/both.txt") {
		t.Fatalf("save: %q, %v", stderr, err)
	}
}

func TestRunCommandErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"NoCommand":         {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run"}, "no command"},
		"NoServer":          {nil, []string{"run", "--", "true"}, "MLFLOW_TRACKING_URI"},
		"RelativeEnvName":   {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1", "MLFLOW_EXPERIMENT_NAME": "exp"}, []string{"run", "--", "true"}, "absolute path"},
		"NoJobID":           {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--node-rank", "1", "--nnodes", "2", "--", "true"}, "job id"},
		"BadNice":           {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--nice", "-5", "--", "true"}, "nice"},
		"BadRankPrefix":     {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--rank-prefix", "x", "--", "true"}, "rank-prefix"},
		"LogsNoRun":         {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs"}, "one RUN_ID"},
		"LogsBadStream":     {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs", "--stream", "stdin", "r"}, "stdout or stderr"},
		"LogsBadSince":      {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs", "--since", "yesterday", "r"}, "duration"},
		"LogsBadArtifactNm": {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs", "--artifact-name", "a/b", "r"}, "plain file name"},
	} {
		t.Run(name, func(t *testing.T) {
			m := &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string { return tc.env[k] }}
			err := m.Run(context.Background(), tc.args)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want exit 2 mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f := func(in string, want time.Time) {
		t.Helper()
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	f("10m", now.Add(-10*time.Minute))
	f("2026-12-01T10:00:00Z", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if _, err := parseSince("-5m", now); err == nil {
		t.Error("negative duration accepted")
	}
}
