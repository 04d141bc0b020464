package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/sqlstore/runsearch"
	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// registeredPK returns the key of a registered model.
func registeredPK(tx *wtx, name string) (int64, error) {
	var pk int64
	err := tx.QueryRowContext(tx.ctx, `SELECT rm_pk FROM registered_models WHERE name = ?`+tx.lock(), name).Scan(&pk)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, tracking.RegisteredModelNotFound(name)
	}
	return pk, sqlError(err, "get registered model")
}

func touchRegistered(tx *wtx, pk, nowMs int64) error {
	_, err := tx.ExecContext(tx.ctx, `UPDATE registered_models SET last_updated_time = ? WHERE rm_pk = ?`, nowMs, pk)
	return sqlError(err, "update registered model")
}

// CreateRegisteredModel implements tracking.RegistryStore.
func (s *TrackingStore) CreateRegisteredModel(ctx context.Context, m *tracking.RegisteredModel) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var pk int64
		err := tx.QueryRowContext(ctx, `INSERT INTO registered_models (name, description, user_id, creation_time, last_updated_time) VALUES (?, ?, ?, ?, ?) RETURNING rm_pk`,
			m.Name, m.Description, m.UserID, m.CreationTimeMs, m.LastUpdatedTimeMs).Scan(&pk)
		if err != nil {
			return sqlError(err, fmt.Sprintf("Registered Model (name=%s) already exists.", m.Name))
		}
		for _, t := range m.Tags {
			if _, err := tx.ExecContext(ctx, `INSERT INTO registered_model_tags (rm_pk, key, value) VALUES (?, ?, ?) ON CONFLICT (rm_pk, key) DO UPDATE SET value = excluded.value`, pk, t.Key, t.Value); err != nil {
				return sqlError(err, "set registered model tag")
			}
		}
		return nil
	})
}

const registeredCols = `rm.rm_pk, rm.name, rm.description, rm.user_id, rm.creation_time, rm.last_updated_time`

func scanRegistered(sc interface{ Scan(...any) error }) (int64, *tracking.RegisteredModel, error) {
	var pk int64
	m := &tracking.RegisteredModel{}
	err := sc.Scan(&pk, &m.Name, &m.Description, &m.UserID, &m.CreationTimeMs, &m.LastUpdatedTimeMs)
	return pk, m, err
}

