// Package workspacetest holds the conformance suite that every
// workspace.Store implementation must pass. Backends call RunStoreTests
// from their own tests with a function that opens a fresh, empty store.
package workspacetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// Harness is a fresh store and a way to create and purge experiments and
// runs in it (the workspace reads experiment names and run ids, which the
// tracking store keeps).
type Harness struct {
	Store workspace.Store
	// CreateExperiment creates an experiment named name and returns its id.
	CreateExperiment func(ctx context.Context, name string) (string, error)
	// CreateRun creates a run in an experiment and returns its id.
	CreateRun func(ctx context.Context, experimentID string) (string, error)
	// PurgeRun deletes a run for good, as a garbage collector of deleted
	// runs does; PurgeExperiment deletes an experiment and its runs.
	PurgeRun        func(ctx context.Context, runID string) error
	PurgeExperiment func(ctx context.Context, id string) error
}

// Opener opens a fresh, empty store, closed by the opener's t.Cleanup.
type Opener func(t *testing.T) Harness

// RunStoreTests runs the suite against stores from open.
func RunStoreTests(t *testing.T, open Opener) {
	t.Run("Users", func(t *testing.T) { testUsers(t, open(t)) })
	t.Run("Tokens", func(t *testing.T) { testTokens(t, open(t)) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open(t)) })
	t.Run("Groups", func(t *testing.T) { testGroups(t, open(t)) })
	t.Run("FoldersAndGrants", func(t *testing.T) { testFoldersAndGrants(t, open(t)) })
	t.Run("Experiments", func(t *testing.T) { testExperiments(t, open(t)) })
	t.Run("Comments", func(t *testing.T) { testComments(t, open(t)) })
	t.Run("CommentTargets", func(t *testing.T) { testCommentTargets(t, open(t)) })
	t.Run("CommentsGoWithTheirTarget", func(t *testing.T) { testCommentsGoWithTheirTarget(t, open(t)) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, open(t)) })
	t.Run("ConcurrentUsers", func(t *testing.T) { testConcurrentUsers(t, open(t)) })
}

