// Package mlflowimport copies what an MLflow tracking server recorded
// (experiments, runs, params, tags, metric histories, dataset inputs and
// artifacts) from MLflow's own database and artifact directory into
// Sextant's stores, keeping ids, names and times, so that a team can move
// without losing history.
//
// It reads MLflow's SQL schema (the tables of mlflow/store/tracking/dbmodels)
// with plain SELECTs, so the same code reads a SQLite file and a PostgreSQL
// database; only the placeholders differ.
package mlflowimport

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// Source is an open MLflow database.
type Source struct {
	db *sql.DB
	// dollar is true for PostgreSQL ($1 placeholders), false for SQLite (?).
	dollar bool
}

// OpenSource opens an MLflow database URL as the mlflow server takes it:
// sqlite:///relative/path.db, sqlite:////absolute/path.db, or
// postgresql://user:pass@host:port/db (also postgres://, and the
// SQLAlchemy spelling postgresql+psycopg2://). openSQL opens a database
// by driver name ("sqlite3", "pgx") and DSN; the command passes
// sql.Open, so that this package needs neither driver.
func OpenSource(ctx context.Context, rawURL string, openSQL func(driver, dsn string) (*sql.DB, error)) (*Source, error) {
	driver, dsn, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := openSQL(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(rawURL), err)
	}
	s := &Source{db: db, dollar: driver == "pgx"}
	// An MLflow database has these tables; anything else is refused up front
	// rather than half imported.
	for _, table := range []string{"experiments", "experiment_tags", "runs", "params", "tags", "metrics"} {
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE 1 = 0").Scan(new(int)); err != nil {
			db.Close()
			return nil, errs.Errorf(errs.Invalid, "%s is not an MLflow tracking database (table %s: %v)", redact(rawURL), table, err)
		}
	}
	return s, nil
}

// Close closes the database.
func (s *Source) Close() error { return s.db.Close() }

func parseURL(raw string) (driver, dsn string, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", errs.Errorf(errs.Invalid, "--from %q: want sqlite:///path/to/mlflow.db or postgresql://user:password@host:port/database", raw)
	}
	switch base, _, _ := strings.Cut(scheme, "+"); base {
	case "sqlite":
		// sqlite:///rel.db is rel.db; sqlite:////abs.db is /abs.db.
		p := strings.TrimPrefix(rest, "/")
		if p == "" {
			return "", "", errs.Errorf(errs.Invalid, "--from %q names no database file", raw)
		}
		// Read only: an import never changes the source.
		return "sqlite3", "file:" + p + "?mode=ro&_busy_timeout=10000", nil
	case "postgresql", "postgres":
		u, err := url.Parse("postgres://" + rest)
		if err != nil {
			return "", "", errs.Errorf(errs.Invalid, "--from: %v", err)
		}
		return "pgx", u.String(), nil
	}
	return "", "", errs.Errorf(errs.Invalid, "--from %q: unsupported database %q (sqlite or postgresql)", redact(raw), scheme)
}

// redact hides a password in a database URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "****")
	}
	return u.String()
}

// q rewrites ? placeholders for the source's dialect.
func (s *Source) q(query string) string {
	if !s.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *Source) hasTable(ctx context.Context, table string) bool {
	return s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE 1 = 0").Scan(new(int)) == nil
}

// experiment is a row of MLflow's experiments table.
type experiment struct {
	ID               int64
	Name             string
	ArtifactLocation string
	LifecycleStage   string
	CreationTime     int64
	LastUpdateTime   int64
	Tags             [][2]string
}

