package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore/runsearch"
	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// CreateLoggedModel implements tracking.LoggedModelStore.
func (s *TrackingStore) CreateLoggedModel(ctx context.Context, m *tracking.LoggedModel) error {
	expID, err := parseExperimentID(m.ExperimentID)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		if err := tx.checkExperimentActive(ctx, m.ExperimentID, expID, tx.share()); err != nil {
			return err
		}
		var pk int64
		err := tx.QueryRowContext(ctx, `INSERT INTO logged_models
			(model_id, experiment_id, name, model_type, source_run_id, artifact_uri, status, status_message, creation_time, last_updated_time, lifecycle_stage)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active') RETURNING model_pk`,
			m.ID, expID, m.Name, m.ModelType, m.SourceRunID, m.ArtifactURI, int32(m.Status), m.StatusMessage, m.CreationTimeMs, m.LastUpdatedTimeMs).Scan(&pk)
		if err != nil {
			return sqlError(err, "Logged model "+m.ID+" already exists")
		}
		for _, t := range m.Tags {
			if _, err := tx.ExecContext(ctx, `INSERT INTO logged_model_tags (model_pk, key, value) VALUES (?, ?, ?) ON CONFLICT (model_pk, key) DO UPDATE SET value = excluded.value`, pk, t.Key, t.Value); err != nil {
				return sqlError(err, "set logged model tag")
			}
		}
		for _, p := range m.Params {
			if _, err := tx.ExecContext(ctx, `INSERT INTO logged_model_params (model_pk, key, value) VALUES (?, ?, ?) ON CONFLICT (model_pk, key) DO UPDATE SET value = excluded.value`, pk, p.Key, p.Value); err != nil {
				return sqlError(err, "log logged model param")
			}
		}
		return nil
	})
}

const loggedModelCols = `lm.model_pk, lm.model_id, lm.experiment_id, lm.name, lm.model_type, lm.source_run_id, lm.artifact_uri, lm.status, lm.status_message, lm.creation_time, lm.last_updated_time, lm.lifecycle_stage`

func scanLoggedModel(sc interface{ Scan(...any) error }) (int64, *tracking.LoggedModel, error) {
	var pk, exp int64
	var status int32
	var stage string
	m := &tracking.LoggedModel{}
	err := sc.Scan(&pk, &m.ID, &exp, &m.Name, &m.ModelType, &m.SourceRunID, &m.ArtifactURI, &status, &m.StatusMessage, &m.CreationTimeMs, &m.LastUpdatedTimeMs, &stage)
	m.ExperimentID = strconv.FormatInt(exp, 10)
	m.Status = tracking.LoggedModelStatus(status)
	m.LifecycleStage = tracking.LifecycleStage(stage)
	return pk, m, err
}