func wantCode(t *testing.T, err error, code errs.Code) {
	t.Helper()
	if got := errs.CodeOf(err); got != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustUser(t *testing.T, s workspace.Store, email string, admin bool) *workspace.User {
	t.Helper()
	u := &workspace.User{Email: email, DisplayName: "D " + email, Admin: admin, CreatedMs: 1000}
	must(t, s.CreateUser(context.Background(), u, "hash-"+email))
	if u.ID == 0 {
		t.Fatalf("CreateUser left the id unset")
	}
	return u
}

func testUsers(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("empty store has %d users, %v", n, err)
	}
	a := mustUser(t, s, "a@example.com", true)
	b := mustUser(t, s, "b@example.com", false)
	if a.ID == b.ID {
		t.Fatal("two users with one id")
	}
	wantCode(t, s.CreateUser(ctx, &workspace.User{Email: "a@example.com"}, "x"), errs.AlreadyExists)

	got, err := s.GetUser(ctx, a.ID)
	must(t, err)
	if got.Email != a.Email || !got.Admin || got.Disabled || got.DisplayName != a.DisplayName || got.CreatedMs != 1000 {
		t.Fatalf("GetUser: %+v", got)
	}
	got, hash, err := s.GetUserByEmail(ctx, "b@example.com")
	must(t, err)
	if got.ID != b.ID || hash != "hash-b@example.com" || got.Admin {
		t.Fatalf("GetUserByEmail: %+v %q", got, hash)
	}
	_, err = s.GetUser(ctx, 987654)
	wantCode(t, err, errs.NotFound)
	_, _, err = s.GetUserByEmail(ctx, "nobody@example.com")
	wantCode(t, err, errs.NotFound)

	yes, newHash := true, "hash-2"
	must(t, s.UpdateUser(ctx, b.ID, workspace.UserUpdate{Disabled: &yes, PasswordHash: &newHash}))
	got, hash, err = s.GetUserByEmail(ctx, "b@example.com")
	must(t, err)
	if !got.Disabled || hash != "hash-2" || got.Admin {
		t.Fatalf("after update: %+v %q", got, hash)
	}
	wantCode(t, s.UpdateUser(ctx, 987654, workspace.UserUpdate{Disabled: &yes}), errs.NotFound)

	all, err := s.ListUsers(ctx)
	must(t, err)
	if len(all) != 2 {
		t.Fatalf("ListUsers: %d users", len(all))
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 2 {
		t.Fatalf("CountUsers: %d %v", n, err)
	}
}

func testTokens(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	u := mustUser(t, s, "t@example.com", false)
	tok := &workspace.Token{UserID: u.ID, Name: "ci", CreatedMs: 5, ExpiresMs: 0}
	must(t, s.CreateToken(ctx, tok, []byte("hash-1")))
	if tok.ID == 0 {
		t.Fatal("token id unset")
	}
	tok2 := &workspace.Token{UserID: u.ID, Name: "laptop", CreatedMs: 6, ExpiresMs: 99}
	must(t, s.CreateToken(ctx, tok2, []byte("hash-2")))

	got, err := s.LookupToken(ctx, []byte("hash-1"))
	must(t, err)
	if got.ID != tok.ID || got.UserID != u.ID || got.Name != "ci" || got.RevokedMs != 0 {
		t.Fatalf("LookupToken: %+v", got)
	}
	_, err = s.LookupToken(ctx, []byte("nope"))
	wantCode(t, err, errs.NotFound)

	must(t, s.TouchToken(ctx, tok.ID, 77))
	list, err := s.ListTokens(ctx, u.ID)
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("ListTokens: %+v", list)
	}
	for _, l := range list {
		if l.ID == tok.ID && l.LastUsedMs != 77 {
			t.Fatalf("TouchToken not kept: %+v", l)
		}
	}
	must(t, s.RevokeToken(ctx, u.ID, tok.ID, 88))
	got, err = s.LookupToken(ctx, []byte("hash-1"))
	if err == nil && got.RevokedMs != 88 {
		t.Fatalf("revoked token looks live: %+v", got)
	}
	// Another user cannot revoke it.
	other := mustUser(t, s, "o@example.com", false)
	wantCode(t, s.RevokeToken(ctx, other.ID, tok2.ID, 1), errs.NotFound)
}

func testSessions(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	u := mustUser(t, s, "s@example.com", false)
	must(t, s.CreateSession(ctx, &workspace.Session{UserID: u.ID, CreatedMs: 1, ExpiresMs: 2, CSRF: "c1"}, []byte("s1")))
	must(t, s.CreateSession(ctx, &workspace.Session{UserID: u.ID, CreatedMs: 1, ExpiresMs: 2, CSRF: "c2"}, []byte("s2")))
	got, err := s.LookupSession(ctx, []byte("s1"))
	must(t, err)
	if got.UserID != u.ID || got.CSRF != "c1" || got.ExpiresMs != 2 {
		t.Fatalf("LookupSession: %+v", got)
	}
	must(t, s.DeleteSession(ctx, []byte("s1")))
	_, err = s.LookupSession(ctx, []byte("s1"))
	wantCode(t, err, errs.NotFound)
	must(t, s.DeleteUserSessions(ctx, u.ID))
	_, err = s.LookupSession(ctx, []byte("s2"))
	wantCode(t, err, errs.NotFound)
}

