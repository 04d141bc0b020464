package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/sextant/sextant/internal/sqlstore/runsearch"
	"github.com/sextant/sextant/internal/tracking"
)

// The runs search lives in runsearch; this is its seam to the store: the
// read connections, the dialect, the translation of driver errors, the
// loaders of a page's run data and, on SQLite, the index's own read-only
// connections. The change feed the index follows is the store's schema
// (run_changes and its triggers, schema_reads.go).

// DefaultSearchIndexBytes is the default of Options.SearchIndexBytes.
const DefaultSearchIndexBytes = runsearch.DefaultSearchIndexBytes

// searchDB returns what the runs search needs of the store; path is the
// SQLite database file (unused on PostgreSQL).
func (s *db) searchDB(path string) runsearch.DB {
	d := runsearch.DB{
		Read:        s.rdb,
		Postgres:    s.pg,
		Error:       sqlError,
		LoadRunData: s.loadRunDataIO,
		LoadRunIO:   s.loadRunIO,
		Log:         s.log,
	}
	if !s.pg {
		d.OpenIndex = func(conns, cacheKiB int) (*sql.DB, error) { return openSearchIndexDB(path, conns, cacheKiB) }
	}
	return d
}

// openSearchIndexDB opens the search index's read connections to the
// SQLite database at path: read-only, conns of them, with a page cache of
// cacheKiB each (the index reads every run of an experiment once and every
// changed run again, pages a search's connections need not keep).
func openSearchIndexDB(path string, conns, cacheKiB int) (*sql.DB, error) {
	q := sqliteParams()
	q.Set("_cache_size", strconv.Itoa(-cacheKiB))
	q.Set("mode", "ro")
	q.Set("_query_only", "1")
	q.Set("_txlock", "deferred")
	rdb, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s for the search index: %w", path, err)
	}
	rdb.SetMaxOpenConns(conns)
	rdb.SetMaxIdleConns(conns)
	rdb.SetConnMaxIdleTime(time.Minute)
	return rdb, nil
}

// SearchRuns implements tracking.RunStore (runsearch.Searcher.Search). On
// SQLite a search of one experiment is answered from the search index
// when it can be; any other by SQL. The runs of a page answered from the
// index share their Data slices with it: callers must not change them.
func (s *TrackingStore) SearchRuns(ctx context.Context, q tracking.RunQuery) (tracking.RunPage, error) {
	return s.search.Search(ctx, q)
}

// RunSearch returns the store's runs search, for its metrics and tests.
func (s *Store) RunSearch() *runsearch.Searcher { return s.search }