// GetRegisteredModel implements tracking.RegistryStore.
func (s *TrackingStore) GetRegisteredModel(ctx context.Context, name string) (*tracking.RegisteredModel, error) {
	pk, m, err := scanRegistered(s.rdb.QueryRowContext(ctx, `SELECT `+registeredCols+` FROM registered_models rm WHERE rm.name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, tracking.RegisteredModelNotFound(name)
	}
	if err != nil {
		return nil, sqlError(err, "get registered model")
	}
	if err := s.loadRegisteredData(ctx, []int64{pk}, []*tracking.RegisteredModel{m}); err != nil {
		return nil, err
	}
	return m, nil
}

// loadRegisteredData fills tags, aliases and the latest version per stage.
func (s *db) loadRegisteredData(ctx context.Context, pks []int64, models []*tracking.RegisteredModel) error {
	if len(pks) == 0 {
		return nil
	}
	byPK := make(map[int64]*tracking.RegisteredModel, len(pks))
	args := make([]any, len(pks))
	for i, pk := range pks {
		byPK[pk] = models[i]
		args[i] = pk
	}
	in := sqlrow.Placeholders(len(args))
	if err := s.loadPairs(ctx, "registered_model_tags", "rm_pk", in, args, func(pk int64, key, value string) {
		byPK[pk].Tags = append(byPK[pk].Tags, tracking.Tag{Key: key, Value: value})
	}); err != nil {
		return err
	}
	if err := s.queryEach(ctx, `SELECT rm_pk, alias, version FROM registered_model_aliases WHERE rm_pk IN (`+in+`) ORDER BY rm_pk, alias`, args, func(rows *sql.Rows) error {
		var pk int64
		var a tracking.ModelAlias
		if err := rows.Scan(&pk, &a.Alias, &a.Version); err != nil {
			return err
		}
		byPK[pk].Aliases = append(byPK[pk].Aliases, a)
		return nil
	}); err != nil {
		return err
	}
	// The newest version of each stage.
	var vpk []int64
	var versions []*tracking.ModelVersion
	if err := s.queryEach(ctx, `SELECT `+versionCols+` FROM model_versions v JOIN registered_models r ON r.rm_pk = v.rm_pk
		WHERE v.rm_pk IN (`+in+`) AND v.version = (SELECT MAX(v2.version) FROM model_versions v2 WHERE v2.rm_pk = v.rm_pk AND v2.current_stage = v.current_stage)
		ORDER BY v.rm_pk, v.version`, args, func(rows *sql.Rows) error {
		pk, v, err := scanVersion(rows)
		if err != nil {
			return err
		}
		byPK[pk].LatestVersions = append(byPK[pk].LatestVersions, v)
		vpk = append(vpk, pk)
		versions = append(versions, v)
		return nil
	}); err != nil {
		return err
	}
	return s.loadVersionData(ctx, vpk, versions)
}

const versionCols = `v.rm_pk, r.name, v.version, v.creation_time, v.last_updated_time, v.user_id, v.current_stage, v.description, v.source, v.storage_location, v.run_id, v.run_link, v.model_id`

func scanVersion(sc interface{ Scan(...any) error }) (int64, *tracking.ModelVersion, error) {
	var pk, version int64
	v := &tracking.ModelVersion{}
	err := sc.Scan(&pk, &v.Name, &version, &v.CreationTimeMs, &v.LastUpdatedTimeMs, &v.UserID, &v.CurrentStage, &v.Description, &v.Source, &v.StorageLocation, &v.RunID, &v.RunLink, &v.ModelID)
	v.Version = strconv.FormatInt(version, 10)
	return pk, v, err
}

// loadVersionData fills tags and aliases of versions (rmPKs[i] is the
// registered model of versions[i]).
func (s *db) loadVersionData(ctx context.Context, rmPKs []int64, versions []*tracking.ModelVersion) error {
	if len(versions) == 0 {
		return nil
	}
	type key struct {
		pk      int64
		version string
	}
	byKey := make(map[key]*tracking.ModelVersion, len(versions))
	seen := map[int64]bool{}
	var args []any
	for i, v := range versions {
		byKey[key{rmPKs[i], v.Version}] = v
		if !seen[rmPKs[i]] {
			seen[rmPKs[i]] = true
			args = append(args, rmPKs[i])
		}
	}
	in := sqlrow.Placeholders(len(args))
	if err := s.queryEach(ctx, `SELECT rm_pk, version, key, value FROM model_version_tags WHERE rm_pk IN (`+in+`) ORDER BY rm_pk, version, key`, args, func(rows *sql.Rows) error {
		var k key
		var t tracking.Tag
		if err := rows.Scan(&k.pk, &k.version, &t.Key, &t.Value); err != nil {
			return err
		}
		if v := byKey[k]; v != nil {
			v.Tags = append(v.Tags, t)
		}
		return nil
	}); err != nil {
		return err
	}
	return s.queryEach(ctx, `SELECT rm_pk, version, alias FROM registered_model_aliases WHERE rm_pk IN (`+in+`) ORDER BY alias`, args, func(rows *sql.Rows) error {
		var k key
		var alias string
		if err := rows.Scan(&k.pk, &k.version, &alias); err != nil {
			return err
		}
		if v := byKey[k]; v != nil {
			v.Aliases = append(v.Aliases, alias)
		}
		return nil
	})
}

// UpdateRegisteredModel implements tracking.RegistryStore.
func (s *TrackingStore) UpdateRegisteredModel(ctx context.Context, name string, description *string, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if description != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE registered_models SET description = ? WHERE rm_pk = ?`, *description, pk); err != nil {
				return sqlError(err, "update registered model")
			}
		}
		return touchRegistered(tx, pk, nowMs)
	})
}