func testGroups(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	a := mustUser(t, s, "ga@example.com", false)
	b := mustUser(t, s, "gb@example.com", false)
	g, err := s.CreateGroup(ctx, "vision")
	must(t, err)
	_, err = s.CreateGroup(ctx, "vision")
	wantCode(t, err, errs.AlreadyExists)
	if id, err := s.GetGroupByName(ctx, "vision"); err != nil || id != g {
		t.Fatalf("GetGroupByName: %d %v", id, err)
	}
	_, err = s.GetGroupByName(ctx, "nope")
	wantCode(t, err, errs.NotFound)
	must(t, s.AddGroupMember(ctx, g, a.ID))
	must(t, s.AddGroupMember(ctx, g, a.ID)) // twice is once
	must(t, s.AddGroupMember(ctx, g, b.ID))
	groups, err := s.ListGroups(ctx)
	must(t, err)
	if len(groups) != 1 || groups[0].Name != "vision" || len(groups[0].Members) != 2 {
		t.Fatalf("ListGroups: %+v", groups)
	}
	if of, err := s.GroupsOf(ctx, a.ID); err != nil || !slices.Equal(of, []int64{g}) {
		t.Fatalf("GroupsOf: %v %v", of, err)
	}
	must(t, s.RemoveGroupMember(ctx, g, a.ID))
	if of, err := s.GroupsOf(ctx, a.ID); err != nil || len(of) != 0 {
		t.Fatalf("GroupsOf after removal: %v %v", of, err)
	}
}

func testFoldersAndGrants(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	u := mustUser(t, s, "f@example.com", false)
	for _, p := range []string{"/Shared/team", "/Shared/team/a", "/Shared/team/b", "/Shared/other"} {
		f := &workspace.Folder{Path: p, OwnerID: u.ID, CreatedMs: 3}
		must(t, s.CreateFolder(ctx, f))
		if f.ID == 0 {
			t.Fatal("folder id unset")
		}
	}
	wantCode(t, s.CreateFolder(ctx, &workspace.Folder{Path: "/Shared/team", OwnerID: u.ID}), errs.AlreadyExists)
	f, err := s.GetFolder(ctx, "/Shared/team/a")
	must(t, err)
	if f.OwnerID != u.ID || f.Path != "/Shared/team/a" {
		t.Fatalf("GetFolder: %+v", f)
	}
	_, err = s.GetFolder(ctx, "/Shared/none")
	wantCode(t, err, errs.NotFound)
	kids, err := s.ListFolders(ctx, "/Shared/team")
	must(t, err)
	var paths []string
	for _, k := range kids {
		paths = append(paths, k.Path)
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"/Shared/team/a", "/Shared/team/b"}) {
		t.Fatalf("ListFolders: %v", paths)
	}

	g, err := s.CreateGroup(ctx, "readers")
	must(t, err)
	folder := workspace.Resource{Kind: workspace.ResourceFolder, Key: "/Shared/team"}
	exp := workspace.Resource{Kind: workspace.ResourceExperiment, Key: "7"}
	userP := workspace.Principal{Kind: workspace.PrincipalUser, ID: u.ID}
	groupP := workspace.Principal{Kind: workspace.PrincipalGroup, ID: g}
	must(t, s.SetGrant(ctx, workspace.Grant{Resource: folder, Principal: userP, Level: workspace.CanEdit}))
	must(t, s.SetGrant(ctx, workspace.Grant{Resource: folder, Principal: groupP, Level: workspace.CanRead}))
	must(t, s.SetGrant(ctx, workspace.Grant{Resource: folder, Principal: userP, Level: workspace.CanManage})) // upgrade
	must(t, s.SetGrant(ctx, workspace.Grant{Resource: exp, Principal: groupP, Level: workspace.CanEdit}))
	got, err := s.Grants(ctx, []workspace.Resource{folder, exp, {Kind: workspace.ResourceFolder, Key: "/Shared/other"}})
	must(t, err)
	if len(got[folder]) != 2 || len(got[exp]) != 1 || len(got[workspace.Resource{Kind: workspace.ResourceFolder, Key: "/Shared/other"}]) != 0 {
		t.Fatalf("Grants: %+v", got)
	}
	for _, gr := range got[folder] {
		switch gr.Principal {
		case userP:
			if gr.Level != workspace.CanManage || gr.PrincipalName != u.Email {
				t.Fatalf("user grant: %+v", gr)
			}
		case groupP:
			if gr.Level != workspace.CanRead || gr.PrincipalName != "group:readers" {
				t.Fatalf("group grant: %+v", gr)
			}
		default:
			t.Fatalf("unexpected grant %+v", gr)
		}
	}
	to, err := s.GrantsTo(ctx, []workspace.Principal{groupP})
	must(t, err)
	if len(to) != 2 {
		t.Fatalf("GrantsTo: %+v", to)
	}
	// NoAccess removes the grant.
	must(t, s.SetGrant(ctx, workspace.Grant{Resource: folder, Principal: groupP, Level: workspace.NoAccess}))
	got, err = s.Grants(ctx, []workspace.Resource{folder})
	must(t, err)
	if len(got[folder]) != 1 {
		t.Fatalf("after removal: %+v", got[folder])
	}
}

