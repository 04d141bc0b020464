package runsearch

import (
	_ "github.com/mattn/go-sqlite3"

	"database/sql"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sextant/sextant/internal/tracking/search"
)

// mustLikeDB opens an in-memory SQLite database with the store's LIKE
// setting (case-sensitive), the reference sqliteLike must agree with.
func mustLikeDB(tb testing.TB) *sql.DB {
	tb.Helper()
	// _cslike is the store's LIKE setting (sqlstore's sqliteParams).
	db, err := sql.Open("sqlite3", "file::memory:?_cslike=1")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return db
}

// checkLike compares sqliteLike and the ILIKE rendering with SQLite's.
func checkLike(tb testing.TB, db *sql.DB, p, s string) {
	tb.Helper()
	var like, ilike bool
	if err := db.QueryRow(`SELECT ? LIKE ?, lower(?) LIKE lower(?)`, s, p, s, p).Scan(&like, &ilike); err != nil {
		tb.Fatal(err)
	}
	if got := sqliteLike(p, s); got != like {
		tb.Fatalf("%q LIKE %q: %v, SQLite says %v", s, p, got, like)
	}
	if got := sqliteLike(asciiLower(p), asciiLower(s)); got != ilike {
		tb.Fatalf("%q ILIKE %q: %v, SQLite says %v", s, p, got, ilike)
	}
}

// likeAlphabet mixes wildcards, letters of both cases, multi-byte
// characters, stray continuation bytes, a truncated sequence and NUL.
var likeAlphabet = []string{"%", "_", "a", "A", "b", "é", "É", "ẞ", "\x80", "\xc3", "\xff", "\x00", "€", "\xf0\x9f\x98\x80", "\xed\xa0\x80"}

func TestSQLiteLike(t *testing.T) {
	db := mustLikeDB(t)
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		var b []byte
		for range rng.IntN(n + 1) {
			b = append(b, likeAlphabet[rng.IntN(len(likeAlphabet))]...)
		}
		return string(b)
	}
	for range 20_000 {
		checkLike(t, db, word(5), word(6))
	}
}

func FuzzSQLiteLike(f *testing.F) {
	for _, c := range [][2]string{{"%", ""}, {"a%b", "axxb"}, {"_", "é"}, {"%a%", "xAx"}, {"a\x00b", "a"}, {"%\xc3", "\xc3\xa9"}, {"%%_%", "ab"}} {
		f.Add(c[0], c[1])
	}
	db := mustLikeDB(f)
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 200 {
			return
		}
		checkLike(t, db, p, s)
	})
}

// TestIntFloatCompare checks comparisons of integer columns with numbers
// against SQLite's, at the edges of float64's precision and int64's range.
func TestIntFloatCompare(t *testing.T) {
	db := mustLikeDB(t)
	ints := []int64{0, 1, -1, 1 << 53, 1<<53 + 1, -(1<<53 + 1), math.MaxInt64, math.MinInt64, 1_700_000_000_000}
	floats := []float64{0, 0.5, -0.5, 1, 1 << 53, 1<<53 + 2, 9223372036854775807, -9223372036854775808, 9.3e18, -9.3e18, math.Inf(1), math.Inf(-1), 1e300, 1_700_000_000_000.5}
	for _, i := range ints {
		for _, f := range floats {
			for _, op := range []search.Op{search.OpEq, search.OpNe, search.OpLt, search.OpLe, search.OpGt, search.OpGe} {
				var want bool
				if err := db.QueryRow(`SELECT CAST(? AS INTEGER) `+string(op)+` ?`, i, f).Scan(&want); err != nil {
					t.Fatal(err)
				}
				if got := intFloatOp(op, i, f); got != want {
					t.Errorf("%d %s %v: %v, SQLite says %v", i, op, f, got, want)
				}
			}
		}
	}
}
