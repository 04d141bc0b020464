package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/workspace"
)

// commentCaller sends a request as one kind of caller.
type commentCaller func(method, target string, body any) response

// TestCommentTargets checks, as an administrator, as a user who owns the
// experiment and as the local user of single-user mode (auth off), that a
// comment's target must exist and be well formed, and that every refusal
// names the field that was wrong. Before the fix the administrator and the
// local user (whose access checks look nothing up) could comment on
// experiment "" or on experiments that do not exist.
func TestCommentTargets(t *testing.T) {
	callers := map[string]func(t *testing.T) (commentCaller, *sqlstore.Store, string, string){
		"Admin": func(t *testing.T) (commentCaller, *sqlstore.Store, string, string) {
			a := mustAuthServer(t)
			exp, run := commentWorld(t, func(m, p string, b any) response { return a.must(owner, m, p, b) }, "/Users/"+owner+"/c")
			return func(m, p string, b any) response { return a.as(admin, m, p, b) }, a.store, exp, run
		},
		"User": func(t *testing.T) (commentCaller, *sqlstore.Store, string, string) {
			a := mustAuthServer(t)
			exp, run := commentWorld(t, func(m, p string, b any) response { return a.must(owner, m, p, b) }, "/Users/"+owner+"/c")
			return func(m, p string, b any) response { return a.as(owner, m, p, b) }, a.store, exp, run
		},
		"LocalUser": func(t *testing.T) (commentCaller, *sqlstore.Store, string, string) {
			s, store := mustServerStore(t)
			call := func(m, p string, b any) response { return do(t, s, m, p, b) }
			exp, run := commentWorld(t, func(m, p string, b any) response {
				r := call(m, p, b)
				if r.status != 200 {
					t.Fatalf("%s %s: %d %s", m, p, r.status, r.raw)
				}
				return r
			}, "/Shared/c")
			return call, store, exp, run
		},
	}
	const missingRun = "0123456789abcdef0123456789abcdef"
	for who, setup := range callers {
		t.Run(who, func(t *testing.T) {
			call, store, exp, run := setup(t)
			// stored counts the comments in the store on a target.
			stored := func(kind, id string) int {
				t.Helper()
				cs, err := store.Workspace().ListComments(context.Background(), workspace.CommentTarget{Kind: kind, ID: id})
				if err != nil {
					t.Fatal(err)
				}
				return len(cs)
			}
			refused := map[string]struct {
				kind, id string
				status   int
				field    string
			}{
				"ErrKindMissing":         {"", exp, 400, "target_kind"},
				"ErrKindUnknown":         {"model", exp, 400, "target_kind"},
				"ErrExperimentIDMissing": {"experiment", "", 400, "target_id"},
				"ErrExperimentUnknown":   {"experiment", "987654321", 404, "target_id"},
				"ErrExperimentUnknownAZ": {"experiment", "abc", 404, "target_id"},
				"ErrExperimentMalformed": {"experiment", "../x", 400, "target_id"},
				"ErrRunIDMissing":        {"run", "", 400, "target_id"},
				"ErrRunUnknown":          {"run", missingRun, 404, "target_id"},
				"ErrRunMalformed":        {"run", "../x", 400, "target_id"},
			}
			for name, tc := range refused {
				t.Run(name, func(t *testing.T) {
					body := map[string]any{"body": "x"}
					if tc.kind != "" {
						body["target_kind"] = tc.kind
					}
					if tc.id != "" {
						body["target_id"] = tc.id
					}
					wantFieldError(t, call("POST", "/api/2.0/sextant/comments", body), tc.status, tc.field)
					q := url.Values{}
					if tc.kind != "" {
						q.Set("target_kind", tc.kind)
					}
					if tc.id != "" {
						q.Set("target_id", tc.id)
					}
					wantFieldError(t, call("GET", "/api/2.0/sextant/comments?"+q.Encode(), nil), tc.status, tc.field)
					if n := stored(tc.kind, tc.id); n != 0 {
						t.Errorf("the refused request stored %d comments on %s %q", n, tc.kind, tc.id)
					}
				})
			}
			for kind, id := range map[string]string{"experiment": exp, "run": run} {
				if n := stored(kind, id); n != 0 {
					t.Fatalf("%d comments on the %s before any was added", n, kind)
				}
			}

			// The real targets take comments; nothing else was stored.
			var ids []int64
			for kind, id := range map[string]string{"experiment": exp, "run": run} {
				r := call("POST", "/api/2.0/sextant/comments", map[string]any{"target_kind": kind, "target_id": id, "body": "on the " + kind})
				if r.status != 200 {
					t.Fatalf("comment on the %s: %d %s", kind, r.status, r.raw)
				}
				ids = append(ids, int64(r.body["comment"].(map[string]any)["id"].(float64)))
				r = call("GET", "/api/2.0/sextant/comments?target_kind="+kind+"&target_id="+id, nil)
				if cs, _ := r.body["comments"].([]any); r.status != 200 || len(cs) != 1 {
					t.Fatalf("comments on the %s: %d %s, want the one", kind, r.status, r.raw)
				}
			}
			wantFieldError(t, call("POST", "/api/2.0/sextant/comments", map[string]any{"target_kind": "run", "target_id": run, "body": " "}), 400, "body")

			// PATCH and DELETE name the comment by id.
			for _, method := range []string{"PATCH", "DELETE"} {
				t.Run(method, func(t *testing.T) {
					byID := map[string]struct {
						id     any
						status int
					}{
						"ErrIDMissing":  {nil, 400},
						"ErrIDNotInt":   {"abc", 400},
						"ErrIDZero":     {0, 400},
						"ErrIDNegative": {-3, 400},
						"ErrIDUnknown":  {987654, 404},
					}
					for name, tc := range byID {
						t.Run(name, func(t *testing.T) {
							body := map[string]any{}
							if method == "PATCH" {
								body["body"] = "edited"
							}
							if tc.id != nil {
								body["id"] = tc.id
							}
							wantFieldError(t, call(method, "/api/2.0/sextant/comments", body), tc.status, "id")
						})
					}
				})
			}
			if r := call("PATCH", "/api/2.0/sextant/comments", map[string]any{"id": ids[0], "body": "edited"}); r.status != 200 {
				t.Fatalf("edit own comment: %d %s", r.status, r.raw)
			}
			if r := call("DELETE", "/api/2.0/sextant/comments", map[string]any{"id": ids[1]}); r.status != 200 {
				t.Fatalf("delete own comment: %d %s", r.status, r.raw)
			}
		})
	}
}

