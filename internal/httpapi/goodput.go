package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/goodput"
	"github.com/sextant/sextant/internal/progress"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

// Throughput, MFU and goodput of a run (GET /api/2.0/sextant/goodput),
// computed by internal/goodput from the run's events and its progress
// metrics. Reading needs CAN_READ on the run's experiment, as progress.
// docs/run.md defines the numbers; internal/wire/goodput.go holds the shape.

const goodputPrefix = "/sextant/goodput"

// goodputMaxSteps caps the steps read per rank and field.
const goodputMaxSteps = 1_000_000

func (s *Server) registerGoodputRoutes() {
	if s.opts.Events == nil {
		return
	}
	for _, p := range []string{"/api/2.0", "/ajax-api/2.0"} {
		s.handle("GET", p+goodputPrefix, ReadExperiment, s.getGoodput)
	}
}

func (s *Server) getGoodput(w http.ResponseWriter, r *http.Request) error {
	qs, err := parseQuery(r, "run_id")
	if err != nil {
		return err
	}
	runID := qs.str("run_id")
	if err := s.allowRunID(r, runID); err != nil {
		return err
	}
	ctx := r.Context()
	run, err := s.tr.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	if s.opts.GPUHours.Now != nil {
		now = s.opts.GPUHours.Now().UnixMilli()
	}
	evs, err := s.opts.Events.All(ctx, runevents.Query{RunID: runID,
		Kinds: append([]runevents.Kind{runevents.KindAttempt, runevents.KindCheckpointSave, runevents.KindIdle}, goodput.HungKinds...)})
	if err != nil {
		return err
	}
	in := goodput.Input{Running: run.Info.Status == tracking.StatusRunning, StartMs: run.Info.StartTimeMs, EndMs: run.Info.EndTimeMs,
		NowMs: now, Events: evs, Params: map[string]string{}, Peaks: s.opts.GPUPeaks}
	for _, p := range run.Data.Params {
		in.Params[p.Key] = p.Value
	}
	for _, m := range run.Data.Metrics {
		if rank, f, ok := progress.ParseKey(m.Key); ok && f == progress.FieldStepTime {
			steps, err := s.rankSteps(ctx, runID, rank)
			if err != nil {
				return err
			}
			in.Steps = append(in.Steps, steps...)
		}
	}
	return writeJSON(w, wire.GoodputToJSON(runID, goodput.Compute(in)))
}

// rankSteps reads every progress report of one rank: its step times,
// joined by (step, time) with its data waits, samples and tokens.
func (s *Server) rankSteps(ctx context.Context, runID string, rank int) ([]goodput.Step, error) {
	type at struct{ step, ms int64 }
	read := func(field string, each func(step, ms int64, v float64)) error {
		tok, n := "", 0
		for {
			page, err := s.tr.MetricHistory(ctx, runID, progress.Key(rank, field), 0, tok)
			if errs.CodeOf(err) == errs.NotFound {
				return nil
			} else if err != nil {
				return err
			}
			for _, p := range page.Points {
				each(p.Step, p.TimestampMs, p.Value)
			}
			n += len(page.Points)
			if tok = page.NextPageToken; tok == "" || n >= goodputMaxSteps {
				return nil
			}
		}
	}
	var out []goodput.Step
	idx := map[at]int{}
	err := read(progress.FieldStepTime, func(step, ms int64, v float64) {
		idx[at{step, ms}] = len(out)
		out = append(out, goodput.Step{Rank: rank, Step: step, EndMs: ms, StepTimeS: v, DataWaitS: -1, Samples: -1, Tokens: -1})
	})
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		set  func(*goodput.Step, float64)
	}{
		{progress.FieldDataWait, func(s *goodput.Step, v float64) { s.DataWaitS = v }},
		{progress.FieldSamples, func(s *goodput.Step, v float64) { s.Samples = v }},
		{progress.FieldTokens, func(s *goodput.Step, v float64) { s.Tokens = v }},
	} {
		if err := read(f.name, func(step, ms int64, v float64) {
			if i, ok := idx[at{step, ms}]; ok {
				f.set(&out[i], v)
			}
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