// GetLoggedModel implements tracking.LoggedModelStore.
func (s *TrackingStore) GetLoggedModel(ctx context.Context, id string, allowDeleted bool) (*tracking.LoggedModel, error) {
	pk, m, err := scanLoggedModel(s.rdb.QueryRowContext(ctx, `SELECT `+loggedModelCols+` FROM logged_models lm WHERE lm.model_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !allowDeleted && m.LifecycleStage != tracking.Active) {
		return nil, tracking.LoggedModelNotFound(id)
	}
	if err != nil {
		return nil, sqlError(err, "get logged model")
	}
	if err := s.loadLoggedModelData(ctx, []int64{pk}, []*tracking.LoggedModel{m}); err != nil {
		return nil, err
	}
	return m, nil
}

// loadLoggedModelData fills tags, params, metrics and registrations.
func (s *db) loadLoggedModelData(ctx context.Context, pks []int64, models []*tracking.LoggedModel) error {
	if len(pks) == 0 {
		return nil
	}
	byPK := make(map[int64]*tracking.LoggedModel, len(pks))
	byID := make(map[string]*tracking.LoggedModel, len(pks))
	args := make([]any, len(pks))
	ids := make([]any, len(pks))
	for i, pk := range pks {
		byPK[pk] = models[i]
		byID[models[i].ID] = models[i]
		args[i] = pk
		ids[i] = models[i].ID
	}
	in := sqlrow.Placeholders(len(args))
	if err := s.loadPairs(ctx, "logged_model_tags", "model_pk", in, args, func(pk int64, key, value string) {
		byPK[pk].Tags = append(byPK[pk].Tags, tracking.Tag{Key: key, Value: value})
	}); err != nil {
		return err
	}
	if err := s.loadPairs(ctx, "logged_model_params", "model_pk", in, args, func(pk int64, key, value string) {
		byPK[pk].Params = append(byPK[pk].Params, tracking.Param{Key: key, Value: value})
	}); err != nil {
		return err
	}
	if err := s.queryEach(ctx, `SELECT model_id, key, dataset_name, dataset_digest, run_id, step, timestamp, value, is_nan FROM logged_model_metrics WHERE model_id IN (`+in+`) ORDER BY model_id, key`, ids, func(rows *sql.Rows) error {
		var id string
		var m tracking.MetricWithRun
		var v sql.NullFloat64
		var isNaN bool
		if err := rows.Scan(&id, &m.Key, &m.DatasetName, &m.DatasetDigest, &m.RunID, &m.Step, &m.TimestampMs, &v, &isNaN); err != nil {
			return err
		}
		m.Value = v.Float64
		if isNaN {
			m.Value = math.NaN()
		}
		m.ModelID = id
		byID[id].Metrics = append(byID[id].Metrics, m)
		return nil
	}); err != nil {
		return err
	}
	return s.queryEach(ctx, `SELECT v.model_id, r.name, v.version FROM model_versions v JOIN registered_models r ON r.rm_pk = v.rm_pk WHERE v.model_id IN (`+in+`) ORDER BY r.name, v.version`, ids, func(rows *sql.Rows) error {
		var id string
		var reg tracking.ModelRegistration
		if err := rows.Scan(&id, &reg.Name, &reg.Version); err != nil {
			return err
		}
		byID[id].Registrations = append(byID[id].Registrations, reg)
		return nil
	})
}

// activeModel returns the pk of a model that is not deleted.
func activeModel(tx *wtx, id string) (int64, error) {
	var pk int64
	var stage string
	err := tx.QueryRowContext(tx.ctx, `SELECT model_pk, lifecycle_stage FROM logged_models WHERE model_id = ?`+tx.lock(), id).Scan(&pk, &stage)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && stage != string(tracking.Active)) {
		return 0, tracking.LoggedModelNotFound(id)
	}
	return pk, sqlError(err, "get logged model")
}

func touchModel(tx *wtx, pk, nowMs int64) error {
	_, err := tx.ExecContext(tx.ctx, `UPDATE logged_models SET last_updated_time = ? WHERE model_pk = ?`, nowMs, pk)
	return sqlError(err, "update logged model")
}

// UpdateLoggedModelStatus implements tracking.LoggedModelStore.
func (s *TrackingStore) UpdateLoggedModelStatus(ctx context.Context, id string, status tracking.LoggedModelStatus, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := activeModel(tx, id)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE logged_models SET status = ?, last_updated_time = ? WHERE model_pk = ?`, int32(status), nowMs, pk)
		return sqlError(err, "finalize logged model")
	})
}

// DeleteLoggedModel implements tracking.LoggedModelStore.
func (s *TrackingStore) DeleteLoggedModel(ctx context.Context, id string, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := activeModel(tx, id)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE logged_models SET lifecycle_stage = 'deleted', last_updated_time = ? WHERE model_pk = ?`, nowMs, pk)
		return sqlError(err, "delete logged model")
	})
}

// SetLoggedModelTags implements tracking.LoggedModelStore.
func (s *TrackingStore) SetLoggedModelTags(ctx context.Context, id string, tags []tracking.Tag, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := activeModel(tx, id)
		if err != nil {
			return err
		}
		for _, t := range tags {
			if _, err := tx.ExecContext(ctx, `INSERT INTO logged_model_tags (model_pk, key, value) VALUES (?, ?, ?)
				ON CONFLICT (model_pk, key) DO UPDATE SET value = excluded.value`, pk, t.Key, t.Value); err != nil {
				return sqlError(err, "set logged model tag")
			}
		}
		return touchModel(tx, pk, nowMs)
	})
}

// DeleteLoggedModelTag implements tracking.LoggedModelStore.
func (s *TrackingStore) DeleteLoggedModelTag(ctx context.Context, id, key string, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := activeModel(tx, id)
		if err != nil {
			return err
		}
		if err := tx.deleteOne(ctx, "delete logged model tag", func() error { return tracking.LoggedModelTagNotFound(id, key) },
			`DELETE FROM logged_model_tags WHERE model_pk = ? AND key = ?`, pk, key); err != nil {
			return err
		}
		return touchModel(tx, pk, nowMs)
	})
}

// LogLoggedModelParams implements tracking.LoggedModelStore.
func (s *TrackingStore) LogLoggedModelParams(ctx context.Context, id string, params []tracking.Param, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		pk, err := activeModel(tx, id)
		if err != nil {
			return err
		}
		for _, p := range params {
			var old string
			err := tx.QueryRowContext(ctx, `SELECT value FROM logged_model_params WHERE model_pk = ? AND key = ?`, pk, p.Key).Scan(&old)
			switch {
			case err == nil:
				if err := tracking.CheckModelParam(id, p.Key, old, p.Value); err != nil {
					return err
				}
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return sqlError(err, "read logged model param")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO logged_model_params (model_pk, key, value) VALUES (?, ?, ?)`, pk, p.Key, p.Value); err != nil {
				return sqlError(err, "log logged model param")
			}
		}
		return touchModel(tx, pk, nowMs)
	})
}

