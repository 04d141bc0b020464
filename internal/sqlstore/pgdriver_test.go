package sqlstore

import "testing"

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