// RenameRegisteredModel implements tracking.RegistryStore.
func (s *TrackingStore) RenameRegisteredModel(ctx context.Context, name, newName string, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE registered_models SET name = ?, last_updated_time = ? WHERE rm_pk = ?`, newName, nowMs, pk); err != nil {
			return sqlError(err, fmt.Sprintf("Registered Model (name=%s) already exists.", newName))
		}
		return nil
	})
}

// DeleteRegisteredModel implements tracking.RegistryStore.
func (s *TrackingStore) DeleteRegisteredModel(ctx context.Context, name string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM model_version_tags WHERE rm_pk = ?`, `DELETE FROM model_versions WHERE rm_pk = ?`,
			`DELETE FROM registered_model_aliases WHERE rm_pk = ?`, `DELETE FROM registered_model_tags WHERE rm_pk = ?`,
			`DELETE FROM model_version_counters WHERE rm_pk = ?`, `DELETE FROM registered_models WHERE rm_pk = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, pk); err != nil {
				return sqlError(err, "delete registered model")
			}
		}
		return nil
	})
}

// SetRegisteredModelTag implements tracking.RegistryStore.
func (s *TrackingStore) SetRegisteredModelTag(ctx context.Context, name string, t tracking.Tag, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO registered_model_tags (rm_pk, key, value) VALUES (?, ?, ?)
			ON CONFLICT (rm_pk, key) DO UPDATE SET value = excluded.value`, pk, t.Key, t.Value); err != nil {
			return sqlError(err, "set registered model tag")
		}
		return touchRegistered(tx, pk, nowMs)
	})
}

// DeleteRegisteredModelTag implements tracking.RegistryStore.
func (s *TrackingStore) DeleteRegisteredModelTag(ctx context.Context, name, key string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		return tx.deleteOne(ctx, "delete registered model tag", func() error { return tracking.RegisteredModelTagNotFound(name, key) },
			`DELETE FROM registered_model_tags WHERE rm_pk = ? AND key = ?`, pk, key)
	})
}

func versionExists(tx *wtx, pk int64, name, version string) error {
	var one int
	err := tx.QueryRowContext(tx.ctx, `SELECT 1 FROM model_versions WHERE rm_pk = ? AND version = ?`, pk, version).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return tracking.ModelVersionNotFound(name, version)
	}
	return sqlError(err, "get model version")
}

// SetModelAlias implements tracking.RegistryStore.
func (s *TrackingStore) SetModelAlias(ctx context.Context, name, alias, version string, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if err := versionExists(tx, pk, name, version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO registered_model_aliases (rm_pk, alias, version) VALUES (?, ?, ?)
			ON CONFLICT (rm_pk, alias) DO UPDATE SET version = excluded.version`, pk, alias, version); err != nil {
			return sqlError(err, "set alias")
		}
		return touchRegistered(tx, pk, nowMs)
	})
}

// DeleteModelAlias implements tracking.RegistryStore.
func (s *TrackingStore) DeleteModelAlias(ctx context.Context, name, alias string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM registered_model_aliases WHERE rm_pk = ? AND alias = ?`, pk, alias)
		return sqlError(err, "delete alias")
	})
}

