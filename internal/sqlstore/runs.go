package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"strconv"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking"
)

// runState is what a write needs to know about a run.
type runState struct {
	pk           int64
	experimentID int64
	stage        string
	points       int64
	keys         int64
	params       int64
	tags         int64
}

// activeRun loads the run's state for a write and refuses deleted runs.
func activeRun(tx *wtx, id string) (runState, error) {
	var st runState
	// Prepared once for the writer (tx.queryRow): every write to a run
	// starts here, a thousand ranks' progress a few hundred times a second.
	err := tx.queryRow(`SELECT run_pk, experiment_id, lifecycle_stage, metric_points, metric_keys, param_count, tag_count FROM runs WHERE run_id = ?`+tx.lock(), id).
		Scan(&st.pk, &st.experimentID, &st.stage, &st.points, &st.keys, &st.params, &st.tags)
	if errors.Is(err, sql.ErrNoRows) {
		return st, tracking.RunNotFound(id)
	}
	if err != nil {
		return st, sqlError(err, "get run")
	}
	return st, tracking.CheckRunActive(id, tracking.LifecycleStage(st.stage))
}

// CreateRun implements tracking.RunStore.
func (s *TrackingStore) CreateRun(ctx context.Context, r *tracking.Run) error {
	expID, err := parseExperimentID(r.Info.ExperimentID)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		if err := tx.checkExperimentActive(ctx, r.Info.ExperimentID, expID, tx.share()); err != nil {
			return err
		}
		i := r.Info
		var pk int64
		err := tx.QueryRowContext(ctx, `INSERT INTO runs
			(run_id, experiment_id, name, user_id, status, start_time, end_time, artifact_uri, lifecycle_stage, tag_count)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING run_pk`,
			i.RunID, expID, i.RunName, i.UserID, int32(i.Status), i.StartTimeMs, nullIfZero(i.EndTimeMs), i.ArtifactURI, string(i.LifecycleStage), len(r.Data.Tags)).Scan(&pk)
		if err != nil {
			return sqlError(err, "Run "+i.RunID+" already exists")
		}
		for _, t := range r.Data.Tags {
			if _, err := tx.ExecContext(ctx, `INSERT INTO tags (run_pk, key, value) VALUES (?, ?, ?) ON CONFLICT (run_pk, key) DO UPDATE SET value = excluded.value`, pk, t.Key, t.Value); err != nil {
				return sqlError(err, "set tag")
			}
		}
		return nil
	})
}

func nullIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func scanRun(sc interface{ Scan(...any) error }) (int64, *tracking.Run, error) {
	var pk, exp int64
	var status int32
	var end sql.NullInt64
	var stage string
	r := &tracking.Run{}
	i := &r.Info
	if err := sc.Scan(&pk, &i.RunID, &exp, &i.RunName, &i.UserID, &status, &i.StartTimeMs, &end, &i.ArtifactURI, &stage); err != nil {
		return 0, nil, err
	}
	i.ExperimentID = strconv.FormatInt(exp, 10)
	i.Status = tracking.RunStatus(status)
	i.EndTimeMs = end.Int64
	i.LifecycleStage = tracking.LifecycleStage(stage)
	return pk, r, nil
}

