package mlflowimport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// Options configure an import.
type Options struct {
	// Artifacts, when set, copies each run's artifacts; nil imports
	// metadata only.
	Artifacts *ArtifactCopier
	// SkipExisting leaves runs that already exist in Sextant (by id) alone,
	// so an interrupted import can be run again. Without it an existing run
	// is an error.
	SkipExisting bool
	// Progress, when set, is called after each run.
	Progress func(Progress)
	// Logger receives warnings (artifacts that could not be found).
	Logger *slog.Logger
}

// Progress reports how far an import has come.
type Progress struct {
	Experiment string
	RunID      string
	RunsDone   int
}

// Report says what an import did.
type Report struct {
	Experiments int `json:"experiments"`
	// Renumbered maps MLflow experiment ids that were taken in Sextant to
	// the ids their experiments got instead.
	Renumbered map[string]string `json:"renumbered,omitempty"`
	// Merged lists MLflow experiments whose name already existed in
	// Sextant; their runs went into the existing experiment.
	Merged        []string `json:"merged,omitempty"`
	Runs          int      `json:"runs"`
	SkippedRuns   int      `json:"skipped_runs"`
	Params        int      `json:"params"`
	Tags          int      `json:"tags"`
	MetricPoints  int64    `json:"metric_points"`
	DatasetInputs int      `json:"dataset_inputs"`
	ArtifactFiles int64    `json:"artifact_files"`
	ArtifactBytes int64    `json:"artifact_bytes"`
	// MissingArtifacts lists runs whose artifact directory was not found.
	MissingArtifacts []string `json:"missing_artifacts,omitempty"`
	// RefusedArtifacts lists runs whose artifact location lies outside the
	// directories the import may read (ArtifactCopier.Root and Allowed):
	// they were imported without their artifacts.
	RefusedArtifacts []string `json:"refused_artifacts,omitempty"`
}

// metricBatch is how many metric points go into one LogBatch.
const metricBatch = 10_000

// Import copies everything from src into dst. It keeps MLflow's run ids and
// experiment ids (an experiment id already taken in Sextant is renumbered,
// an experiment name already there is merged into), run names, users,
// statuses, times, lifecycle stages, params, tags, every metric point and
// dataset inputs. Runs are written one by one; an error stops the import
// with what was done so far in the report.
func Import(ctx context.Context, src *Source, dst tracking.Store, opts Options) (*Report, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Renumbered: map[string]string{}}
	exps, err := src.experiments(ctx)
	if err != nil {
		return rep, err
	}
	for _, me := range exps {
		expID, err := importExperiment(ctx, dst, me, rep)
		if err != nil {
			return rep, err
		}
		runs, err := src.runs(ctx, me.ID)
		if err != nil {
			return rep, err
		}
		// Runs go into an active experiment; a deleted one is deleted
		// again afterwards, which deletes its runs as MLflow did.
		for _, mr := range runs {
			if err := importRun(ctx, src, dst, expID, mr, opts, rep, log); err != nil {
				return rep, fmt.Errorf("run %s of experiment %q: %w", mr.ID, me.Name, err)
			}
			if opts.Progress != nil {
				opts.Progress(Progress{Experiment: me.Name, RunID: mr.ID, RunsDone: rep.Runs + rep.SkippedRuns})
			}
		}
		if me.LifecycleStage == string(tracking.Deleted) {
			got, err := dst.GetExperiment(ctx, expID)
			if err != nil {
				return rep, err
			}
			if got.LifecycleStage != tracking.Deleted {
				if err := dst.SetExperimentLifecycle(ctx, expID, tracking.Deleted, me.LastUpdateTime); err != nil {
					return rep, fmt.Errorf("delete experiment %q: %w", me.Name, err)
				}
			}
		}
	}
	if len(rep.Renumbered) == 0 {
		rep.Renumbered = nil
	}
	return rep, nil
}

// importExperiment finds or creates the Sextant experiment for me and
// returns its id. The experiment is active on return.
func importExperiment(ctx context.Context, dst tracking.Store, me *experiment, rep *Report) (string, error) {
	id := strconv.FormatInt(me.ID, 10)
	if existing, err := dst.GetExperimentByName(ctx, me.Name); err == nil {
		if existing.ID == id {
			rep.Experiments++ // imported before (a rerun); same experiment
		} else {
			rep.Merged = append(rep.Merged, me.Name)
		}
		if existing.LifecycleStage == tracking.Deleted {
			if err := dst.SetExperimentLifecycle(ctx, existing.ID, tracking.Active, existing.LastUpdateTimeMs); err != nil {
				return "", err
			}
		}
		for _, t := range me.Tags {
			if err := dst.SetExperimentTag(ctx, existing.ID, tracking.Tag{Key: t[0], Value: t[1]}); err != nil {
				return "", fmt.Errorf("tag experiment %q: %w", me.Name, err)
			}
		}
		return existing.ID, nil
	} else if errs.CodeOf(err) != errs.NotFound {
		return "", err
	}
	e := &tracking.Experiment{
		ID:               id,
		Name:             me.Name,
		LifecycleStage:   tracking.Active,
		CreationTimeMs:   me.CreationTime,
		LastUpdateTimeMs: me.LastUpdateTime,
	}
	for _, t := range me.Tags {
		e.Tags = append(e.Tags, tracking.Tag{Key: t[0], Value: t[1]})
	}
	// The artifacts are copied behind Sextant's proxy, so the location is
	// Sextant's, not MLflow's.
	loc := func(id string) string { return "mlflow-artifacts:/" + id }
	err := dst.CreateExperiment(ctx, e, loc)
	if errs.CodeOf(err) == errs.AlreadyExists {
		// The id is taken by another experiment: let Sextant pick one.
		e.ID, e.ArtifactLocation = "", ""
		if err = dst.CreateExperiment(ctx, e, loc); err == nil {
			rep.Renumbered[id] = e.ID
		}
	}
	if err != nil {
		return "", fmt.Errorf("create experiment %q: %w", me.Name, err)
	}
	rep.Experiments++
	return e.ID, nil
}