// recordModelMetrics keeps the latest point of each (model, key, dataset)
// for metrics logged with a model id.
func recordModelMetrics(tx *wtx, runID string, slices []*slice) error {
	for _, sl := range slices {
		if sl.ctx.ModelID == "" {
			continue
		}
		l := sl.sent
		var step, ts int64
		var v sql.NullFloat64
		var isNaN bool
		err := tx.queryRow(`SELECT step, timestamp, value, is_nan FROM logged_model_metrics WHERE model_id = ? AND key = ? AND dataset_name = ? AND dataset_digest = ?`,
			sl.ctx.ModelID, sl.key, sl.ctx.DatasetName, sl.ctx.DatasetDigest).Scan(&step, &ts, &v, &isNaN)
		if err == nil {
			old := metrics.Point{Step: step, TimestampMs: ts, Value: v.Float64}
			if isNaN {
				old.Value = math.NaN()
			}
			if metrics.Compare(l, old) <= 0 {
				continue
			}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return sqlError(err, "read model metric")
		}
		if _, err := tx.exec(`INSERT INTO logged_model_metrics (model_id, key, dataset_name, dataset_digest, run_id, step, timestamp, value, is_nan)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (model_id, key, dataset_name, dataset_digest) DO UPDATE SET run_id = excluded.run_id, step = excluded.step, timestamp = excluded.timestamp, value = excluded.value, is_nan = excluded.is_nan`, sl.ctx.ModelID, sl.key, sl.ctx.DatasetName, sl.ctx.DatasetDigest, runID,
			l.Step, l.TimestampMs, nanToNull(l.Value), math.IsNaN(l.Value)); err != nil {
			return sqlError(err, "record model metric")
		}
	}
	return nil
}

var loggedModelAttrCols = map[string]string{
	search.AttrName: "lm.name", search.AttrModelID: "lm.model_id", search.AttrModelType: "lm.model_type",
	search.AttrSourceRunID: "lm.source_run_id", search.AttrCreationTimestamp: "lm.creation_time",
	search.AttrLastUpdatedTimestamp: "lm.last_updated_time",
}

const modelStatusExpr = `(CASE lm.status WHEN 1 THEN 'LOGGED_MODEL_PENDING' WHEN 2 THEN 'LOGGED_MODEL_READY' WHEN 3 THEN 'LOGGED_MODEL_UPLOAD_FAILED' ELSE 'LOGGED_MODEL_STATUS_UNSPECIFIED' END)`

