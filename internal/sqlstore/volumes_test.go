package sqlstore_test

import (
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/volumes/volumestest"
)

func TestVolumesConformance(t *testing.T) {
	sharing := map[string]volumestest.Sharing{"SQLite": volumestest.Exclusive, "PostgreSQL": volumestest.Shared}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			volumestest.RunStoreTests(t, sharing[b.name], func(t *testing.T) volumestest.Store {
				return b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
			})
		})
	}
}
