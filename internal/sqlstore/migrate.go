package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Each part of the store (tracking, and later run logs, GPU samples,
// workspace) keeps its own ordered list of migrations, so that parts can
// grow their schemas independently. A migration is applied once, in its
// own transaction, and recorded in schema_migrations by (component,
// version). Never edit a migration that has shipped: append a new one.
//
// components lists the parts in the order their migrations run; a part's
// tables may only refer to the tables of parts before it.
var components = []struct {
	name       string
	migrations []string
}{
	{"tracking", trackingMigrations},
	{"reads", readsMigrations},
	{"server", serverMigrations},
	{"runlogs", runlogMigrations},
	{"gpu", gpuMigrations},
	{"workspace", workspaceMigrations},
	{"nodetokens", nodeTokenMigrations},
	{"volumes", volumeMigrations},
	{"events", eventMigrations},
}

// pgMigrations holds, by component and version, the PostgreSQL text of
// the migrations that pgDDL cannot translate (triggers); every other
// migration is its SQLite text through pgDDL.
var pgMigrations = map[string]map[int]string{
	"workspace": {2: workspaceCommentPurgePG},
}

// migrationText returns version v of component c's migrations for the
// store's database.
func (s *db) migrationText(c string, v int, sqlite string) string {
	if pg, ok := pgMigrations[c][v]; ok && s.pg {
		return pg
	}
	return s.ddl(sqlite)
}

func (s *db) migrate(ctx context.Context) error {
	unlock, err := s.lockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// Read the versions first and write only when a migration is pending:
	// a server restarted on a full disk must open its up-to-date database
	// without writing.
	have, err := s.appliedVersions(ctx)
	if err != nil {
		// A new database: there is no schema_migrations yet.
		if _, cerr := s.wdb.ExecContext(ctx, s.ddl(`CREATE TABLE IF NOT EXISTS schema_migrations (
		component  TEXT    NOT NULL,
		version    INTEGER NOT NULL,
		applied_at INTEGER NOT NULL,
		PRIMARY KEY (component, version))`)); cerr != nil {
			return fmt.Errorf("create schema_migrations: %w", sqlError(cerr, "create schema_migrations"))
		}
		if have, err = s.appliedVersions(ctx); err != nil {
			return fmt.Errorf("read schema versions: %w", err)
		}
	}
	for _, c := range components {
		if have[c.name] > len(c.migrations) {
			return fmt.Errorf("the %s schema is at version %d, newer than this binary knows (%d): upgrade sextant", c.name, have[c.name], len(c.migrations))
		}
		for v := have[c.name] + 1; v <= len(c.migrations); v++ {
			if err := s.applyMigration(ctx, c.name, v, s.migrationText(c.name, v, c.migrations[v-1])); err != nil {
				return err
			}
		}
	}
	return nil
}

// appliedVersions reads the applied version of each part of the schema
// on the write connection (which sees its own migrations at once).
func (s *db) appliedVersions(ctx context.Context) (map[string]int, error) {
	rows, err := s.wdb.QueryContext(ctx, `SELECT component, MAX(version) FROM schema_migrations GROUP BY component`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]int{}
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return nil, err
		}
		have[c] = v
	}
	return have, rows.Err()
}

func (s *db) applyMigration(ctx context.Context, component string, v int, sqlText string) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("apply %s migration %d: %w", component, v, sqlError(err, "begin"))
	}
	if _, err := tx.ExecContext(ctx, sqlText); err != nil {
		return errors.Join(fmt.Errorf("apply %s migration %d: %w", component, v, sqlError(err, "apply")), tx.Rollback())
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)`, component, v, time.Now().UnixMilli()); err != nil {
		return errors.Join(fmt.Errorf("record %s migration %d: %w", component, v, sqlError(err, "record")), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s migration %d: %w", component, v, sqlError(err, "commit"))
	}
	s.log.Info("applied migration", "schema", component, "version", v)
	return nil
}

// SchemaVersion is the migration version of one part of the schema.
type SchemaVersion struct {
	Component string
	Version   int
}

// SchemaVersions lists the applied version of each part of the schema.
func (s *Store) SchemaVersions(ctx context.Context) ([]SchemaVersion, error) {
	var out []SchemaVersion
	for _, c := range components {
		var v int
		if err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?`, c.name).Scan(&v); err != nil {
			return nil, sqlError(err, "read schema versions")
		}
		out = append(out, SchemaVersion{c.name, v})
	}
	return out, nil
}