func importRun(ctx context.Context, src *Source, dst tracking.Store, expID string, mr *run, opts Options, rep *Report, log *slog.Logger) error {
	if err := tracking.ValidateRunID(mr.ID); err != nil {
		return err
	}
	status, ok := tracking.ParseRunStatus(mr.Status)
	if !ok {
		return errs.Errorf(errs.Invalid, "unknown run status %q", mr.Status)
	}
	if have, err := dst.GetRun(ctx, mr.ID); err == nil {
		switch {
		case !opts.SkipExisting:
			return errs.Errorf(errs.AlreadyExists, "run %s already exists in Sextant; rerun with --skip-existing to leave it alone", mr.ID)
		case have.Info.Status != status:
			// Runs are finished last; one still RUNNING here was cut off
			// by an interrupted import.
			return errs.Errorf(errs.Conflict, "run %s exists in Sextant as %s but is %s in MLflow: an earlier import of it was interrupted; import into a fresh data directory", mr.ID, have.Info.Status, status)
		}
		rep.SkippedRuns++
		return nil
	} else if errs.CodeOf(err) != errs.NotFound {
		return err
	}
	tags, err := src.keyValues(ctx, "tags", mr.ID)
	if err != nil {
		return err
	}
	params, err := src.keyValues(ctx, "params", mr.ID)
	if err != nil {
		return err
	}
	// A run is created RUNNING and finished last, so that a run that is
	// in Sextant with its final status has everything.
	r := &tracking.Run{Info: tracking.RunInfo{
		RunID:          mr.ID,
		RunName:        mr.Name,
		ExperimentID:   expID,
		UserID:         mr.UserID,
		Status:         tracking.StatusRunning,
		StartTimeMs:    mr.StartTime,
		ArtifactURI:    "mlflow-artifacts:/" + expID + "/" + mr.ID + "/artifacts",
		LifecycleStage: tracking.Active,
	}}
	for _, t := range tags {
		r.Data.Tags = append(r.Data.Tags, tracking.Tag{Key: t[0], Value: t[1]})
	}
	if err := dst.CreateRun(ctx, r); err != nil {
		return err
	}
	if len(params) > 0 {
		b := tracking.Batch{}
		for _, p := range params {
			b.Params = append(b.Params, tracking.Param{Key: p[0], Value: p[1]})
		}
		if err := dst.LogBatch(ctx, mr.ID, b); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	var points int64
	err = src.metrics(ctx, mr.ID, metricBatch, func(ps []point) error {
		b := tracking.Batch{Metrics: make([]tracking.Metric, len(ps))}
		for i, p := range ps {
			v := p.Value
			if p.IsNaN {
				v = math.NaN()
			}
			b.Metrics[i] = tracking.Metric{Key: p.Key, Point: metrics.Point{Step: p.Step, TimestampMs: p.Timestamp, Value: v}}
		}
		points += int64(len(ps))
		return dst.LogBatch(ctx, mr.ID, b)
	})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	inputs, err := src.datasetInputs(ctx, mr.ID)
	if err != nil {
		return err
	}
	if len(inputs) > 0 {
		ds := make([]tracking.DatasetInput, len(inputs))
		for i, in := range inputs {
			ds[i].Dataset = tracking.Dataset{Name: in.Name, Digest: in.Digest, SourceType: in.SourceType, Source: in.Source, Schema: in.Schema, Profile: in.Profile}
			for _, t := range in.Tags {
				ds[i].Tags = append(ds[i].Tags, tracking.Tag{Key: t[0], Value: t[1]})
			}
		}
		if err := dst.LogInputs(ctx, mr.ID, ds, nil); err != nil {
			return fmt.Errorf("dataset inputs: %w", err)
		}
	}
	if opts.Artifacts != nil {
		files, bytes, err := opts.Artifacts.CopyRun(ctx, mr.ArtifactURI, expID+"/"+mr.ID+"/artifacts")
		switch {
		case errors.Is(err, errRefusedArtifacts):
			rep.RefusedArtifacts = append(rep.RefusedArtifacts, mr.ID)
			log.Warn("artifact location outside the artifact directories named for the import: not read, run imported without its artifacts", "run", mr.ID, "artifact_uri", mr.ArtifactURI, "err", err)
		case errors.Is(err, errNoArtifacts):
			rep.MissingArtifacts = append(rep.MissingArtifacts, mr.ID)
			log.Warn("artifacts not found; run imported without them", "run", mr.ID, "artifact_uri", mr.ArtifactURI, "err", err)
		case err != nil:
			return fmt.Errorf("artifacts: %w", err)
		}
		rep.ArtifactFiles += files
		rep.ArtifactBytes += bytes
	}
	u := tracking.RunUpdate{Status: &status}
	if mr.EndTime > 0 {
		u.EndTimeMs = &mr.EndTime
	}
	if _, err := dst.UpdateRun(ctx, mr.ID, u); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	if mr.LifecycleStage == string(tracking.Deleted) {
		when := mr.DeletedTime
		if when == 0 {
			when = mr.EndTime
		}
		if err := dst.SetRunLifecycle(ctx, mr.ID, tracking.Deleted, when); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	rep.Runs++
	rep.Params += len(params)
	rep.Tags += len(tags)
	rep.MetricPoints += points
	rep.DatasetInputs += len(inputs)
	return nil
}
