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

func parseExperimentID(id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return 0, tracking.ExperimentNotFound(id)
	}
	return n, nil
}

// EnsureDefaultExperiment creates e with id 0 unless an experiment with id
// 0 exists.
func (s *TrackingStore) EnsureDefaultExperiment(ctx context.Context, e *tracking.Experiment) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO experiments
			(experiment_id, name, artifact_location, lifecycle_stage, creation_time, last_update_time)
			VALUES (0, ?, ?, 'active', ?, ?) ON CONFLICT DO NOTHING`, e.Name, e.ArtifactLocation, e.CreationTimeMs, e.LastUpdateTimeMs)
		return sqlError(err, "create default experiment")
	})
}

// CreateExperiment implements tracking.ExperimentStore.
func (s *TrackingStore) CreateExperiment(ctx context.Context, e *tracking.Experiment, location func(id string) string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var stage string
		err := tx.QueryRowContext(ctx, `SELECT lifecycle_stage FROM experiments WHERE name = ?`, e.Name).Scan(&stage)
		switch {
		case err == nil:
			return tracking.ExperimentExists(e.Name, stage == string(tracking.Deleted))
		case !errors.Is(err, sql.ErrNoRows):
			return sqlError(err, "look up experiment")
		}
		var n int64
		if e.ID != "" {
			// An importer keeps the source's ids.
			if n, err = parseExperimentID(e.ID); err != nil {
				return err
			}
			var one int
			switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM experiments WHERE experiment_id = ?`, n).Scan(&one); {
			case err == nil:
				return tracking.ExperimentIDExists(e.ID)
			case !errors.Is(err, sql.ErrNoRows):
				return sqlError(err, "look up experiment")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO experiments
				(experiment_id, name, artifact_location, lifecycle_stage, creation_time, last_update_time)
				VALUES (?, ?, ?, ?, ?, ?)`, n, e.Name, e.ArtifactLocation, string(e.LifecycleStage), e.CreationTimeMs, e.LastUpdateTimeMs); err != nil {
				return sqlError(err, fmt.Sprintf("Experiment '%s' already exists.", e.Name))
			}
			if err := s.bumpSequence(tx, "experiments", "experiment_id"); err != nil {
				return err
			}
		} else {
			err := tx.QueryRowContext(ctx, `INSERT INTO experiments
				(name, artifact_location, lifecycle_stage, creation_time, last_update_time)
				VALUES (?, ?, ?, ?, ?) RETURNING experiment_id`, e.Name, e.ArtifactLocation, string(e.LifecycleStage), e.CreationTimeMs, e.LastUpdateTimeMs).Scan(&n)
			if err != nil {
				return sqlError(err, fmt.Sprintf("Experiment '%s' already exists.", e.Name))
			}
		}
		e.ID = strconv.FormatInt(n, 10)
		if e.ArtifactLocation == "" {
			e.ArtifactLocation = location(e.ID)
			if _, err := tx.ExecContext(ctx, `UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?`, e.ArtifactLocation, n); err != nil {
				return sqlError(err, "set artifact location")
			}
		}
		for _, t := range e.Tags {
			if _, err := tx.ExecContext(ctx, `INSERT INTO experiment_tags (experiment_id, key, value) VALUES (?, ?, ?) ON CONFLICT (experiment_id, key) DO UPDATE SET value = excluded.value`, n, t.Key, t.Value); err != nil {
				return sqlError(err, "set experiment tag")
			}
		}
		return nil
	})
}

const experimentCols = `experiment_id, name, artifact_location, lifecycle_stage, creation_time, last_update_time`

func scanExperiment(sc interface{ Scan(...any) error }) (*tracking.Experiment, error) {
	var e tracking.Experiment
	var id int64
	var stage string
	if err := sc.Scan(&id, &e.Name, &e.ArtifactLocation, &stage, &e.CreationTimeMs, &e.LastUpdateTimeMs); err != nil {
		return nil, err
	}
	e.ID = strconv.FormatInt(id, 10)
	e.LifecycleStage = tracking.LifecycleStage(stage)
	return &e, nil
}

// GetExperiment implements tracking.ExperimentStore.
func (s *TrackingStore) GetExperiment(ctx context.Context, id string) (*tracking.Experiment, error) {
	n, err := parseExperimentID(id)
	if err != nil {
		return nil, err
	}
	return s.getExperiment(ctx, "experiment_id", n, "get experiment", func() error { return tracking.ExperimentNotFound(id) })
}

// GetExperimentByName implements tracking.ExperimentStore.
func (s *TrackingStore) GetExperimentByName(ctx context.Context, name string) (*tracking.Experiment, error) {
	return s.getExperiment(ctx, "name", name, "get experiment by name", func() error { return tracking.ExperimentNameNotFound(name) })
}

// getExperiment reads the experiment whose column col is v, with its
// tags: notFound() when there is none, a failure wrapped as what.
func (s *TrackingStore) getExperiment(ctx context.Context, col string, v any, what string, notFound func() error) (*tracking.Experiment, error) {
	e, err := scanExperiment(s.rdb.QueryRowContext(ctx, `SELECT `+experimentCols+` FROM experiments WHERE `+col+` = ?`, v))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound()
	}
	if err != nil {
		return nil, sqlError(err, what)
	}
	if err := s.loadExperimentTags(ctx, []*tracking.Experiment{e}); err != nil {
		return nil, err
	}
	return e, nil
}

func (s *db) loadExperimentTags(ctx context.Context, exps []*tracking.Experiment) error {
	if len(exps) == 0 {
		return nil
	}
	byID := make(map[string]*tracking.Experiment, len(exps))
	args := make([]any, len(exps))
	for i, e := range exps {
		byID[e.ID] = e
		args[i] = e.ID
	}
	return s.loadPairs(ctx, "experiment_tags", "experiment_id", sqlrow.Placeholders(len(args)), args, func(id int64, key, value string) {
		if e := byID[strconv.FormatInt(id, 10)]; e != nil {
			e.Tags = append(e.Tags, tracking.Tag{Key: key, Value: value})
		}
	})
}

// RenameExperiment implements tracking.ExperimentStore.
func (s *TrackingStore) RenameExperiment(ctx context.Context, id, name string, nowMs int64) error {
	n, err := parseExperimentID(id)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		var stage, old string
		err := tx.QueryRowContext(ctx, `SELECT lifecycle_stage, name FROM experiments WHERE experiment_id = ?`+tx.lock(), n).Scan(&stage, &old)
		if errors.Is(err, sql.ErrNoRows) {
			return tracking.ExperimentNotFound(id)
		}
		if err != nil {
			return sqlError(err, "get experiment")
		}
		if err := tracking.CheckExperimentRename(id, tracking.LifecycleStage(stage)); err != nil {
			return err
		}
		if old == name {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE experiments SET name = ?, last_update_time = ? WHERE experiment_id = ?`, name, nowMs, n)
		return sqlError(err, fmt.Sprintf("Experiment '%s' already exists.", name))
	})
}