func testExperiments(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	id, err := h.CreateExperiment(ctx, "/Users/e@example.com/mnist")
	must(t, err)
	name, err := s.ExperimentPath(ctx, id)
	must(t, err)
	if name != "/Users/e@example.com/mnist" {
		t.Fatalf("ExperimentPath: %q", name)
	}
	_, err = s.ExperimentPath(ctx, "987654")
	wantCode(t, err, errs.NotFound)
	run, err := h.CreateRun(ctx, id)
	must(t, err)
	if got, err := s.RunExperiment(ctx, run); err != nil || got != id {
		t.Fatalf("RunExperiment: %q, %v; want %q", got, err, id)
	}
	_, err = s.RunExperiment(ctx, "0123456789abcdef0123456789abcdef")
	wantCode(t, err, errs.NotFound)
	names, err := s.ExperimentNames(ctx)
	must(t, err)
	if names[id] != "/Users/e@example.com/mnist" {
		t.Fatalf("ExperimentNames: %v", names)
	}
}

func testComments(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	u := mustUser(t, s, "c@example.com", false)
	target := workspace.CommentTarget{Kind: "run", ID: "0123456789abcdef0123456789abcdef"}
	c1 := &workspace.Comment{Target: target, AuthorID: u.ID, Body: "**first**", CreatedMs: 1, UpdatedMs: 1}
	c2 := &workspace.Comment{Target: target, AuthorID: u.ID, Body: "second", CreatedMs: 2, UpdatedMs: 2}
	must(t, s.AddComment(ctx, c1))
	must(t, s.AddComment(ctx, c2))
	must(t, s.AddComment(ctx, &workspace.Comment{Target: workspace.CommentTarget{Kind: "experiment", ID: "1"}, AuthorID: u.ID, Body: "x", CreatedMs: 3, UpdatedMs: 3}))
	list, err := s.ListComments(ctx, target)
	must(t, err)
	if len(list) != 2 || list[0].ID != c1.ID || list[1].ID != c2.ID || list[0].AuthorEmail != u.Email {
		t.Fatalf("ListComments (oldest first): %+v", list)
	}
	must(t, s.UpdateComment(ctx, c1.ID, "edited", 9))
	got, err := s.GetComment(ctx, c1.ID)
	must(t, err)
	if got.Body != "edited" || got.UpdatedMs != 9 || got.CreatedMs != 1 {
		t.Fatalf("after edit: %+v", got)
	}
	must(t, s.DeleteComment(ctx, c1.ID))
	_, err = s.GetComment(ctx, c1.ID)
	wantCode(t, err, errs.NotFound)
	wantCode(t, s.UpdateComment(ctx, c1.ID, "x", 1), errs.NotFound)
}

