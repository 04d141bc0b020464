package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The first hour of a new user, through the CLI in-process: the first
// administrator on a new machine, `sextant run` on a multi-user server,
// the single-user naming rule, and finding runs from the terminal.

// sextantCLI runs one command with env and stdin; it returns stdout,
// stderr and the error.
func sextantCLI(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := m.Run(ctx, args)
	return out.String(), errb.String(), err
}

func mustCLI(t *testing.T, env map[string]string, stdin string, args ...string) (string, string) {
	t.Helper()
	out, errb, err := sextantCLI(t, env, stdin, args...)
	if err != nil {
		t.Fatalf("sextant %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errb)
	}
	return out, errb
}

// experimentByName answers GET experiments/get-by-name with creds.
func experimentByName(t *testing.T, base, name string, creds func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/2.0/mlflow/experiments/get-by-name?experiment_name="+url.QueryEscape(name), nil)
	if creds != nil {
		creds(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Experiment struct {
			ID string `json:"experiment_id"`
		} `json:"experiment"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Experiment.ID
}

// TestUsersAddCreatesTheDataDirectory: `users add --admin --data-dir DIR`
// on a directory that does not exist creates and initialises it, says
// which path it used, and a server started on it requires the new
// administrator's credentials.
func TestUsersAddCreatesTheDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "sextant-data")
	out, errb := mustCLI(t, nil, "a long password\n", "users", "add", "root@example.com", "--admin", "--data-dir", dir)
	if !strings.Contains(errb, "created the data directory "+dir) || !strings.Contains(out, "in the database "+filepath.Join(dir, "sextant.db")) {
		t.Fatalf("users add does not say which directory it used:\nstdout: %s\nstderr: %s", out, errb)
	}
	// Again: the directory exists now, and the email is taken.
	if _, errb, err := sextantCLI(t, nil, "a long password\n", "users", "add", "root@example.com", "--data-dir", dir); err == nil || strings.Contains(errb, "created the data directory") {
		t.Fatalf("second add: %v, %s", err, errb)
	}
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", dir)
	defer stop()
	base := "http://" + addr
	if code, _ := experimentByName(t, base, "Default", nil); code != http.StatusUnauthorized {
		t.Fatalf("without credentials: HTTP %d, want 401: the user in the database must turn authentication on", code)
	}
	if code, id := experimentByName(t, base, "Default", func(r *http.Request) { r.SetBasicAuth("root@example.com", "a long password") }); code != 200 || id != "0" {
		t.Fatalf("as the administrator: HTTP %d, experiment %q", code, id)
	}
}

// TestRunOnAMultiUserServer: `sextant run` asks the server who is signed
// in (with a token, and with a user name and password) and defaults the
// experiment to /Users/<email>/<entry point>; a relative name is refused
// before anything starts, with one message.
func TestRunOnAMultiUserServer(t *testing.T) {
	dir := t.TempDir()
	mustCLI(t, nil, "a long password\n", "users", "add", "root@example.com", "--admin", "--data-dir", dir)
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", dir)
	defer stop()
	base := "http://" + addr
	admin := map[string]string{"MLFLOW_TRACKING_URI": base, "MLFLOW_TRACKING_USERNAME": "root@example.com", "MLFLOW_TRACKING_PASSWORD": "a long password"}
	mustCLI(t, admin, "alices password\n", "users", "add", "alice@example.com")
	alice := map[string]string{"MLFLOW_TRACKING_URI": base, "MLFLOW_TRACKING_USERNAME": "alice@example.com", "MLFLOW_TRACKING_PASSWORD": "alices password"}
	token, _ := mustCLI(t, alice, "", "tokens", "create", "laptop")
	withToken := map[string]string{"MLFLOW_TRACKING_URI": base, "MLFLOW_TRACKING_TOKEN": strings.TrimSpace(token), "USER": "root"}

	for name, env := range map[string]map[string]string{"Token": withToken, "Basic": alice} {
		t.Run(name, func(t *testing.T) {
			entry := "job" + strings.ToLower(name)
			script := filepath.Join(t.TempDir(), entry+".sh")
			os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755)
			_, errb := mustCLI(t, env, "", "run", "--", "/bin/sh", script)
			want := "/Users/alice@example.com/" + entry
			if !strings.Contains(errb, " in experiment "+want+"\n") {
				t.Fatalf("the run is not in %s:\n%s", want, errb)
			}
			if code, id := experimentByName(t, base, want, func(r *http.Request) { r.SetBasicAuth("alice@example.com", "alices password") }); code != 200 || id == "" {
				t.Fatalf("experiment %s: HTTP %d", want, code)
			}
		})
	}

	_, errb, err := sextantCLI(t, withToken, "", "run", "--experiment", "my-exp", "--", "/bin/true")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), `"my-exp" is not an absolute workspace path`) || !strings.Contains(err.Error(), "/Users/alice@example.com/my-exp") {
		t.Fatalf("relative name on a multi-user server: %v", err)
	}
	if strings.Contains(errb, "my-exp") {
		t.Fatalf("the error is printed twice (also on stderr): %s", errb)
	}
	// Bad credentials: said once, before anything starts.
	bad := map[string]string{"MLFLOW_TRACKING_URI": base, "MLFLOW_TRACKING_TOKEN": "sxt_nope"}
	if _, _, err := sextantCLI(t, bad, "", "run", "--", "/bin/true"); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("bad token: %v", err)
	}
}

// TestSingleUserNamingRule: in single-user mode the launcher takes the
// names the server takes, a relative one included, and the job's own
// mlflow.set_experiment with the same name lands in the same experiment.
func TestSingleUserNamingRule(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	base := "http://" + addr
	env := map[string]string{"MLFLOW_TRACKING_URI": base}
	_, errb := mustCLI(t, env, "", "run", "--experiment", "my-exp", "--", "/bin/true")
	if !strings.Contains(errb, " in experiment my-exp\n") {
		t.Fatalf("--experiment my-exp: %s", errb)
	}
	env["MLFLOW_EXPERIMENT_NAME"] = "other exp"
	if _, errb := mustCLI(t, env, "", "run", "--", "/bin/true"); !strings.Contains(errb, " in experiment other exp\n") {
		t.Fatalf("MLFLOW_EXPERIMENT_NAME=other exp: %s", errb)
	}
	for _, name := range []string{"my-exp", "other exp"} {
		if code, id := experimentByName(t, base, name, nil); code != 200 || id == "" {
			t.Fatalf("experiment %q: HTTP %d", name, code)
		}
	}
}

// TestFindRunsFromTheTerminal: runs ls, logs --last and logs RUN_NAME.
func TestFindRunsFromTheTerminal(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	env := map[string]string{"MLFLOW_TRACKING_URI": "http://" + addr}
	mustCLI(t, env, "", "run", "--experiment", "/Shared/a", "--run-name", "first", "--", "/bin/sh", "-c", "echo one")
	_, _, err := sextantCLI(t, env, "", "run", "--experiment", "/Shared/b", "--run-name", "second", "--", "/bin/sh", "-c", "echo two; exit 3")
	if exitCode(err) != 3 {
		t.Fatalf("second run: %v", err)
	}
	out, _ := mustCLI(t, env, "", "runs", "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^NAME\s+RUN ID\s+STATUS\s+STARTED\s+DURATION\s+METRICS\s+EXPERIMENT(\s+GPU-HOURS)?$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^second\s+[0-9a-f]{32}\s+FAILED\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\S+\s+\S+\s+/Shared/b(\s+([0-9.]+|-))?$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^first\s+[0-9a-f]{32}\s+FINISHED\s+.*/Shared/a(\s+([0-9.]+|-))?$`).MatchString(lines[2]) {
		t.Fatalf("runs ls, newest first:\n%s", out)
	}
	if out, _ := mustCLI(t, env, "", "runs", "ls", "--status", "finished"); !strings.Contains(out, "first") || strings.Contains(out, "second") {
		t.Fatalf("runs ls --status finished:\n%s", out)
	}
	if out, _ := mustCLI(t, env, "", "runs", "ls", "--experiment", "/Shared/b", "--limit", "1"); !strings.Contains(out, "second") || strings.Contains(out, "first") || strings.Contains(out, "EXPERIMENT") {
		t.Fatalf("runs ls --experiment /Shared/b:\n%s", out)
	}
	if _, _, err := sextantCLI(t, env, "", "runs", "ls", "--experiment", "/Shared/none"); err == nil || !strings.Contains(err.Error(), `no experiment named "/Shared/none"`) {
		t.Fatalf("unknown experiment: %v", err)
	}

	if out, errb := mustCLI(t, env, "", "logs", "--last"); out != "two\n" || !strings.Contains(errb, "(second), FAILED") {
		t.Fatalf("logs --last: %q, %q", out, errb)
	}
	if out, _ := mustCLI(t, env, "", "logs", "--last", "--experiment", "/Shared/a"); out != "one\n" {
		t.Fatalf("logs --last --experiment /Shared/a: %q", out)
	}
	if out, _ := mustCLI(t, env, "", "logs", "first"); out != "one\n" {
		t.Fatalf("logs first: %q", out)
	}
	// Two runs of one name: the newest, and a note that says so.
	mustCLI(t, env, "", "run", "--experiment", "/Shared/a", "--run-name", "first", "--", "/bin/sh", "-c", "echo again")
	if out, errb := mustCLI(t, env, "", "logs", "first"); out != "again\n" || !strings.Contains(errb, "2 runs are named first") {
		t.Fatalf("logs first (two of them): %q, %q", out, errb)
	}
	if _, _, err := sextantCLI(t, env, "", "logs", "nosuchrun"); err == nil || !strings.Contains(err.Error(), `no run has the id or name "nosuchrun"`) {
		t.Fatalf("logs nosuchrun: %v", err)
	}
}

// TestCommandsSayWhatTheyChanged: perms, groups, mkdirs and users passwd
// print what they did.
func TestCommandsSayWhatTheyChanged(t *testing.T) {
	dir := t.TempDir()
	mustCLI(t, nil, "a long password\n", "users", "add", "root@example.com", "--admin", "--data-dir", dir)
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", dir)
	defer stop()
	env := map[string]string{"MLFLOW_TRACKING_URI": "http://" + addr, "MLFLOW_TRACKING_USERNAME": "root@example.com", "MLFLOW_TRACKING_PASSWORD": "a long password"}
	mustCLI(t, env, "bobs password\n", "users", "add", "bob@example.com")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mkdirs", "/Shared/vision/sub"}, "created folder /Shared/vision/sub\n"},
		{[]string{"mkdirs", "/Shared/vision"}, "folder /Shared/vision already exists\n"},
		{[]string{"groups", "create", "vision"}, "created group vision"},
		{[]string{"groups", "add", "vision", "bob@example.com"}, "added bob@example.com to group vision\n"},
		{[]string{"perms", "set", "folder:/Shared/vision", "group:vision", "CAN_EDIT"}, "granted CAN_EDIT on folder:/Shared/vision to group:vision\n"},
		{[]string{"perms", "revoke", "folder:/Shared/vision", "group:vision"}, "revoked the grant of group:vision on folder:/Shared/vision"},
		{[]string{"groups", "remove", "vision", "bob@example.com"}, "removed bob@example.com from group vision\n"},
	} {
		if out, _ := mustCLI(t, env, "", tc.args...); !strings.HasPrefix(out, tc.want) {
			t.Errorf("sextant %s: %q, want %q", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	if out, _ := mustCLI(t, env, "a new long password\n", "users", "passwd", "root@example.com"); out != "changed the password of root@example.com\n" {
		t.Errorf("users passwd: %q", out)
	}
	env["MLFLOW_TRACKING_PASSWORD"] = "a new long password"
	if out, _ := mustCLI(t, env, "", "perms", "get", "folder:/Shared/vision"); !strings.HasPrefix(out, "PRINCIPAL") {
		t.Errorf("perms get with the new password: %q", out)
	}
}

// TestImportAndMigrateSayWhichPathTheyUse: `sextant import` and `sextant
// migrate` say which database file, in which data directory, they use,
// and that they created the directory when it did not exist.
func TestImportAndMigrateSayWhichPathTheyUse(t *testing.T) {
	// An MLflow database with no experiments: the tables the importer
	// checks for, and the columns of the ones it reads.
	src := filepath.Join(t.TempDir(), "mlflow.db")
	db, err := sql.Open("sqlite3", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY, name TEXT, artifact_location TEXT, lifecycle_stage TEXT, creation_time INTEGER, last_update_time INTEGER)`,
		`CREATE TABLE experiment_tags (experiment_id INTEGER, key TEXT, value TEXT)`,
		`CREATE TABLE runs (run_uuid TEXT, experiment_id INTEGER)`,
		`CREATE TABLE params (run_uuid TEXT, key TEXT, value TEXT)`,
		`CREATE TABLE tags (run_uuid TEXT, key TEXT, value TEXT)`,
		`CREATE TABLE metrics (run_uuid TEXT, key TEXT, value REAL, timestamp INTEGER, step INTEGER, is_nan INTEGER)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	for name, args := range map[string][]string{
		"Import":  {"import", "--from", "sqlite:///" + src, "--no-artifacts"},
		"Migrate": {"migrate"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new", "sextant-data")
			file := filepath.Join(dir, "sextant.db")
			says := map[string]string{
				"Import":  "importing into " + file,
				"Migrate": "schema of " + file + " is up to date:",
			}[name]
			for _, created := range []bool{true, false} {
				out, errb := mustCLI(t, nil, "", append(args, "--data-dir", dir)...)
				if !strings.Contains(out+errb, says) {
					t.Errorf("sextant %s does not say which database it used (want %q):\nstdout: %s\nstderr: %s", args[0], says, out, errb)
				}
				// The log line: msg="created the data directory" path=DIR.
				if got := regexp.MustCompile(`created the data directory"? (path=)?` + regexp.QuoteMeta(dir) + `\n`).MatchString(errb); got != created {
					t.Errorf("sextant %s says it created the data directory %s: %v, want %v:\nstderr: %s", args[0], dir, got, created, errb)
				}
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("sextant %s did not create %s: %v", args[0], file, err)
			}
		})
	}
}

// TestEndARunLeftRunning: runs end ends a RUNNING run found by name or id
// with KILLED or the status asked for, leaves an ended run as it is, and
// refuses a bad status.
func TestEndARunLeftRunning(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	base := "http://" + addr
	env := map[string]string{"MLFLOW_TRACKING_URI": base}
	create := func(name string) string {
		t.Helper()
		return createRunAPI(t, base, fmt.Sprintf(`{"experiment_id": "0", "run_name": %q, "start_time": 1000}`, name))
	}
	info := func(id string) (status string, end int64) {
		t.Helper()
		var got struct {
			Run struct {
				Info struct {
					Status  string `json:"status"`
					EndTime int64  `json:"end_time"`
				} `json:"info"`
			} `json:"run"`
		}
		getJSON(t, base+"/api/2.0/mlflow/runs/get?run_id="+id, &got)
		return got.Run.Info.Status, got.Run.Info.EndTime
	}
	zombie, other := create("zombie"), create("other")
	before := time.Now().UnixMilli()
	if out, _ := mustCLI(t, env, "", "runs", "end", "zombie"); out != "ended run zombie ("+zombie+"): KILLED\n" {
		t.Fatalf("runs end zombie: %q", out)
	}
	if st, end := info(zombie); st != "KILLED" || end < before {
		t.Fatalf("after runs end: %s, end time %d (before %d)", st, end, before)
	}
	if st, _ := info(other); st != "RUNNING" {
		t.Fatalf("another run was ended: %s", st)
	}
	if out, _ := mustCLI(t, env, "", "runs", "end", "zombie", "--status", "finished"); !strings.Contains(out, "ended already: KILLED") {
		t.Fatalf("runs end on an ended run: %q", out)
	}
	if st, _ := info(zombie); st != "KILLED" {
		t.Fatalf("an ended run changed: %s", st)
	}
	if _, _, err := sextantCLI(t, env, "", "runs", "end", other, "--status", "running"); err == nil || !strings.Contains(err.Error(), "--status must be one of KILLED, FAILED, FINISHED") {
		t.Fatalf("--status running: %v", err)
	}
	if _, _, err := sextantCLI(t, env, "", "runs", "end", "nosuch"); err == nil || !strings.Contains(err.Error(), `no run has the id or name "nosuch"`) {
		t.Fatalf("an unknown run: %v", err)
	}
	if out, _ := mustCLI(t, env, "", "runs", "end", other, "--status", "failed"); !strings.HasSuffix(out, "): FAILED\n") {
		t.Fatalf("runs end ID --status failed: %q", out)
	}
	if st, _ := info(other); st != "FAILED" {
		t.Fatalf("after runs end --status failed: %s", st)
	}
}
