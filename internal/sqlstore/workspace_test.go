package sqlstore_test

import (
	"context"
	"testing"

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