// SetExperimentLifecycle implements tracking.ExperimentStore.
func (s *TrackingStore) SetExperimentLifecycle(ctx context.Context, id string, stage tracking.LifecycleStage, nowMs int64) error {
	n, err := parseExperimentID(id)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT lifecycle_stage FROM experiments WHERE experiment_id = ?`+tx.lock(), n).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return tracking.ExperimentNotFound(id)
		}
		if err != nil {
			return sqlError(err, "get experiment")
		}
		if err := tracking.CheckExperimentLifecycle(id, tracking.LifecycleStage(cur), stage); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE experiments SET lifecycle_stage = ?, last_update_time = ? WHERE experiment_id = ?`, string(stage), nowMs, n); err != nil {
			return sqlError(err, "update experiment")
		}
		// Deleting an experiment deletes its runs; restoring restores them.
		var delTime any
		if stage == tracking.Deleted {
			delTime = nowMs
		}
		_, err = tx.ExecContext(ctx, `UPDATE runs SET lifecycle_stage = ?, deleted_time = ? WHERE experiment_id = ?`, string(stage), delTime, n)
		return sqlError(err, "update runs of experiment")
	})
}

// checkExperimentActive checks inside t that experiment n (id as the
// client wrote it) exists and is active. lock ends the SELECT: tx.share()
// where what t adds must keep the experiment from being deleted
// meanwhile, or "".
func (t *wtx) checkExperimentActive(ctx context.Context, id string, n int64, lock string) error {
	var stage string
	err := t.QueryRowContext(ctx, `SELECT lifecycle_stage FROM experiments WHERE experiment_id = ?`+lock, n).Scan(&stage)
	if errors.Is(err, sql.ErrNoRows) {
		return tracking.ExperimentNotFound(id)
	}
	if err != nil {
		return sqlError(err, "get experiment")
	}
	return tracking.CheckExperimentActive(id, tracking.LifecycleStage(stage))
}