// commentWorld creates an experiment under folder and a run in it, and
// returns their ids.
func commentWorld(t *testing.T, must commentCaller, folder string) (exp, run string) {
	t.Helper()
	if strings.HasPrefix(folder, "/Users/") {
		must("POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": folder})
	}
	exp = must("POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": fmt.Sprintf("%s/exp", folder)}).body["experiment_id"].(string)
	run = must("POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": exp}).body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
	return exp, run
}

// wantFieldError checks a JSON error's status and that its message names
// field in quotes.
func wantFieldError(t *testing.T, r response, status int, field string) {
	t.Helper()
	msg, _ := r.body["message"].(string)
	if r.status != status || !strings.Contains(msg, "'"+field+"'") {
		t.Errorf("got %d %s, want %d naming '%s'", r.status, r.raw, status, field)
	}
}

// TestCommentAuthorIsTheSameInEveryAnswer checks that a comment's author
// reads the same in the answers to POST, GET and PATCH, for a signed-in user
// and for the local user of single-user mode. Before the fix the local
// user's comments said "local" when made and "" when listed or edited: the
// local user has no row in the users table. The docs test found it running
// docs/api.md's Comments example.
func TestCommentAuthorIsTheSameInEveryAnswer(t *testing.T) {
	callers := map[string]func(t *testing.T) (call commentCaller, folder, author string){
		"User": func(t *testing.T) (commentCaller, string, string) {
			a := mustAuthServer(t)
			return func(m, p string, b any) response { return a.must(owner, m, p, b) }, "/Users/" + owner + "/c", owner
		},
		"LocalUser": func(t *testing.T) (commentCaller, string, string) {
			s := MustServer(t)
			return func(m, p string, b any) response { return do(t, s, m, p, b) }, "/Shared/c", "local"
		},
	}
	for who, setup := range callers {
		t.Run(who, func(t *testing.T) {
			call, folder, want := setup(t)
			exp, _ := commentWorld(t, call, folder)
			author := func(r response, what string) string {
				t.Helper()
				if r.status != 200 {
					t.Fatalf("%s: %d %s", what, r.status, r.raw)
				}
				c, _ := r.body["comment"].(map[string]any)
				if cs, _ := r.body["comments"].([]any); len(cs) == 1 {
					c, _ = cs[0].(map[string]any)
				}
				a, _ := c["author"].(string)
				return a
			}
			r := call("POST", "/api/2.0/sextant/comments", map[string]any{"target_kind": "experiment", "target_id": exp, "body": "first"})
			id := r.body["comment"].(map[string]any)["id"]
			got := map[string]string{
				"POST":  author(r, "POST"),
				"GET":   author(call("GET", "/api/2.0/sextant/comments?target_kind=experiment&target_id="+exp, nil), "GET"),
				"PATCH": author(call("PATCH", "/api/2.0/sextant/comments", map[string]any{"id": id, "body": "edited"}), "PATCH"),
			}
			for method, a := range got {
				if a != want {
					t.Errorf("%s answers author %q, want %q", method, a, want)
				}
			}
		})
	}
}
