package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sextant/sextant/internal/pgtest"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
	"github.com/sextant/sextant/internal/workspace/workspacetest"
)

func TestWorkspaceConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			workspacetest.RunStoreTests(t, func(t *testing.T) workspacetest.Harness {
				s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
				tr := tracking.NewService(s.Tracking(), tracking.Options{})
				if err := tr.Init(context.Background()); err != nil {
					t.Fatal(err)
				}
				return workspacetest.Harness{
					Store: s.Workspace(),
					CreateExperiment: func(ctx context.Context, name string) (string, error) {
						return tr.CreateExperiment(ctx, name, "", nil)
					},
					CreateRun: func(ctx context.Context, exp string) (string, error) {
						r, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: exp})
						if err != nil {
							return "", err
						}
						return r.Info.RunID, nil
					},
					PurgeRun:        s.PurgeRun,
					PurgeExperiment: s.PurgeExperiment,
				}
			})
		})
	}
}

// TestDefaultGrantSurvivesRestart: the workspace grants every user CAN_EDIT
// on the Default experiment once, when it is new; an administrator's
// change of that grant holds across restarts (each start runs Init).
func TestDefaultGrantSurvivesRestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			testDefaultGrantSurvivesRestart(t, b.open(t, sqlstore.Options{Synchronous: "NORMAL"}))
		})
	}
}

func testDefaultGrantSurvivesRestart(t *testing.T, s *sqlstore.Store) {
	ctx := context.Background()
	def := workspace.Resource{Kind: workspace.ResourceExperiment, Key: workspace.DefaultExperimentID}
	users := workspace.Principal{Kind: workspace.PrincipalGroup, ID: workspace.AllUsersGroup}
	level := func() workspace.Level {
		t.Helper()
		gs, err := s.Workspace().Grants(ctx, []workspace.Resource{def})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs[def] {
			if g.Principal == users {
				return g.Level
			}
		}
		return workspace.NoAccess
	}
	start := func() {
		t.Helper()
		if err := workspace.NewService(s.Workspace(), workspace.Options{BcryptCost: 4}).Init(ctx); err != nil {
			t.Fatal(err)
		}
	}
	start()
	if got := level(); got != workspace.CanEdit {
		t.Fatalf("a new workspace: every user has %v on Default, want CAN_EDIT", got)
	}
	for _, l := range []workspace.Level{workspace.CanRead, workspace.NoAccess} {
		if err := s.Workspace().SetGrant(ctx, workspace.Grant{Resource: def, Principal: users, Level: l}); err != nil {
			t.Fatal(err)
		}
		start()
		if got := level(); got != l {
			t.Fatalf("the administrator set %v on Default for every user; after a restart: %v", l, got)
		}
	}
}

// TestCommentMigrationDropsOrphans: workspace migration 2, which makes
// comments go with their target, also drops the comments a database holds
// already on targets that do not exist (the API took any target before it
// checked) and keeps the others. The test undoes the migration on a new
// database, adds comments, and opens it again.
func TestCommentMigrationDropsOrphans(t *testing.T) {
	undo := map[string][]string{
		"SQLite": {`DROP TRIGGER comments_purge_run`, `DROP TRIGGER comments_purge_experiment`},
		"PostgreSQL": {`DROP TRIGGER comments_purge_run ON runs`, `DROP FUNCTION comments_purge_run()`,
			`DROP TRIGGER comments_purge_experiment ON experiments`, `DROP FUNCTION comments_purge_experiment()`},
	}
	for name, dsn := range map[string]func() string{
		"SQLite":     func() string { return filepath.Join(t.TempDir(), "sextant.db") },
		"PostgreSQL": func() string { return pgtest.NewDatabase(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dsn := dsn()
			s, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Synchronous: "NORMAL"})
			if err != nil {
				t.Fatal(err)
			}
			tr := tracking.NewService(s.Tracking(), tracking.Options{})
			if err := tr.Init(ctx); err != nil {
				t.Fatal(err)
			}
			exp, err := tr.CreateExperiment(ctx, "/Shared/e", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			run, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: exp})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ExecSQL(ctx, append(undo[name], `DELETE FROM schema_migrations WHERE component = 'workspace' AND version = 2`)...); err != nil {
				t.Fatal(err)
			}
			kept := []workspace.CommentTarget{{Kind: "experiment", ID: exp}, {Kind: "run", ID: run.Info.RunID}, {Kind: "experiment", ID: "0"}}
			orphans := []workspace.CommentTarget{{Kind: "experiment", ID: ""}, {Kind: "experiment", ID: "987654321"}, {Kind: "experiment", ID: "abc"},
				{Kind: "run", ID: "0123456789abcdef0123456789abcdef"}, {Kind: "run", ID: exp}, {Kind: "model", ID: exp}}
			for _, tg := range append(append([]workspace.CommentTarget{}, kept...), orphans...) {
				if err := s.Workspace().AddComment(ctx, &workspace.Comment{Target: tg, AuthorID: 1, Body: "x", CreatedMs: 1, UpdatedMs: 1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			s, err = sqlstore.Open(ctx, dsn, sqlstore.Options{Synchronous: "NORMAL"})
			if err != nil {
				t.Fatalf("open again, migrating: %v", err)
			}
			defer s.Close(context.Background())
			for _, tg := range kept {
				if cs, err := s.Workspace().ListComments(ctx, tg); err != nil || len(cs) != 1 {
					t.Errorf("the comment on the %s %q: %d left, %v; want it kept", tg.Kind, tg.ID, len(cs), err)
				}
			}
			for _, tg := range orphans {
				if cs, err := s.Workspace().ListComments(ctx, tg); err != nil || len(cs) != 0 {
					t.Errorf("the comment on the %s %q, which does not exist: %d left, %v; want it dropped", tg.Kind, tg.ID, len(cs), err)
				}
			}
			// The triggers are back: a purge takes the run's comments.
			if err := s.PurgeRun(ctx, run.Info.RunID); err != nil {
				t.Fatal(err)
			}
			if cs, err := s.Workspace().ListComments(ctx, kept[1]); err != nil || len(cs) != 0 {
				t.Errorf("after the purge of the run: %d comments on it, %v", len(cs), err)
			}
		})
	}
}
