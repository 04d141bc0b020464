package main

import (
	"context"
	"database/sql"
	"sync"

	"github.com/sextant/sextant/internal/pgtest"
)

// postgres is the bench's PostgreSQL server when it runs with -db postgres.
type postgres struct {
	srv *pgtest.Server
	mu  sync.Mutex
	dbs map[string]string // data directory (or replica group) -> database URL
}

var pg postgres

func startPostgres() error {
	s, err := pgtest.Start()
	if err != nil {
		return err
	}
	pg.srv = s
	pg.dbs = map[string]string{}
	logf("PostgreSQL at %s", s.URL)
	return nil
}

// databaseFor returns the database of key, created on first use.
func (p *postgres) databaseFor(ctx context.Context, key string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.dbs[key]; ok {
		return u, nil
	}
	u, err := pgtest.CreateDatabase(ctx, p.srv.URL)
	if err != nil {
		return "", err
	}
	p.dbs[key] = u
	return u, nil
}

// dbBytes is the size of a server's database: the SQLite file (and the
// bytes in use), or the PostgreSQL database's size on disk.
func dbBytes(ctx context.Context, dataDir string) (file, live int64, err error) {
	if pg.srv == nil {
		return sqliteBytes(dataDir)
	}
	u, err := pg.databaseFor(ctx, dataDir)
	if err != nil {
		return 0, 0, err
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	err = db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&file)
	return file, file, err
}

// tablesBytes is what the tables of the database of key (a data
// directory) take: every table's heap, indexes and TOAST, without the
// catalog of an empty database (about 7.5 MB) or PostgreSQL's WAL, which
// all its databases share.
func (p *postgres) tablesBytes(ctx context.Context, key string) (int64, error) {
	u, err := p.databaseFor(ctx, key)
	if err != nil {
		return 0, err
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(ctx, `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c
		JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'm') AND s.nspname NOT IN ('pg_catalog', 'information_schema')`).Scan(&n)
	return n, err
}