// SetExperimentTag implements tracking.ExperimentStore.
func (s *TrackingStore) SetExperimentTag(ctx context.Context, id string, tag tracking.Tag) error {
	n, err := parseExperimentID(id)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		if err := tx.checkExperimentActive(ctx, id, n, ""); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO experiment_tags (experiment_id, key, value) VALUES (?, ?, ?)
			ON CONFLICT (experiment_id, key) DO UPDATE SET value = excluded.value`, n, tag.Key, tag.Value)
		return sqlError(err, "set experiment tag")
	})
}

// DeleteExperimentTag implements tracking.ExperimentStore.
func (s *TrackingStore) DeleteExperimentTag(ctx context.Context, id, key string) error {
	n, err := parseExperimentID(id)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		if err := tx.checkExperimentActive(ctx, id, n, ""); err != nil {
			return err
		}
		return tx.deleteOne(ctx, "delete experiment tag", func() error { return tracking.ExperimentTagNotFound(id, key) },
			`DELETE FROM experiment_tags WHERE experiment_id = ? AND key = ?`, n, key)
	})
}

// SearchExperiments implements tracking.ExperimentStore.
func (s *TrackingStore) SearchExperiments(ctx context.Context, q tracking.ExperimentQuery) (tracking.ExperimentPage, error) {
	var where []string
	var args []any
	switch q.ViewType {
	case tracking.ActiveOnly:
		where = append(where, `e.lifecycle_stage = 'active'`)
	case tracking.DeletedOnly:
		where = append(where, `e.lifecycle_stage = 'deleted'`)
	}
	if q.OnlyIDs != nil {
		if len(q.OnlyIDs) == 0 {
			return tracking.ExperimentPage{}, nil
		}
		ids := make([]any, 0, len(q.OnlyIDs))
		for _, id := range q.OnlyIDs {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				ids = append(ids, n)
			}
		}
		where = append(where, `e.experiment_id IN (`+sqlrow.Placeholders(len(ids))+`)`)
		args = append(args, ids...)
	}
	for _, c := range q.Filter.Clauses {
		w, a, err := experimentClause(c)
		if err != nil {
			return tracking.ExperimentPage{}, err
		}
		where = append(where, w)
		args = append(args, a...)
	}
	var order []string
	seenID := false
	for _, k := range q.OrderBy {
		if err := search.CheckExperimentOrderKey(k); err != nil {
			return tracking.ExperimentPage{}, err
		}
		col := map[string]string{
			search.AttrName: "e.name", search.AttrExperimentID: "e.experiment_id",
			search.AttrCreationTime: "e.creation_time", search.AttrLastUpdateTime: "e.last_update_time",
		}[k.Key]
		if col == "" {
			return tracking.ExperimentPage{}, fmt.Errorf("search experiments: no SQL to order by %s", k)
		}
		if k.Key == search.AttrExperimentID {
			seenID = true
		}
		dir := "ASC"
		if k.Desc {
			dir = "DESC"
		}
		order = append(order, col+" "+dir)
	}
	if len(order) == 0 {
		order = append(order, "e.creation_time DESC")
	}
	if !seenID {
		order = append(order, "e.experiment_id ASC")
	}
	fingerprint := runsearch.QueryFingerprint(fmt.Sprint(q.ViewType, q.Filter, q.OrderBy, len(q.OnlyIDs)))
	pg, err := experimentPaging.page(q.PageToken, fingerprint, q.MaxResults)
	if err != nil {
		return tracking.ExperimentPage{}, err
	}
	sqlText := `SELECT ` + prefixCols("e.", experimentCols) + ` FROM experiments e`
	if len(where) > 0 {
		sqlText += ` WHERE ` + strings.Join(where, " AND ")
	}
	sqlText += ` ORDER BY ` + strings.Join(order, ", ") + ` LIMIT ? OFFSET ?`
	args = append(args, pg.limitArgs()...)
	rows, err := s.rdb.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return tracking.ExperimentPage{}, sqlError(err, "search experiments")
	}
	defer rows.Close()
	var page tracking.ExperimentPage
	for rows.Next() {
		e, err := scanExperiment(rows)
		if err != nil {
			return tracking.ExperimentPage{}, sqlError(err, "scan experiment")
		}
		page.Experiments = append(page.Experiments, e)
	}
	if err := rows.Err(); err != nil {
		return tracking.ExperimentPage{}, sqlError(err, "search experiments")
	}
	var n int
	n, page.NextPageToken = pg.cut(len(page.Experiments))
	page.Experiments = page.Experiments[:n]
	if err := s.loadExperimentTags(ctx, page.Experiments); err != nil {
		return tracking.ExperimentPage{}, err
	}
	return page, nil
}

func prefixCols(prefix, cols string) string {
	parts := strings.Split(cols, ", ")
	for i := range parts {
		parts[i] = prefix + parts[i]
	}
	return strings.Join(parts, ", ")
}

func experimentClause(c search.Comparison) (string, []any, error) {
	if err := search.CheckExperimentClause(c); err != nil {
		return "", nil, err
	}
	switch c.Entity {
	case search.Attribute:
		switch c.Key {
		case search.AttrName:
			return runsearch.StringCompare("e.name", c)
		case search.AttrExperimentID:
			return runsearch.StringCompare("CAST(e.experiment_id AS TEXT)", c)
		case search.AttrCreationTime:
			return runsearch.NumberCompare("e.creation_time", c)
		case search.AttrLastUpdateTime:
			return runsearch.NumberCompare("e.last_update_time", c)
		}
	case search.Tag:
		return runsearch.SideCompare(`SELECT t.value FROM experiment_tags t WHERE t.experiment_id = e.experiment_id AND t.key = ?`, c)
	}
	return "", nil, fmt.Errorf("search experiments: no SQL for %s", c)
}