// testCommentTargets: the workspace service takes a comment only on a run
// or experiment that exists, whoever adds it (an administrator's and the
// local user's access checks look nothing up), and stores nothing for a
// target it refuses.
func testCommentTargets(t *testing.T, h Harness) {
	ctx := context.Background()
	svc := workspace.NewService(h.Store, workspace.Options{BcryptCost: 4})
	must(t, svc.Init(ctx))
	exp, err := h.CreateExperiment(ctx, "/Shared/commented")
	must(t, err)
	run, err := h.CreateRun(ctx, exp)
	must(t, err)
	admin, err := svc.CreateUser(ctx, nil, "admin@example.com", "correct horse battery", true)
	must(t, err)
	user, err := svc.CreateUser(ctx, nil, "user@example.com", "correct horse battery", false)
	must(t, err)
	subjects := map[string]*workspace.Subject{
		"Admin":     {User: admin},
		"User":      {User: user},
		"LocalUser": workspace.LocalAdmin(),
	}
	refused := map[string]struct {
		target workspace.CommentTarget
		code   errs.Code
		field  string
	}{
		"ErrKindMissing":         {workspace.CommentTarget{ID: exp}, errs.Invalid, "target_kind"},
		"ErrKindUnknown":         {workspace.CommentTarget{Kind: "model", ID: exp}, errs.Invalid, "target_kind"},
		"ErrExperimentIDMissing": {workspace.CommentTarget{Kind: "experiment"}, errs.Invalid, "target_id"},
		"ErrExperimentUnknown":   {workspace.CommentTarget{Kind: "experiment", ID: "987654321"}, errs.NotFound, "target_id"},
		"ErrExperimentUnknownAZ": {workspace.CommentTarget{Kind: "experiment", ID: "abc"}, errs.NotFound, "target_id"},
		"ErrExperimentMalformed": {workspace.CommentTarget{Kind: "experiment", ID: "../x"}, errs.Invalid, "target_id"},
		"ErrRunIDMissing":        {workspace.CommentTarget{Kind: "run"}, errs.Invalid, "target_id"},
		"ErrRunUnknown":          {workspace.CommentTarget{Kind: "run", ID: "0123456789abcdef0123456789abcdef"}, errs.NotFound, "target_id"},
		"ErrRunIsAnExperiment":   {workspace.CommentTarget{Kind: "run", ID: exp}, errs.NotFound, "target_id"},
		"ErrRunMalformed":        {workspace.CommentTarget{Kind: "run", ID: "../x"}, errs.Invalid, "target_id"},
	}
	for who, sub := range subjects {
		t.Run(who, func(t *testing.T) {
			for name, tc := range refused {
				_, err := svc.AddComment(ctx, sub, tc.target, "x")
				if errs.CodeOf(err) != tc.code || !strings.Contains(err.Error(), "'"+tc.field+"'") {
					t.Errorf("%s: AddComment(%+v): %v, want %s naming '%s'", name, tc.target, err, tc.code, tc.field)
				}
				list, err := h.Store.ListComments(ctx, tc.target)
				must(t, err)
				if len(list) != 0 {
					t.Errorf("%s: a refused comment was stored: %+v", name, list[0])
				}
			}
			for target, wantExp := range map[workspace.CommentTarget]string{{Kind: "experiment", ID: exp}: exp, {Kind: "run", ID: run}: exp} {
				if got, err := svc.CommentTargetExperiment(ctx, target); err != nil || got != wantExp {
					t.Errorf("CommentTargetExperiment(%+v): %q, %v; want %q", target, got, err, wantExp)
				}
				c, err := svc.AddComment(ctx, sub, target, "on the "+target.Kind)
				if err != nil {
					t.Fatalf("comment on the %s: %v", target.Kind, err)
				}
				if c.ID == 0 || c.Target != target {
					t.Errorf("comment on the %s: %+v", target.Kind, c)
				}
			}
		})
	}
	for _, target := range []workspace.CommentTarget{{Kind: "experiment", ID: exp}, {Kind: "run", ID: run}} {
		list, err := svc.Comments(ctx, target)
		must(t, err)
		if len(list) != len(subjects) {
			t.Errorf("%d comments on the %s, want one from each subject", len(list), target.Kind)
		}
	}
}