// CreateModelVersion implements tracking.RegistryStore.
func (s *TrackingStore) CreateModelVersion(ctx context.Context, v *tracking.ModelVersion) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, v.Name)
		if err != nil {
			return err
		}
		var last int64
		err = tx.QueryRowContext(ctx, `SELECT last_version FROM model_version_counters WHERE rm_pk = ?`, pk).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return sqlError(err, "read version counter")
		}
		next := last + 1
		if _, err := tx.ExecContext(ctx, `INSERT INTO model_version_counters (rm_pk, last_version) VALUES (?, ?) ON CONFLICT (rm_pk) DO UPDATE SET last_version = excluded.last_version`, pk, next); err != nil {
			return sqlError(err, "update version counter")
		}
		v.Version = strconv.FormatInt(next, 10)
		if _, err := tx.ExecContext(ctx, `INSERT INTO model_versions
			(rm_pk, version, creation_time, last_updated_time, user_id, current_stage, description, source, storage_location, run_id, run_link, model_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			pk, next, v.CreationTimeMs, v.LastUpdatedTimeMs, v.UserID, v.CurrentStage, v.Description, v.Source, v.StorageLocation, v.RunID, v.RunLink, v.ModelID); err != nil {
			return sqlError(err, "create model version")
		}
		for _, t := range v.Tags {
			if _, err := tx.ExecContext(ctx, `INSERT INTO model_version_tags (rm_pk, version, key, value) VALUES (?, ?, ?, ?) ON CONFLICT (rm_pk, version, key) DO UPDATE SET value = excluded.value`, pk, next, t.Key, t.Value); err != nil {
				return sqlError(err, "set model version tag")
			}
		}
		return touchRegistered(tx, pk, v.CreationTimeMs)
	})
}

// GetModelVersion implements tracking.RegistryStore.
func (s *TrackingStore) GetModelVersion(ctx context.Context, name, version string) (*tracking.ModelVersion, error) {
	pk, v, err := scanVersion(s.rdb.QueryRowContext(ctx, `SELECT `+versionCols+` FROM model_versions v JOIN registered_models r ON r.rm_pk = v.rm_pk WHERE r.name = ? AND v.version = ?`, name, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, tracking.ModelVersionNotFound(name, version)
	}
	if err != nil {
		return nil, sqlError(err, "get model version")
	}
	if err := s.loadVersionData(ctx, []int64{pk}, []*tracking.ModelVersion{v}); err != nil {
		return nil, err
	}
	return v, nil
}

// GetModelVersionByAlias implements tracking.RegistryStore.
func (s *TrackingStore) GetModelVersionByAlias(ctx context.Context, name, alias string) (*tracking.ModelVersion, error) {
	var version string
	err := s.rdb.QueryRowContext(ctx, `SELECT a.version FROM registered_model_aliases a JOIN registered_models r ON r.rm_pk = a.rm_pk WHERE r.name = ? AND a.alias = ?`, name, alias).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, tracking.ModelAliasNotFound(alias)
	}
	if err != nil {
		return nil, sqlError(err, "get alias")
	}
	return s.GetModelVersion(ctx, name, version)
}

// UpdateModelVersion implements tracking.RegistryStore.
func (s *TrackingStore) UpdateModelVersion(ctx context.Context, name, version string, description, stage *string, archiveOthers bool, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if err := versionExists(tx, pk, name, version); err != nil {
			return err
		}
		if description != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE model_versions SET description = ?, last_updated_time = ? WHERE rm_pk = ? AND version = ?`, *description, nowMs, pk, version); err != nil {
				return sqlError(err, "update model version")
			}
		}
		if stage != nil {
			if archiveOthers && (*stage == "Staging" || *stage == "Production") {
				if _, err := tx.ExecContext(ctx, `UPDATE model_versions SET current_stage = 'Archived', last_updated_time = ? WHERE rm_pk = ? AND version != ? AND current_stage = ?`, nowMs, pk, version, *stage); err != nil {
					return sqlError(err, "archive model versions")
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE model_versions SET current_stage = ?, last_updated_time = ? WHERE rm_pk = ? AND version = ?`, *stage, nowMs, pk, version); err != nil {
				return sqlError(err, "transition model version")
			}
		}
		return touchRegistered(tx, pk, nowMs)
	})
}

// DeleteModelVersion implements tracking.RegistryStore.
func (s *TrackingStore) DeleteModelVersion(ctx context.Context, name, version string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if err := versionExists(tx, pk, name, version); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM model_version_tags WHERE rm_pk = ? AND version = ?`,
			`DELETE FROM registered_model_aliases WHERE rm_pk = ? AND version = ?`,
			`DELETE FROM model_versions WHERE rm_pk = ? AND version = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, pk, version); err != nil {
				return sqlError(err, "delete model version")
			}
		}
		return nil
	})
}

// SetModelVersionTag implements tracking.RegistryStore.
func (s *TrackingStore) SetModelVersionTag(ctx context.Context, name, version string, t tracking.Tag, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		if err := versionExists(tx, pk, name, version); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO model_version_tags (rm_pk, version, key, value) VALUES (?, ?, ?, ?)
			ON CONFLICT (rm_pk, version, key) DO UPDATE SET value = excluded.value`, pk, version, t.Key, t.Value)
		return sqlError(err, "set model version tag")
	})
}

