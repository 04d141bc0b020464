package sqlstore_test

import (
	"context"
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
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
				return workspacetest.Harness{Store: s.Workspace(), CreateExperiment: func(ctx context.Context, name string) (string, error) {
					return tr.CreateExperiment(ctx, name, "", nil)
				}}
			})
		})
	}
}