// GetRun implements tracking.RunStore.
func (s *TrackingStore) GetRun(ctx context.Context, id string) (*tracking.Run, error) {
	pk, r, err := scanRun(s.rdb.QueryRowContext(ctx, `SELECT `+sqlrow.RunCols+` FROM runs r WHERE r.run_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, tracking.RunNotFound(id)
	}
	if err != nil {
		return nil, sqlError(err, "get run")
	}
	if err := s.loadRunData(ctx, []int64{pk}, []*tracking.Run{r}); err != nil {
		return nil, err
	}
	return r, nil
}

// loadRunData fills Data, Inputs and Outputs of runs (pks[i] is runs[i]'s
// key) with one query per table.
func (s *db) loadRunData(ctx context.Context, pks []int64, runs []*tracking.Run) error {
	return s.loadRunDataIO(ctx, pks, runs, pks)
}

// loadRunDataIO is loadRunData looking for inputs and outputs only for the
// runs of ioPKs (those whose io_count is not 0): most runs have none, and
// each run looked for costs an index lookup in each of three tables.
func (s *db) loadRunDataIO(ctx context.Context, pks []int64, runs []*tracking.Run, ioPKs []int64) error {
	if len(pks) == 0 {
		return nil
	}
	byPK := make(map[int64]*tracking.Run, len(pks))
	args := make([]any, len(pks))
	for i, pk := range pks {
		byPK[pk] = runs[i]
		args[i] = pk
	}
	in := sqlrow.Placeholders(len(args))
	ioArgs, ioIn := args, in
	if len(ioPKs) != len(pks) {
		ioArgs = make([]any, len(ioPKs))
		for i, pk := range ioPKs {
			ioArgs[i] = pk
		}
		ioIn = sqlrow.Placeholders(len(ioArgs))
	}
	// Each part fills its own field of the runs, so the parts may run at
	// once, on connections of their own: a page of 1,000 runs takes some
	// 3,000 index lookups in each table.
	parts := []func() error{
		func() error {
			return s.loadPairs(ctx, "params", "run_pk", in, args, func(pk int64, key, value string) {
				r := byPK[pk]
				r.Data.Params = append(r.Data.Params, tracking.Param{Key: key, Value: value})
			})
		},
		func() error {
			return s.loadPairs(ctx, "tags", "run_pk", in, args, func(pk int64, key, value string) {
				r := byPK[pk]
				r.Data.Tags = append(r.Data.Tags, tracking.Tag{Key: key, Value: value})
			})
		},
	}
	// The latest metrics are most of the rows (a run may have thousands
	// of keys): a large page reads them in several queries at once.
	groups := 1
	if len(pks) >= parallelLoad {
		groups = min(runtime.GOMAXPROCS(0), 4, len(pks)/(parallelLoad/2))
	}
	for g := range groups {
		lo, hi := g*len(pks)/groups, (g+1)*len(pks)/groups
		part := args[lo:hi]
		parts = append(parts, func() error { return s.loadLatestMetrics(ctx, part, byPK) })
	}
	if len(ioPKs) > 0 {
		parts = append(parts, func() error { return s.loadRunIO(ctx, ioIn, ioArgs, byPK) })
	}
	if len(pks) < parallelLoad {
		for _, part := range parts {
			if err := part(); err != nil {
				return err
			}
		}
		return nil
	}
	errc := make(chan error, len(parts))
	for _, part := range parts {
		go func() { errc <- part() }()
	}
	var err error
	for range parts {
		err = errors.Join(err, <-errc)
	}
	return err
}

// loadLatestMetrics loads the latest value of every metric of the runs
// whose keys are args. Calls for disjoint runs may run at once: each run
// is appended to by one call only.
func (s *db) loadLatestMetrics(ctx context.Context, args []any, byPK map[int64]*tracking.Run) error {
	strs := sqlrow.Interner{}
	var key sql.RawBytes
	return s.queryEach(ctx, `SELECT run_pk, key, step, timestamp, value, is_nan, model_id, dataset_name, dataset_digest FROM metric_series WHERE run_pk IN (`+sqlrow.Placeholders(len(args))+`) ORDER BY run_pk, key`, args, func(rows *sql.Rows) error {
		pk, m, err := sqlrow.ScanLatestMetric(rows, strs, &key)
		if err != nil {
			return err
		}
		r := byPK[pk]
		r.Data.Metrics = append(r.Data.Metrics, m)
		return nil
	})
}

// parallelLoad is the number of runs from which loadRunDataIO runs its
// queries at once.
const parallelLoad = 64

// loadRunIO loads dataset inputs, model inputs and model outputs.
func (s *db) loadRunIO(ctx context.Context, in string, args []any, byPK map[int64]*tracking.Run) error {
	type key struct{ run, ds int64 }
	inputs := map[key]*tracking.DatasetInput{}
	if err := s.queryEach(ctx, `SELECT i.run_pk, d.dataset_pk, d.name, d.digest, d.source_type, d.source, d.schema, d.profile
		FROM run_inputs i JOIN datasets d ON d.dataset_pk = i.dataset_pk
		WHERE i.run_pk IN (`+in+`) ORDER BY i.run_pk, d.dataset_pk`, args, func(rows *sql.Rows) error {
		var k key
		var d tracking.Dataset
		if err := rows.Scan(&k.run, &k.ds, &d.Name, &d.Digest, &d.SourceType, &d.Source, &d.Schema, &d.Profile); err != nil {
			return err
		}
		r := byPK[k.run]
		r.Inputs.Datasets = append(r.Inputs.Datasets, tracking.DatasetInput{Dataset: d})
		inputs[k] = &r.Inputs.Datasets[len(r.Inputs.Datasets)-1]
		return nil
	}); err != nil {
		return err
	}
	if len(inputs) > 0 {
		if err := s.queryEach(ctx, `SELECT run_pk, dataset_pk, key, value FROM input_tags WHERE run_pk IN (`+in+`) ORDER BY run_pk, dataset_pk, key`, args, func(rows *sql.Rows) error {
			var k key
			var t tracking.Tag
			if err := rows.Scan(&k.run, &k.ds, &t.Key, &t.Value); err != nil {
				return err
			}
			// Pointers into r.Inputs.Datasets stay valid: appends are done.
			if di := inputs[k]; di != nil {
				di.Tags = append(di.Tags, t)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := s.queryEach(ctx, `SELECT run_pk, model_id FROM run_model_inputs WHERE run_pk IN (`+in+`) ORDER BY run_pk, model_id`, args, func(rows *sql.Rows) error {
		var pk int64
		var m tracking.ModelInput
		if err := rows.Scan(&pk, &m.ModelID); err != nil {
			return err
		}
		r := byPK[pk]
		r.Inputs.Models = append(r.Inputs.Models, m)
		return nil
	}); err != nil {
		return err
	}
	return s.queryEach(ctx, `SELECT run_pk, model_id, step FROM run_model_outputs WHERE run_pk IN (`+in+`) ORDER BY run_pk, step, model_id`, args, func(rows *sql.Rows) error {
		var pk int64
		var m tracking.ModelOutput
		if err := rows.Scan(&pk, &m.ModelID, &m.Step); err != nil {
			return err
		}
		r := byPK[pk]
		r.Outputs.Models = append(r.Outputs.Models, m)
		return nil
	})
}

// UpdateRun implements tracking.RunStore.
func (s *TrackingStore) UpdateRun(ctx context.Context, id string, u tracking.RunUpdate) (*tracking.RunInfo, error) {
	var info *tracking.RunInfo
	err := s.w.do(ctx, func(tx *wtx) error {
		st, err := activeRun(tx, id)
		if err != nil {
			return err
		}
		if u.Status != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ? WHERE run_pk = ?`, int32(*u.Status), st.pk); err != nil {
				return sqlError(err, "update run")
			}
		}
		if u.EndTimeMs != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET end_time = ? WHERE run_pk = ?`, nullIfZero(*u.EndTimeMs), st.pk); err != nil {
				return sqlError(err, "update run")
			}
		}
		if u.Name != nil {
			if err := setRunTag(tx, &st, tracking.Tag{Key: tracking.TagRunName, Value: *u.Name}, tracking.Limits{}); err != nil {
				return err
			}
		}
		_, r, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+sqlrow.RunCols+` FROM runs r WHERE r.run_pk = ?`, st.pk))
		if err != nil {
			return sqlError(err, "read run")
		}
		info = &r.Info
		return nil
	})
	return info, err
}

// SetRunLifecycle implements tracking.RunStore.
func (s *TrackingStore) SetRunLifecycle(ctx context.Context, id string, stage tracking.LifecycleStage, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var pk int64
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT run_pk, lifecycle_stage FROM runs WHERE run_id = ?`+tx.lock(), id).Scan(&pk, &cur)
		if errors.Is(err, sql.ErrNoRows) {
			return tracking.RunNotFound(id)
		}
		if err != nil {
			return sqlError(err, "get run")
		}
		var del any
		if stage == tracking.Deleted {
			del = nowMs
		}
		_, err = tx.ExecContext(ctx, `UPDATE runs SET lifecycle_stage = ?, deleted_time = ? WHERE run_pk = ?`, string(stage), del, pk)
		return sqlError(err, "update run")
	})
}