// DeleteModelVersionTag implements tracking.RegistryStore.
func (s *TrackingStore) DeleteModelVersionTag(ctx context.Context, name, version, key string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := registeredPK(tx, name)
		if err != nil {
			return err
		}
		return tx.deleteOne(ctx, "delete model version tag", func() error { return tracking.ModelVersionTagNotFound(name, version, key) },
			`DELETE FROM model_version_tags WHERE rm_pk = ? AND version = ? AND key = ?`, pk, version, key)
	})
}

// registryWhere renders registry filters. check is the search's rule of
// what may be searched; cols maps attribute names to columns; tagSub
// selects a tag's value for the row.
func registryWhere(f search.Filter, check func(search.Comparison) error, cols map[string]string, numeric map[string]bool, tagSub string) ([]string, []any, error) {
	var where []string
	var args []any
	for _, c := range f.Clauses {
		if err := check(c); err != nil {
			return nil, nil, err
		}
		var w string
		var a []any
		var err error
		switch {
		case c.Entity == search.Tag && c.Op == search.OpNe:
			// The registry counts a missing tag as different (the mlflow
			// client adds "tags.`mlflow.prompt.is_prompt` != 'true'" to
			// every registered-model search).
			w, a, err = "(("+tagSub+") IS NULL OR ("+tagSub+") != ?)", []any{c.Key, c.Key, c.Value.Str}, nil
		case c.Entity == search.Tag:
			w, a, err = runsearch.SideCompare(tagSub, c)
		case c.Entity == search.Attribute && cols[c.Key] != "" && numeric[c.Key]:
			w, a, err = runsearch.NumberCompare(cols[c.Key], c)
		case c.Entity == search.Attribute && cols[c.Key] != "":
			w, a, err = runsearch.StringCompare(cols[c.Key], c)
		default:
			err = fmt.Errorf("search the model registry: no SQL for %s", c)
		}
		if err != nil {
			return nil, nil, err
		}
		where = append(where, w)
		args = append(args, a...)
	}
	return where, args, nil
}

func registryOrder(keys []search.OrderKey, cols map[string]string, def []string) []string {
	var order []string
	for _, k := range keys {
		dir := " ASC"
		if k.Desc {
			dir = " DESC"
		}
		if c := cols[k.Key]; c != "" {
			order = append(order, c+dir)
		}
	}
	return append(order, def...)
}

// registrySearch is one of the model registry's two searches, registered
// models and model versions: what each may filter and order by, and how
// its rows are read. Both page by offset (registryPaging).
type registrySearch[T any] struct {
	// kind keeps the two searches' page tokens apart.
	kind string
	// check is the search's rule of what may be searched.
	check func(search.Comparison) error
	// cols maps the attributes that may be filtered and ordered by to
	// their columns; numeric marks those compared as numbers.
	cols    map[string]string
	numeric map[string]bool
	// tagSub selects a tag's value for the row (its key is the argument).
	tagSub string
	// from is the query up to its WHERE clause.
	from string
	// order follows the requested order: the default order and its tie
	// breaks.
	order []string
	// scan reads a row of from's columns; load fills what the rows of
	// the page do not hold (tags, aliases, versions).
	scan func(sc interface{ Scan(...any) error }) (int64, T, error)
	load func(s *db, ctx context.Context, pks []int64, items []T) error
}