// testCommentsGoWithTheirTarget: purging a run takes the comments on it,
// purging an experiment those on it and on its runs; comments on other
// targets stay.
func testCommentsGoWithTheirTarget(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	u := mustUser(t, s, "c@example.com", false)
	exp, err := h.CreateExperiment(ctx, "/Shared/purged")
	must(t, err)
	other, err := h.CreateExperiment(ctx, "/Shared/kept")
	must(t, err)
	var runs, otherRuns []string
	for range 2 {
		r, err := h.CreateRun(ctx, exp)
		must(t, err)
		runs = append(runs, r)
		r, err = h.CreateRun(ctx, other)
		must(t, err)
		otherRuns = append(otherRuns, r)
	}
	on := func(kind, id string) workspace.CommentTarget { return workspace.CommentTarget{Kind: kind, ID: id} }
	targets := []workspace.CommentTarget{on("experiment", exp), on("experiment", other)}
	for i := range runs {
		targets = append(targets, on("run", runs[i]), on("run", otherRuns[i]))
	}
	for _, tg := range targets {
		for range 2 {
			must(t, s.AddComment(ctx, &workspace.Comment{Target: tg, AuthorID: u.ID, Body: "on " + tg.ID, CreatedMs: 1, UpdatedMs: 1}))
		}
	}
	count := func(tg workspace.CommentTarget) int {
		t.Helper()
		list, err := s.ListComments(ctx, tg)
		must(t, err)
		return len(list)
	}
	want := func(when string, gone map[workspace.CommentTarget]bool) {
		t.Helper()
		for _, tg := range targets {
			n := count(tg)
			switch {
			case gone[tg] && n != 0:
				t.Errorf("%s: %d comments left on the purged %s %s", when, n, tg.Kind, tg.ID)
			case !gone[tg] && n != 2:
				t.Errorf("%s: %d comments on the %s %s, want its 2", when, n, tg.Kind, tg.ID)
			}
		}
	}
	must(t, h.PurgeRun(ctx, runs[0]))
	want("after purging a run", map[workspace.CommentTarget]bool{on("run", runs[0]): true})
	must(t, h.PurgeExperiment(ctx, exp))
	want("after purging its experiment", map[workspace.CommentTarget]bool{on("run", runs[0]): true, on("run", runs[1]): true, on("experiment", exp): true})
}

func testAudit(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	var ids []int64
	for i := range 5 {
		e := &workspace.AuditEvent{TimeMs: int64(i), Actor: "a@example.com", Action: fmt.Sprintf("act-%d", i), Target: "t", Detail: "d"}
		must(t, s.Audit(ctx, e))
		ids = append(ids, e.ID)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("audit ids not increasing: %v", ids)
	}
	page, err := s.ListAudit(ctx, 0, 3)
	must(t, err)
	if len(page) != 3 || page[0].Action != "act-0" {
		t.Fatalf("first page: %+v", page)
	}
	rest, err := s.ListAudit(ctx, page[2].ID, 10)
	must(t, err)
	if len(rest) != 2 || rest[0].Action != "act-3" {
		t.Fatalf("second page: %+v", rest)
	}
}

// testConcurrentUsers: many writers at once; each gets its own id and
// duplicates are refused, never doubled.
func testConcurrentUsers(t *testing.T, h Harness) {
	ctx, s := context.Background(), h.Store
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[int64]bool{}
	dups := 0
	for i := range 40 {
		wg.Go(func() {
			email := fmt.Sprintf("u%d@example.com", i%20)
			u := &workspace.User{Email: email, CreatedMs: 1}
			err := s.CreateUser(ctx, u, "h")
			mu.Lock()
			defer mu.Unlock()
			switch errs.CodeOf(err) {
			case "":
				if ids[u.ID] {
					t.Errorf("id %d given twice", u.ID)
				}
				ids[u.ID] = true
			case errs.AlreadyExists:
				dups++
			default:
				t.Errorf("create %s: %v", email, err)
			}
		})
	}
	wg.Wait()
	if len(ids) != 20 || dups != 20 {
		t.Fatalf("%d users created, %d duplicates refused; want 20 and 20", len(ids), dups)
	}
}
