package sqlstore

import (
	"context"
	"net/url"
	"testing"

	"github.com/sextant/sextant/internal/pgtest"
)

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                   "SELECT 1",
		"SELECT ? , ?":               "SELECT $1 , $2",
		"SELECT '?' , ?":             "SELECT '?' , $1",
		`SELECT "a?b", 'it''s ?', ?`: `SELECT "a?b", 'it''s ?', $1`,
		"SELECT ? -- what?\n, ?":     "SELECT $1 -- what?\n, $2",
		"INSERT INTO t (a, b) VALUES (?, ?), (?, ?)": "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)",
		"SELECT 'unterminated ?":                     "SELECT 'unterminated ?",
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPostgresJITOff checks that the store's connections run without
// PostgreSQL's JIT compiler unless the database URL asks for it: a runs
// search's cost estimate passes jit_above_cost at 100,000 runs, and
// compiling took 290 ms of a 370 ms search.
func TestPostgresJITOff(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("jit", "on")
	u.RawQuery = q.Encode()
	for _, c := range []struct{ dsn, want string }{
		{dsn, "off"},
		{u.String(), "on"},
	} {
		db, err := openPostgres(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRowContext(context.Background(), "SHOW jit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if got != c.want {
			t.Errorf("%s: jit = %q, want %q", c.dsn, got, c.want)
		}
	}
}
