// Package runsearch answers MLflow's runs search (runs/search) over
// sqlstore's tables, on SQLite and PostgreSQL: the clause compiler (one
// description per operator, ops.go, from which the SQL, the index's tests
// and the planners' choice derive), the SQL search and its planner, the
// in-memory search index of SQLite experiments and the merge of several
// experiments' searches. Its name says what it holds: the search of runs,
// a part of the SQL store, not a domain of its own (the grammar is
// tracking/search's).
//
// The store wires it through one seam, DB: the read connections and the
// dialect, the translation of driver errors, the loaders of a page's run
// data, and (SQLite) the index's own read connections. The index follows
// the change feed sqlstore's schema keeps: triggers number every change
// of a run's row, params or tags in run_change_seq and run_changes
// (migration reads 7), and LogBatch changes a run's row with its latest
// metrics. The SQL reads sqlstore's tables (runs, params, tags,
// metric_series, run_inputs, ...); sqlrow holds the row shapes both read.
//
// The clause compiler is also the logged models' and the registry's
// (StringCompare, NumberCompare, SideCompare), so that an operator has one
// SQL everywhere.
package runsearch

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/sextant/sextant/internal/tracking"
)

// DB is what the search needs of the store that wires it. Every field but
// OpenIndex and Log is required.
type DB struct {
	// Read is the pool of read connections searches query.
	Read *sql.DB
	// Postgres is true on PostgreSQL, false on SQLite.
	Postgres bool
	// Error translates a driver error into a domain error (errs); msg
	// names the operation. It returns nil for nil and leaves errs errors
	// as they are.
	Error func(err error, msg string) error
	// LoadRunData fills Data, Inputs and Outputs of runs (pks[i] is
	// runs[i]'s key), looking for inputs and outputs only for the runs of
	// ioPKs. It may query several connections at once.
	LoadRunData func(ctx context.Context, pks []int64, runs []*tracking.Run, ioPKs []int64) error
	// LoadRunIO fills Inputs and Outputs of the runs of byPK whose keys are
	// args (in, their placeholders).
	LoadRunIO func(ctx context.Context, in string, args []any, byPK map[int64]*tracking.Run) error
	// OpenIndex opens n read-only connections to the SQLite database for
	// the search index, with a page cache of cacheKiB each; nil means no
	// index (PostgreSQL).
	OpenIndex func(n, cacheKiB int) (*sql.DB, error)
	// Log receives the index's logs; nil discards them.
	Log *slog.Logger
}

// Searcher answers runs searches. It is safe for concurrent use.
type Searcher struct {
	rdb         *sql.DB
	pg          bool
	sqlError    func(error, string) error
	loadRunData func(context.Context, []int64, []*tracking.Run, []int64) error
	loadRunIO   func(context.Context, string, []any, map[int64]*tracking.Run) error
	log         *slog.Logger
	counts      runCounts // the planner's run counts (plan.go)
	// index answers searches from memory (index.go); nil on PostgreSQL or
	// when turned off.
	index *searchIndex
}

// New returns the search of db's runs. On SQLite (db.OpenIndex set) and
// indexBytes not negative, it keeps a search index of at most indexBytes
// (0: DefaultSearchIndexBytes) and starts following the database's
// changes; Close stops it.
func New(db DB, indexBytes int64) (*Searcher, error) {
	log := db.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Searcher{rdb: db.Read, pg: db.Postgres, sqlError: db.Error, loadRunData: db.LoadRunData, loadRunIO: db.LoadRunIO, log: log}
	if db.OpenIndex != nil && indexBytes >= 0 {
		ix, err := newSearchIndex(s, db.OpenIndex, indexBytes)
		if err != nil {
			return nil, err
		}
		s.index = ix
	}
	return s, nil
}

// Close stops the index's work in the background and closes its
// connections. Searches must have returned.
func (s *Searcher) Close() error {
	if s.index == nil {
		return nil
	}
	return s.index.close()
}

// WaitForIndex makes a search whose experiment's index is being built or
// caught up wait for it instead of using SQL, so that tests (the store's
// conformance suite) have their searches answered from the index. It does
// nothing without an index.
func (s *Searcher) WaitForIndex() {
	if s.index == nil {
		return
	}
	s.index.mu.Lock()
	s.index.wait = true
	s.index.mu.Unlock()
}

// Stats are counts of the searches since New.
type Stats struct {
	// Indexed is true when the search keeps an index; the others are 0
	// when it does not.
	Indexed bool
	// Memory and SQL are the searches answered from the index and with
	// SQL (those of a store without an index are not counted).
	Memory, SQL int64
	// IndexBytes is the estimated memory the index holds.
	IndexBytes int64
}

// Stats returns the search's counts.
func (s *Searcher) Stats() Stats {
	ix := s.index
	if ix == nil {
		return Stats{}
	}
	return Stats{Indexed: true, Memory: ix.memory.Load(), SQL: ix.sql.Load(), IndexBytes: ix.usedBytes()}
}

// joinInOrder joins a driving row set to the rows it drives, in that
// order: SQLite's planner keeps the order of a CROSS JOIN, PostgreSQL's
// finds it for a plain JOIN (and takes CROSS JOIN as a cartesian product
// without an ON).
func (s *Searcher) joinInOrder() string {
	if s.pg {
		return "JOIN"
	}
	return "CROSS JOIN"
}