// SearchLoggedModels implements tracking.LoggedModelStore.
func (s *TrackingStore) SearchLoggedModels(ctx context.Context, q tracking.LoggedModelQuery) (tracking.LoggedModelPage, error) {
	var exps []any
	for _, id := range q.ExperimentIDs {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			exps = append(exps, n)
		}
	}
	if len(exps) == 0 {
		return tracking.LoggedModelPage{}, nil
	}
	where := []string{"lm.experiment_id IN (" + sqlrow.Placeholders(len(exps)) + ")", "lm.lifecycle_stage = 'active'"}
	args := append([]any{}, exps...)
	// Metric filters, optionally restricted to datasets.
	dsWhere, dsArgs := "", []any(nil)
	if len(q.Datasets) > 0 {
		var ors []string
		for _, d := range q.Datasets {
			if d.Digest != "" {
				ors = append(ors, "(mm.dataset_name = ? AND mm.dataset_digest = ?)")
				dsArgs = append(dsArgs, d.Name, d.Digest)
			} else {
				ors = append(ors, "mm.dataset_name = ?")
				dsArgs = append(dsArgs, d.Name)
			}
		}
		dsWhere = " AND (" + strings.Join(ors, " OR ") + ")"
	}
	// Datasets without a metric filter select the models with a metric on
	// one of them (with one, they restrict its metrics instead).
	if dsWhere != "" && !slices.ContainsFunc(q.Filter.Clauses, func(c search.Comparison) bool { return c.Entity == search.Metric }) {
		where = append(where, "EXISTS (SELECT 1 FROM logged_model_metrics mm WHERE mm.model_id = lm.model_id"+dsWhere+")")
		args = append(args, dsArgs...)
	}
	for _, c := range q.Filter.Clauses {
		if err := search.CheckLoggedModelClause(c); err != nil {
			return tracking.LoggedModelPage{}, err
		}
		var w string
		var a []any
		var err error
		switch c.Entity {
		case search.Metric:
			w, a, err = runsearch.NumberCompare("mm.value", c)
			if err == nil {
				w = "EXISTS (SELECT 1 FROM logged_model_metrics mm WHERE mm.model_id = lm.model_id AND mm.key = ? AND " + w + dsWhere + ")"
				a = append(append([]any{c.Key}, a...), dsArgs...)
			}
		case search.Param:
			w, a, err = runsearch.SideCompare("SELECT p.value FROM logged_model_params p WHERE p.model_pk = lm.model_pk AND p.key = ?", c)
		case search.Tag:
			w, a, err = runsearch.SideCompare("SELECT t.value FROM logged_model_tags t WHERE t.model_pk = lm.model_pk AND t.key = ?", c)
		case search.Attribute:
			switch {
			case c.Key == search.AttrStatus:
				w, a, err = runsearch.StringCompare(modelStatusExpr, c)
			case c.Key == search.AttrCreationTimestamp || c.Key == search.AttrLastUpdatedTimestamp:
				w, a, err = runsearch.NumberCompare(loggedModelAttrCols[c.Key], c)
			case loggedModelAttrCols[c.Key] != "":
				w, a, err = runsearch.StringCompare(loggedModelAttrCols[c.Key], c)
			default:
				err = fmt.Errorf("search logged models: no SQL for %s", c)
			}
		default:
			err = fmt.Errorf("search logged models: no SQL for %s", c)
		}
		if err != nil {
			return tracking.LoggedModelPage{}, err
		}
		where = append(where, w)
		args = append(args, a...)
	}
	var order []string
	var orderArgs []any
	for _, o := range q.OrderBy {
		dir := " DESC"
		if o.Ascending {
			dir = " ASC"
		}
		if key, ok := strings.CutPrefix(o.Field, "metrics."); ok {
			sub := "(SELECT mm.value FROM logged_model_metrics mm WHERE mm.model_id = lm.model_id AND mm.key = ?"
			subArgs := []any{key}
			if o.DatasetName != "" {
				sub += " AND mm.dataset_name = ?"
				subArgs = append(subArgs, o.DatasetName)
				if o.DatasetDigest != "" {
					sub += " AND mm.dataset_digest = ?"
					subArgs = append(subArgs, o.DatasetDigest)
				}
			}
			sub += " ORDER BY mm.step DESC, mm.timestamp DESC LIMIT 1)"
			// Models without the metric sort last in either direction.
			order = append(order, sub+" IS NULL", sub+dir)
			orderArgs = append(append(orderArgs, subArgs...), subArgs...)
			continue
		}
		col := loggedModelAttrCols[o.Field]
		if o.Field == search.AttrStatus {
			col = "lm.status"
		}
		order = append(order, col+dir)
	}
	order = append(order, "lm.creation_time DESC", "lm.model_id ASC")
	fingerprint := runsearch.QueryFingerprint(fmt.Sprint(q.ExperimentIDs, q.Filter, q.Datasets, q.OrderBy))
	pg, err := loggedModelPaging.page(q.PageToken, fingerprint, q.MaxResults)
	if err != nil {
		return tracking.LoggedModelPage{}, err
	}
	sqlText := `SELECT ` + loggedModelCols + ` FROM logged_models lm WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + strings.Join(order, ", ") + ` LIMIT ? OFFSET ?`
	all := append(append(args, orderArgs...), pg.limitArgs()...)
	var page tracking.LoggedModelPage
	var pks []int64
	if err := s.queryEach(ctx, sqlText, all, func(rows *sql.Rows) error {
		pk, m, err := scanLoggedModel(rows)
		if err != nil {
			return err
		}
		page.Models = append(page.Models, m)
		pks = append(pks, pk)
		return nil
	}); err != nil {
		return tracking.LoggedModelPage{}, err
	}
	var n int
	n, page.NextPageToken = pg.cut(len(page.Models))
	page.Models, pks = page.Models[:n], pks[:n]
	if err := s.loadLoggedModelData(ctx, pks, page.Models); err != nil {
		return tracking.LoggedModelPage{}, err
	}
	return page, nil
}
