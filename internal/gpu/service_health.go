package gpu

import (
	"context"
	"errors"
	"slices"

	"github.com/sextant/sextant/internal/runevents"
)

// EventSink receives the health events of runs' GPUs; *runevents.Service
// implements it.
type EventSink interface {
	Append(ctx context.Context, runID string, evs []runevents.Event) ([]int64, error)
	List(ctx context.Context, q runevents.Query) (runevents.Page, error)
}

// healthLookback is how far back the sample before a batch is looked for:
// with a gap longer than this the GPU's state before is taken as unknown.
const healthLookback = 2 * 60 * 1000

// findHealth derives the health findings of a batch's samples (Health,
// each GPU against its previous sample on the node), in time order, and
// the model of each GPU by key.
func (s *Service) findHealth(ctx context.Context, b *Batch) ([]Finding, map[string]string, error) {
	samples := slices.Clone(b.Samples)
	slices.SortFunc(samples, func(x, y Sample) int { return int(x.TimestampMs - y.TimestampMs) })
	var prev *Sample
	err := s.store.Scan(ctx, Selection{Nodes: []string{b.Node}}, samples[0].TimestampMs-healthLookback, samples[0].TimestampMs, func(ns *NodeSample) error {
		c := ns.Sample
		c.GPUs = slices.Clone(ns.GPUs)
		prev = &c
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var fs []Finding
	model := map[string]string{}
	for i := range samples {
		cur := &samples[i]
		byKey := map[string]*GPU{}
		if prev != nil && cur.TimestampMs-prev.TimestampMs <= healthLookback {
			for j := range prev.GPUs {
				byKey[prev.GPUs[j].Key()] = &prev.GPUs[j]
			}
		}
		for j := range cur.GPUs {
			g := &cur.GPUs[j]
			if g.Name != "" {
				model[g.Key()] = g.Name
			} else if p := byKey[g.Key()]; p != nil && p.Name != "" {
				model[g.Key()] = p.Name
			}
			fs = append(fs, Health(b.Node, byKey[g.Key()], g, cur.TimestampMs)...)
		}
		prev = cur
	}
	return fs, model, nil
}

// recordHealth records a batch's health findings: in the node's health
// history (every batch whose samples are the node's: not a RunOnly one,
// which speaks for its run only), and as events of the batch's run.
func (s *Service) recordHealth(ctx context.Context, b *Batch) error {
	fs, model, err := s.findHealth(ctx, b)
	if err != nil || len(fs) == 0 {
		return err
	}
	var herr error
	if h := s.opts.Health.History; h != nil && !b.RunOnly {
		recs, ends := healthRecords(b.Node, b.RunID, fs, model)
		herr = h.AppendHealth(ctx, recs, ends)
	}
	if b.RunID != "" && s.opts.Events != nil {
		herr = errors.Join(herr, s.recordRunHealth(ctx, b, fs))
	}
	return herr
}

// recordRunHealth appends a run-linked batch's findings to the run.
// Throttle spans open when a GPU starts slowing down and are closed when
// it stops; a sample sent again gives the same keys, and never reopens a
// span closed since.
func (s *Service) recordRunHealth(ctx context.Context, b *Batch, fs []Finding) error {
	var evs []runevents.Event
	var ends []runevents.Event
	for _, f := range fs {
		if f.Kind == HealthThrottleEnd {
			ends = append(ends, f.Event)
		} else {
			evs = append(evs, f.Event)
		}
	}
	fromMs := b.Samples[0].TimestampMs
	for _, smp := range b.Samples {
		fromMs = min(fromMs, smp.TimestampMs)
	}
	if len(evs) == 0 && len(ends) == 0 {
		return nil
	}
	var starts int
	for _, e := range evs {
		if e.Kind == runevents.KindGPUThrottle {
			starts++
		}
	}
	throttle := []runevents.Kind{runevents.KindGPUThrottle}
	if starts > 0 {
		// A resend must not reopen a span closed since: the starts stored
		// already (they have the time of one of the batch's samples).
		known, err := runevents.ListAll(ctx, s.opts.Events.List, runevents.Query{RunID: b.RunID, Kinds: throttle, FromMs: fromMs})
		if err != nil {
			return err
		}
		stored := map[string]bool{}
		for _, k := range known {
			stored[k.Key] = true
		}
		evs = slices.DeleteFunc(evs, func(e runevents.Event) bool { return e.Kind == runevents.KindGPUThrottle && stored[e.Key] })
	}
	if len(ends) > 0 {
		open, err := runevents.ListAll(ctx, s.opts.Events.List, runevents.Query{RunID: b.RunID, Kinds: throttle, OpenOnly: true})
		if err != nil {
			return err
		}
		for _, end := range ends {
			for i := range open {
				k := &open[i]
				if k.Open && k.Node == end.Node && k.GPU == end.GPU && k.Attrs["uuid"] == end.Attrs["uuid"] && k.TimeMs <= end.TimeMs {
					k.Open, k.EndMs = false, end.TimeMs
					evs = append(evs, *k)
				}
			}
		}
	}
	for len(evs) > 0 {
		n := min(len(evs), 500)
		if _, err := s.opts.Events.Append(ctx, b.RunID, evs[:n]); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// RunUtilization implements runevents.Utilization: the highest
// utilisation of the run's GPUs (every node's) at each sample time in
// [fromMs, toMs), for the watcher of idle runs.
func (s *Service) RunUtilization(ctx context.Context, runID string, fromMs, toMs int64) ([]runevents.UtilPoint, error) {
	by := map[int64]float64{}
	err := s.store.Scan(ctx, Selection{RunID: runID}, fromMs, toMs, func(ns *NodeSample) error {
		for i := range ns.GPUs {
			u := ns.GPUs[i].Values[FieldUtil]
			if IsMissing(u) {
				continue
			}
			if v, ok := by[ns.TimestampMs]; !ok || u > v {
				by[ns.TimestampMs] = u
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]runevents.UtilPoint, 0, len(by))
	for ts, u := range by {
		out = append(out, runevents.UtilPoint{TimeMs: ts, MaxUtil: u})
	}
	slices.SortFunc(out, func(a, b runevents.UtilPoint) int { return int(a.TimeMs - b.TimeMs) })
	return out, nil
}

var _ runevents.Utilization = (*Service)(nil)
