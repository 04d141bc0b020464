package pgtest_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/sextant/sextant/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestNewDatabase(t *testing.T) {
	a, b := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases with one URL %s", a)
	}
	db, err := sql.Open("pgx", a)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (x int)`); err != nil {
		t.Fatal(err)
	}
	var n int
	other, _ := sql.Open("pgx", b)
	defer other.Close()
	if err := other.QueryRow(`SELECT count(*) FROM pg_tables WHERE tablename = 't'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("second database sees the first one's table: %d %v", n, err)
	}
}
