package gpu

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// System metrics: the samples of a run are also logged to the run under
// MLflow's own system-metric keys, so that the MLflow UI's "System
// metrics" section shows them:
//
//	system/gpu_0_utilization_percentage   utilisation, %
//	system/gpu_0_memory_usage_megabytes   memory used / 1e6 (MLflow's decimal MB)
//	system/gpu_0_memory_usage_percentage  memory used / total × 100
//	system/gpu_0_power_usage_watts        power draw, W
//	system/gpu_0_power_usage_percentage   power draw / enforced limit × 100
//	system/gpu_0_temperature_celsius      temperature, °C (not in MLflow)
//
// Values are rounded to one decimal, as MLflow rounds them. A GPU whose
// reading failed logs nothing for that sample.
//
// Multi-node jobs get a node segment, as MLflow's node_id does
// (system/node_1/gpu_0_...): when the job has several nodes (num_nodes > 1)
// every node, rank 0 included, is prefixed with node_<rank>; when the job
// size is unknown, only ranks above 0 are, so a single-node job keeps
// MLflow's plain keys. A multi-node job without ranks uses the node name.
//
// The step is the number of whole seconds between the run's start time and
// the sample (0 for samples before the start): monotonic in the sample
// time, the same on every replica and for every resend, and readable as
// "seconds into the run" on MLflow's step axis. MLflow's own monitor
// counts 0, 1, 2, ... instead, which needs state a server shared by
// replicas and agents that restart does not have. Resent samples give the
// same points, which the metric store keeps once.

// SystemMetricPrefix returns the key prefix of a node's system metrics.
func SystemMetricPrefix(l Labels) string {
	switch {
	case l.NodeRank >= 0 && (l.NumNodes > 1 || l.NodeRank > 0):
		return "system/node_" + strconv.Itoa(l.NodeRank) + "/"
	case l.NumNodes > 1:
		return "system/" + metricKeySegment(l.Node) + "/"
	}
	return "system/"
}

// metricKeySegment makes s usable as one segment of an MLflow metric key.
func metricKeySegment(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, s)
	if strings.Trim(s, ".") == "" {
		return "node"
	}
	return s
}

// SystemMetrics returns the system metrics of b's samples for a run that
// started at runStartMs.
func SystemMetrics(b *Batch, runStartMs int64) []tracking.Metric {
	prefix := SystemMetricPrefix(b.Labels)
	var out []tracking.Metric
	for _, smp := range b.Samples {
		step := max(0, (smp.TimestampMs-runStartMs)/1000)
		for i := range smp.GPUs {
			g := &smp.GPUs[i]
			if g.Err != "" {
				continue
			}
			base := prefix + "gpu_" + strconv.Itoa(g.Index) + "_"
			add := func(name string, v float64) {
				if IsMissing(v) {
					return
				}
				out = append(out, tracking.Metric{Key: base + name, Point: metrics.Point{
					Step: step, TimestampMs: smp.TimestampMs, Value: math.Round(v*10) / 10,
				}})
			}
			v := &g.Values
			add("utilization_percentage", v[FieldUtil])
			add("memory_usage_megabytes", v[FieldMemUsed]/1e6)
			if v[FieldMemTotal] > 0 {
				add("memory_usage_percentage", v[FieldMemUsed]/v[FieldMemTotal]*100)
			}
			add("power_usage_watts", v[FieldPower])
			if v[FieldPowerLimit] > 0 {
				add("power_usage_percentage", v[FieldPower]/v[FieldPowerLimit]*100)
			}
			add("temperature_celsius", v[FieldTemp])
		}
	}
	return out
}

// logSystemMetrics logs the batch's system metrics to its run, in
// LogBatch calls of at most BatchMetrics metrics (one call for a usual
// request).
func (s *Service) logSystemMetrics(ctx context.Context, b *Batch) error {
	start, err := s.runStart(ctx, b.RunID)
	if err != nil {
		return err
	}
	ms := SystemMetrics(b, start)
	for len(ms) > 0 {
		n := min(len(ms), s.opts.BatchMetrics)
		if err := s.opts.Runs.LogBatch(ctx, b.RunID, tracking.Batch{Metrics: ms[:n]}); err != nil {
			return err
		}
		ms = ms[n:]
	}
	return nil
}

// runStart returns a run's start time. Start times never change, so they
// are cached (in each replica, harmlessly).
func (s *Service) runStart(ctx context.Context, runID string) (int64, error) {
	s.mu.Lock()
	start, ok := s.runStarts[runID]
	s.mu.Unlock()
	if ok {
		return start, nil
	}
	r, err := s.opts.Runs.GetRun(ctx, runID)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if len(s.runStarts) >= 4096 {
		clear(s.runStarts)
	}
	s.runStarts[runID] = r.Info.StartTimeMs
	s.mu.Unlock()
	return r.Info.StartTimeMs, nil
}
