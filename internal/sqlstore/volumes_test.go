package sqlstore_test

import (
	"context"
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/volumes/volumestest"
	"github.com/sextant/sextant/internal/workspace"
)

func TestVolumesConformance(t *testing.T) {
	sharing := map[string]volumestest.Sharing{"SQLite": volumestest.Exclusive, "PostgreSQL": volumestest.Shared}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			volumestest.RunStoreTests(t, sharing[b.name], func(t *testing.T) volumestest.Store {
				s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
				return volumesHarness{s.Volumes(), s.Workspace()}
			})
		})
	}
}

// volumesHarness is the volume store with the workspace's grants, which
// the suite sets.
type volumesHarness struct {
	*sqlstore.VolumeStore
	ws *sqlstore.WorkspaceStore
}

func (h volumesHarness) SetGrant(ctx context.Context, g workspace.Grant) error {
	return h.ws.SetGrant(ctx, g)
}
