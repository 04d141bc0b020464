package sqlstore_test

import (
	"context"
	"testing"

	"github.com/sextant/sextant/internal/runevents/runeventstest"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// MustOpenEvents opens the event part of s.
func MustOpenEvents(tb testing.TB, s *sqlstore.Store) *sqlstore.EventStore {
	tb.Helper()
	e, err := sqlstore.OpenEvents(context.Background(), s)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func TestEventConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			runeventstest.RunStoreTests(t, func(t *testing.T) runeventstest.Harness {
				s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
				tr := tracking.NewService(s.Tracking(), tracking.Options{})
				ctx := context.Background()
				if err := tr.Init(ctx); err != nil {
					t.Fatal(err)
				}
				return runeventstest.Harness{
					Store: MustOpenEvents(t, s),
					NewRun: func(t *testing.T) string {
						r, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
						if err != nil {
							t.Fatal(err)
						}
						return r.Info.RunID
					},
					SetDeleted: func(t *testing.T, id string, deleted bool) {
						var err error
						if deleted {
							err = tr.DeleteRun(ctx, id)
						} else {
							err = tr.RestoreRun(ctx, id)
						}
						if err != nil {
							t.Fatal(err)
						}
					},
					Purge: func(t *testing.T, id string) {
						if err := s.PurgeRun(ctx, id); err != nil {
							t.Fatal(err)
						}
					},
				}
			})
		})
	}
}
