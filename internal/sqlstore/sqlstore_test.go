package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"go.uber.org/goleak"

	"github.com/sextant/sextant/internal/pgtest"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/trackingtest"
)

// MustOpen opens a store on a fresh database file in a temporary directory
// and closes it when the test ends.
func MustOpen(tb testing.TB, opts sqlstore.Options) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(context.Background(), filepath.Join(tb.TempDir(), "sextant.db"), opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// TestMain stops the PostgreSQL server the tests started, if any, and
// fails the package when a goroutine outlives the tests: every store's
// writer, compactor, pruner and search-index follower must end with
// Close.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// MustOpenPostgres opens a store on a fresh PostgreSQL database (see
// pgtest) and closes it when the test ends.
func MustOpenPostgres(tb testing.TB, opts sqlstore.Options) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(context.Background(), pgtest.NewDatabase(tb), opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// backends opens a store of each kind: the conformance suites run
// against every one.
var backends = []struct {
	name string
	open func(testing.TB, sqlstore.Options) *sqlstore.Store
}{
	{"SQLite", MustOpen},
	{"PostgreSQL", MustOpenPostgres},
}

func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			trackingtest.RunStoreTests(t, func(t *testing.T, limits tracking.Limits) tracking.Store {
				// Small chunks, an eager compaction threshold and short
				// overviews, so the suite crosses chunk boundaries, compacts
				// and builds overviews while it runs.
				// Searches wait for the search index to be built (SQLite),
				// so that the suite's searches are answered from it.
				s := b.open(t, sqlstore.Options{Limits: limits, Synchronous: "NORMAL", ChunkPoints: 512, CompactAfter: 4, OverviewChunks: 4})
				s.RunSearch().WaitForIndex()
				return s.Tracking()
			})
		})
	}
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sextant.db")
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, path, sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	svc := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := svc.CreateExperiment(ctx, "/Shared/kept", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s, err = sqlstore.Open(ctx, path, sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close(ctx)
	svc = tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := svc.GetExperiment(ctx, id)
	if err != nil || e.Name != "/Shared/kept" {
		t.Fatalf("after reopen: %+v %v", e, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sextant.db")
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, path, sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (component, version, applied_at) VALUES ('tracking', 999, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlstore.Open(ctx, path, sqlstore.Options{Synchronous: "NORMAL"})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("opened a database from the future: %v", err)
	}
}