func (s *Source) experiments(ctx context.Context) ([]*experiment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT experiment_id, name, COALESCE(artifact_location, ''), COALESCE(lifecycle_stage, 'active'),
		COALESCE(creation_time, 0), COALESCE(last_update_time, 0) FROM experiments ORDER BY experiment_id`)
	if err != nil {
		return nil, fmt.Errorf("read experiments: %w", err)
	}
	defer rows.Close()
	var out []*experiment
	byID := map[int64]*experiment{}
	for rows.Next() {
		e := &experiment{}
		if err := rows.Scan(&e.ID, &e.Name, &e.ArtifactLocation, &e.LifecycleStage, &e.CreationTime, &e.LastUpdateTime); err != nil {
			return nil, fmt.Errorf("read experiments: %w", err)
		}
		out = append(out, e)
		byID[e.ID] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read experiments: %w", err)
	}
	tags, err := s.db.QueryContext(ctx, `SELECT experiment_id, key, COALESCE(value, '') FROM experiment_tags ORDER BY experiment_id, key`)
	if err != nil {
		return nil, fmt.Errorf("read experiment tags: %w", err)
	}
	defer tags.Close()
	for tags.Next() {
		var id int64
		var k, v string
		if err := tags.Scan(&id, &k, &v); err != nil {
			return nil, fmt.Errorf("read experiment tags: %w", err)
		}
		if e := byID[id]; e != nil {
			e.Tags = append(e.Tags, [2]string{k, v})
		}
	}
	return out, tags.Err()
}

// run is a row of MLflow's runs table.
type run struct {
	ID             string
	Name           string
	UserID         string
	Status         string
	StartTime      int64
	EndTime        int64
	LifecycleStage string
	DeletedTime    int64
	ArtifactURI    string
	ExperimentID   int64
}

func (s *Source) runs(ctx context.Context, expID int64) ([]*run, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT run_uuid, COALESCE(name, ''), COALESCE(user_id, ''), COALESCE(status, 'FINISHED'),
		COALESCE(start_time, 0), COALESCE(end_time, 0), COALESCE(lifecycle_stage, 'active'), COALESCE(deleted_time, 0),
		COALESCE(artifact_uri, ''), experiment_id
		FROM runs WHERE experiment_id = ? ORDER BY start_time, run_uuid`), expID)
	if err != nil {
		return nil, fmt.Errorf("read runs of experiment %d: %w", expID, err)
	}
	defer rows.Close()
	var out []*run
	for rows.Next() {
		r := &run{}
		if err := rows.Scan(&r.ID, &r.Name, &r.UserID, &r.Status, &r.StartTime, &r.EndTime, &r.LifecycleStage, &r.DeletedTime, &r.ArtifactURI, &r.ExperimentID); err != nil {
			return nil, fmt.Errorf("read runs of experiment %d: %w", expID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// keyValues reads (key, value) rows of one run from params or tags.
func (s *Source) keyValues(ctx context.Context, table, runID string) ([][2]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT key, COALESCE(value, '') FROM `+table+` WHERE run_uuid = ? ORDER BY key`), runID)
	if err != nil {
		return nil, fmt.Errorf("read %s of run %s: %w", table, runID, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var kv [2]string
		if err := rows.Scan(&kv[0], &kv[1]); err != nil {
			return nil, fmt.Errorf("read %s of run %s: %w", table, runID, err)
		}
		out = append(out, kv)
	}
	return out, rows.Err()
}

// point is a row of MLflow's metrics table.
type point struct {
	Key       string
	Value     float64
	Timestamp int64
	Step      int64
	IsNaN     bool
}

// metrics calls fn with the run's metric points, in batches of at most n,
// ordered by key, step and timestamp; the slice is reused between calls.
func (s *Source) metrics(ctx context.Context, runID string, n int, fn func([]point) error) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT key, value, COALESCE(timestamp, 0), COALESCE(step, 0), is_nan
		FROM metrics WHERE run_uuid = ? ORDER BY key, step, timestamp, value`), runID)
	if err != nil {
		return fmt.Errorf("read metrics of run %s: %w", runID, err)
	}
	defer rows.Close()
	buf := make([]point, 0, n)
	for rows.Next() {
		var p point
		if err := rows.Scan(&p.Key, &p.Value, &p.Timestamp, &p.Step, &p.IsNaN); err != nil {
			return fmt.Errorf("read metrics of run %s: %w", runID, err)
		}
		buf = append(buf, p)
		if len(buf) == n {
			if err := fn(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read metrics of run %s: %w", runID, err)
	}
	if len(buf) > 0 {
		return fn(buf)
	}
	return nil
}

// datasetInput is a dataset a run used, with the input's tags.
type datasetInput struct {
	Name, Digest, SourceType, Source, Schema, Profile string
	Tags                                              [][2]string
}

func (s *Source) datasetInputs(ctx context.Context, runID string) ([]datasetInput, error) {
	if !s.hasTable(ctx, "inputs") || !s.hasTable(ctx, "datasets") {
		return nil, nil // older MLflow databases have no dataset tracking
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT i.input_uuid, d.name, d.digest, d.dataset_source_type, d.dataset_source,
		COALESCE(d.dataset_schema, ''), COALESCE(d.dataset_profile, '')
		FROM inputs i JOIN datasets d ON d.dataset_uuid = i.source_id
		WHERE i.destination_type = 'RUN' AND i.destination_id = ? AND i.source_type = 'DATASET'
		ORDER BY d.name, d.digest`), runID)
	if err != nil {
		return nil, fmt.Errorf("read dataset inputs of run %s: %w", runID, err)
	}
	var out []datasetInput
	var ids []string
	for rows.Next() {
		var id string
		var d datasetInput
		if err := rows.Scan(&id, &d.Name, &d.Digest, &d.SourceType, &d.Source, &d.Schema, &d.Profile); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read dataset inputs of run %s: %w", runID, err)
		}
		out = append(out, d)
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, id := range ids {
		tags, err := s.db.QueryContext(ctx, s.q(`SELECT name, value FROM input_tags WHERE input_uuid = ? ORDER BY name`), id)
		if err != nil {
			return nil, fmt.Errorf("read input tags of run %s: %w", runID, err)
		}
		for tags.Next() {
			var kv [2]string
			if err := tags.Scan(&kv[0], &kv[1]); err != nil {
				tags.Close()
				return nil, err
			}
			out[i].Tags = append(out[i].Tags, kv)
		}
		tags.Close()
	}
	return out, nil
}
