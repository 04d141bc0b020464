package runsearch_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"
	"go.uber.org/goleak"

	"github.com/sextant/sextant/internal/pgtest"
	"github.com/sextant/sextant/internal/sqlstore"
)

// The runs search is tested through the store that wires it (sqlstore),
// on real SQLite files and a throwaway PostgreSQL server: the index
// follows the triggers of the store's schema.

// TestMain stops the PostgreSQL server the tests started, if any, and
// fails the package when a goroutine outlives the tests: the search
// index's follower and loads must end with the store's Close.
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

// storeDBs maps the stores MustOpen and MustOpenPostgres opened to their
// databases (target).
var storeDBs sync.Map

// target is a database/sql driver and data source name.
type target struct{ driver, dsn string }

// MustOpen opens a store on a fresh SQLite file in a temporary directory
// and closes it when the test ends.
func MustOpen(tb testing.TB, opts sqlstore.Options) *sqlstore.Store {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "sextant.db")
	s, err := sqlstore.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	storeDBs.Store(s, target{"sqlite3", "file:" + path + "?_busy_timeout=10000"})
	tb.Cleanup(func() {
		storeDBs.Delete(s)
		if err := s.Close(context.Background()); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// backends are the databases the search runs on.
var backends = []struct {
	name string
	open func(testing.TB, sqlstore.Options) *sqlstore.Store
}{
	{"SQLite", MustOpen},
	{"PostgreSQL", MustOpenPostgres},
}

// MustOpenPostgres opens a store on a fresh PostgreSQL database (see
// pgtest) and closes it when the test ends.
func MustOpenPostgres(tb testing.TB, opts sqlstore.Options) *sqlstore.Store {
	tb.Helper()
	dsn := pgtest.NewDatabase(tb)
	s, err := sqlstore.Open(context.Background(), dsn, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	storeDBs.Store(s, target{"pgx", dsn})
	tb.Cleanup(func() {
		storeDBs.Delete(s)
		if err := s.Close(context.Background()); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// execSQL runs statements on a connection of its own to the database of s
// (opened by MustOpen or MustOpenPostgres), for tests that fill a database
// faster than the API can; SQLite's lock orders it with the store's writer.
func execSQL(ctx context.Context, s *sqlstore.Store, stmts ...string) error {
	t, ok := storeDBs.Load(s)
	if !ok {
		return fmt.Errorf("execSQL: the store was not opened by MustOpen or MustOpenPostgres")
	}
	db, err := sql.Open(t.(target).driver, t.(target).dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}