// DeleteTag implements tracking.RunStore.
func (s *TrackingStore) DeleteTag(ctx context.Context, runID, key string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		st, err := activeRun(tx, runID)
		if err != nil {
			return err
		}
		if err := tx.deleteOne(ctx, "delete tag", func() error { return tracking.RunTagNotFound(runID, key) },
			`DELETE FROM tags WHERE run_pk = ? AND key = ?`, st.pk, key); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE runs SET tag_count = tag_count - 1 WHERE run_pk = ?`, st.pk)
		return sqlError(err, "delete tag")
	})
}

// setRunTag upserts a tag, keeps the run's name in step with
// mlflow.runName and keeps TagsPerRun (zero limits check nothing).
func setRunTag(tx *wtx, st *runState, t tracking.Tag, limits tracking.Limits) error {
	res, err := tx.ExecContext(tx.ctx, `UPDATE tags SET value = ? WHERE run_pk = ? AND key = ?`, t.Value, st.pk, t.Key)
	if err != nil {
		return sqlError(err, "set tag")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if err := limits.CheckRun(tracking.RunUsage{Tags: st.tags}, tracking.RunUsage{Tags: 1}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(tx.ctx, `INSERT INTO tags (run_pk, key, value) VALUES (?, ?, ?)`, st.pk, t.Key, t.Value); err != nil {
			return sqlError(err, "set tag")
		}
		st.tags++
		if _, err := tx.ExecContext(tx.ctx, `UPDATE runs SET tag_count = ? WHERE run_pk = ?`, st.tags, st.pk); err != nil {
			return sqlError(err, "set tag")
		}
	}
	if t.Key == tracking.TagRunName {
		if _, err := tx.ExecContext(tx.ctx, `UPDATE runs SET name = ? WHERE run_pk = ?`, t.Value, st.pk); err != nil {
			return sqlError(err, "rename run")
		}
	}
	return nil
}

// LogInputs implements tracking.RunStore.
func (s *TrackingStore) LogInputs(ctx context.Context, runID string, datasets []tracking.DatasetInput, models []tracking.ModelInput) error {
	return s.w.do(ctx, func(tx *wtx) error {
		st, err := activeRun(tx, runID)
		if err != nil {
			return err
		}
		var added int64
		for _, in := range datasets {
			d := in.Dataset
			if _, err := tx.ExecContext(ctx, `INSERT INTO datasets (experiment_id, name, digest, source_type, source, schema, profile) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				st.experimentID, d.Name, d.Digest, d.SourceType, d.Source, d.Schema, d.Profile); err != nil {
				return sqlError(err, "record dataset")
			}
			var dpk int64
			if err := tx.QueryRowContext(ctx, `SELECT dataset_pk FROM datasets WHERE experiment_id = ? AND name = ? AND digest = ?`, st.experimentID, d.Name, d.Digest).Scan(&dpk); err != nil {
				return sqlError(err, "record dataset")
			}
			res, err := tx.ExecContext(ctx, `INSERT INTO run_inputs (run_pk, dataset_pk) VALUES (?, ?) ON CONFLICT DO NOTHING`, st.pk, dpk)
			if err != nil {
				return sqlError(err, "record input")
			}
			added += rowsAffected(res)
			for _, t := range in.Tags {
				if _, err := tx.ExecContext(ctx, `INSERT INTO input_tags (run_pk, dataset_pk, key, value) VALUES (?, ?, ?, ?) ON CONFLICT (run_pk, dataset_pk, key) DO UPDATE SET value = excluded.value`, st.pk, dpk, t.Key, t.Value); err != nil {
					return sqlError(err, "record input tag")
				}
			}
		}
		for _, m := range models {
			res, err := tx.ExecContext(ctx, `INSERT INTO run_model_inputs (run_pk, model_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, st.pk, m.ModelID)
			if err != nil {
				return sqlError(err, "record model input")
			}
			added += rowsAffected(res)
		}
		return addIOCount(tx, st.pk, added)
	})
}

// LogOutputs implements tracking.RunStore.
func (s *TrackingStore) LogOutputs(ctx context.Context, runID string, models []tracking.ModelOutput) error {
	return s.w.do(ctx, func(tx *wtx) error {
		st, err := activeRun(tx, runID)
		if err != nil {
			return err
		}
		var added int64
		for _, m := range models {
			res, err := tx.ExecContext(ctx, `INSERT INTO run_model_outputs (run_pk, model_id, step) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, st.pk, m.ModelID, m.Step)
			if err != nil {
				return sqlError(err, "record model output")
			}
			added += rowsAffected(res)
		}
		return addIOCount(tx, st.pk, added)
	})
}

func rowsAffected(res sql.Result) int64 {
	n, _ := res.RowsAffected()
	return n
}

// addIOCount counts rows added to run_inputs, run_model_inputs and
// run_model_outputs in the run's io_count, which lets a search skip
// looking for the inputs and outputs of runs that have none.
func addIOCount(tx *wtx, runPK, added int64) error {
	if added == 0 {
		return nil
	}
	_, err := tx.ExecContext(tx.ctx, `UPDATE runs SET io_count = io_count + ? WHERE run_pk = ?`, added, runPK)
	return sqlError(err, "count run inputs and outputs")
}

// latestOf returns the greater of two points by metrics.Compare.
func latestOf(a, b metrics.Point) metrics.Point {
	if metrics.Compare(a, b) >= 0 {
		return a
	}
	return b
}