var registeredModelSearch = registrySearch[*tracking.RegisteredModel]{
	kind:  "rm",
	check: search.CheckRegisteredModelClause,
	cols: map[string]string{
		search.AttrName: "rm.name", search.AttrCreationTimestamp: "rm.creation_time", search.AttrLastUpdatedTimestamp: "rm.last_updated_time",
	},
	numeric: map[string]bool{search.AttrCreationTimestamp: true, search.AttrLastUpdatedTimestamp: true},
	tagSub:  "SELECT t.value FROM registered_model_tags t WHERE t.rm_pk = rm.rm_pk AND t.key = ?",
	from:    `SELECT ` + registeredCols + ` FROM registered_models rm`,
	order:   []string{"rm.name ASC"},
	scan:    scanRegistered,
	load:    (*db).loadRegisteredData,
}

var modelVersionSearch = registrySearch[*tracking.ModelVersion]{
	kind:  "mv",
	check: search.CheckModelVersionClause,
	cols: map[string]string{
		search.AttrName: "r.name", search.AttrRunID: "v.run_id", search.AttrSourcePath: "v.source",
		search.AttrVersionNumber: "v.version", search.AttrModelID: "v.model_id",
		search.AttrCreationTimestamp: "v.creation_time", search.AttrLastUpdatedTimestamp: "v.last_updated_time",
	},
	numeric: map[string]bool{search.AttrVersionNumber: true, search.AttrCreationTimestamp: true, search.AttrLastUpdatedTimestamp: true},
	tagSub:  "SELECT t.value FROM model_version_tags t WHERE t.rm_pk = v.rm_pk AND t.version = v.version AND t.key = ?",
	from:    `SELECT ` + versionCols + ` FROM model_versions v JOIN registered_models r ON r.rm_pk = v.rm_pk`,
	order:   []string{"r.name ASC", "v.version DESC"},
	scan:    scanVersion,
	load:    (*db).loadVersionData,
}

// run returns one page of the search and the token of the next ("" when
// it is the last).
func (rs registrySearch[T]) run(ctx context.Context, s *db, q tracking.RegistryQuery) ([]T, string, error) {
	where, args, err := registryWhere(q.Filter, rs.check, rs.cols, rs.numeric, rs.tagSub)
	if err != nil {
		return nil, "", err
	}
	pg, err := registryPaging.page(q.PageToken, runsearch.QueryFingerprint(fmt.Sprint(rs.kind, q.Filter, q.OrderBy)), q.MaxResults)
	if err != nil {
		return nil, "", err
	}
	sqlText := rs.from
	if len(where) > 0 {
		sqlText += ` WHERE ` + strings.Join(where, " AND ")
	}
	sqlText += ` ORDER BY ` + strings.Join(registryOrder(q.OrderBy, rs.cols, rs.order), ", ") + ` LIMIT ? OFFSET ?`
	var out []T
	var pks []int64
	if err := s.queryEach(ctx, sqlText, append(args, pg.limitArgs()...), func(rows *sql.Rows) error {
		pk, item, err := rs.scan(rows)
		if err != nil {
			return err
		}
		out = append(out, item)
		pks = append(pks, pk)
		return nil
	}); err != nil {
		return nil, "", err
	}
	n, next := pg.cut(len(out))
	out, pks = out[:n], pks[:n]
	if err := rs.load(s, ctx, pks, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// SearchRegisteredModels implements tracking.RegistryStore.
func (s *TrackingStore) SearchRegisteredModels(ctx context.Context, q tracking.RegistryQuery) ([]*tracking.RegisteredModel, string, error) {
	return registeredModelSearch.run(ctx, s.db, q)
}

// SearchModelVersions implements tracking.RegistryStore.
func (s *TrackingStore) SearchModelVersions(ctx context.Context, q tracking.RegistryQuery) ([]*tracking.ModelVersion, string, error) {
	return modelVersionSearch.run(ctx, s.db, q)
}
