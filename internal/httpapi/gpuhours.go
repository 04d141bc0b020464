package httpapi

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/wire"
)

// GPU-hours and cost (GET /api/2.0/sextant/gpu-hours), of runs, an
// experiment or a folder, computed from the attempts `sextant run`
// records on runs (internal/gpuhours, docs/gpu.md).
//
// Access: CAN_READ on the experiment of every run named, or on the
// experiment named; a folder's totals count only the experiments under it
// the caller can read.

// GPUHoursOptions configure the GPU-hours route and metrics.
type GPUHoursOptions struct {
	// Store reads the runs' attempts; nil leaves the route out.
	Store gpuhours.Store
	// Prices price a GPU-hour by GPU model; nil means no cost is
	// reported.
	Prices *gpuhours.Prices
	// Now is the present, for attempts still running; nil means
	// time.Now.
	Now func() time.Time
}

const gpuHoursPath = "/api/2.0/sextant/gpu-hours"

func (s *Server) registerGPUHoursRoutes() {
	o := s.opts.GPUHours
	if o.Store == nil {
		return
	}
	s.handle("GET", gpuHoursPath, ReadExperiment, s.gpuHours)
	if s.opts.Metrics != nil {
		// A second server on the same registry (tests) reports through the
		// first one's collector, which reads the same store.
		_ = s.opts.Metrics.Register(&gpuHoursCollector{o: o})
	}
}

func (o GPUHoursOptions) nowMs() int64 {
	if o.Now != nil {
		return o.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

func (s *Server) gpuHours(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "run_id", "experiment_id", "folder")
	if err != nil {
		return err
	}
	var runIDs []string
	for _, v := range q.list("run_id") {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				runIDs = append(runIDs, id)
			}
		}
	}
	expID, folder := q.str("experiment_id"), q.str("folder")
	given := 0
	for _, b := range []bool{len(runIDs) > 0, expID != "", folder != ""} {
		if b {
			given++
		}
	}
	if given != 1 {
		return invalid("give one of run_id (repeatable), experiment_id or folder")
	}
	if len(runIDs) > 1000 {
		return invalid("at most 1000 run ids, got %d", len(runIDs))
	}
	o := s.opts.GPUHours
	now := o.nowMs()
	ctx := r.Context()
	price := func(u gpuhours.Usage) *float64 {
		if o.Prices == nil {
			return nil
		}
		c := u.Cost
		return &c
	}
	out := wire.GPUHoursResponse{Prices: o.Prices.String()}
	switch {
	case len(runIDs) > 0:
		exps := make(map[string]string, len(runIDs))
		for _, id := range runIDs {
			if err := s.allowRunID(r, id); err != nil {
				return err
			}
			exps[id], _ = s.runExperiment(ctx, id)
		}
		runs, err := o.Store.Runs(ctx, gpuhours.Query{RunIDs: runIDs})
		if err != nil {
			return err
		}
		byID := make(map[string]gpuhours.Run, len(runs))
		for _, run := range runs {
			byID[run.RunID] = run
		}
		var total gpuhours.Usage
		for _, id := range runIDs {
			run, ok := byID[id]
			if !ok {
				run = gpuhours.Run{RunID: id, ExperimentID: exps[id]}
			}
			u := gpuhours.Compute(run, o.Prices, now)
			total.Add(u)
			out.Runs = append(out.Runs, runJSON(run, u, price))
		}
		out.GPUHours, out.Cost = total.GPUHours, price(total)
	case expID != "":
		if err := s.allowExperimentID(r, expID); err != nil {
			return err
		}
		runs, err := o.Store.Runs(ctx, gpuhours.Query{ExperimentIDs: []string{expID}})
		if err != nil {
			return err
		}
		var total gpuhours.Usage
		for _, run := range runs {
			u := gpuhours.Compute(run, o.Prices, now)
			total.Add(u)
			out.Runs = append(out.Runs, runJSON(run, u, price))
		}
		out.GPUHours, out.Cost = total.GPUHours, price(total)
	default:
		prefix, err := gpuhours.Folder(folder)
		if err != nil {
			return err
		}
		all, err := o.Store.Experiments(ctx)
		if err != nil {
			return err
		}
		names := map[string]string{}
		var ids []string
		for _, x := range all {
			if gpuhours.InFolder(x.Name, prefix) {
				ids = append(ids, x.ID)
				names[x.ID] = x.Name
			}
		}
		ids = s.readableExperiments(ctx, ids)
		// The totals hold only what the caller can read: nothing to refuse.
		checked(r)
		runs, err := o.Store.Runs(ctx, gpuhours.Query{ExperimentIDs: ids})
		if err != nil {
			return err
		}
		per := map[string]*wire.GPUHoursExperiment{}
		usage := map[string]*gpuhours.Usage{}
		for _, id := range ids {
			per[id] = &wire.GPUHoursExperiment{ExperimentID: id, Name: names[id]}
			usage[id] = &gpuhours.Usage{}
		}
		var total gpuhours.Usage
		for _, run := range runs {
			x, ok := per[run.ExperimentID]
			if !ok {
				continue
			}
			u := gpuhours.Compute(run, o.Prices, now)
			usage[run.ExperimentID].Add(u)
			total.Add(u)
			x.Runs++
		}
		for _, id := range ids {
			x := per[id]
			x.GPUHours, x.Cost = usage[id].GPUHours, price(*usage[id])
			out.Experiments = append(out.Experiments, *x)
		}
		sort.SliceStable(out.Experiments, func(i, j int) bool { return out.Experiments[i].Name < out.Experiments[j].Name })
		out.GPUHours, out.Cost = total.GPUHours, price(total)
	}
	return writeJSON(w, out)
}

func runJSON(run gpuhours.Run, u gpuhours.Usage, price func(gpuhours.Usage) *float64) wire.GPUHoursRun {
	rj := wire.GPUHoursRun{RunID: run.RunID, ExperimentID: run.ExperimentID, GPUHours: u.GPUHours, Cost: price(u), Attempts: []wire.GPUHoursAttempt{}}
	for _, a := range u.Attempts {
		aj := wire.GPUHoursAttempt{Node: a.Node, StartMs: a.StartMs, EndMs: a.EndMs, Open: a.Open, GPUs: a.GPUs, Model: a.Model, Status: a.Status, GPUHours: a.GPUHours}
		if a.Priced {
			p, c := a.Price, a.Cost
			aj.Price, aj.Cost = &p, &c
		}
		rj.Attempts = append(rj.Attempts, aj)
	}
	return rj
}

// gpuHoursCollector reports the GPU-seconds (and cost) of every active run,
// summed by GPU model, computed at each scrape: no per-run or
// per-experiment labels, so the series stay few whatever the runs.
type gpuHoursCollector struct{ o GPUHoursOptions }

var (
	gpuHoursDesc = prometheus.NewDesc("sextant_gpu_held_seconds",
		"GPU-seconds (GPU-hours × 3600) held by the attempts of every run that is not deleted, by GPU model (docs/gpu.md).", []string{"model"}, nil)
	gpuCostDesc = prometheus.NewDesc("sextant_gpu_cost",
		"Cost of those GPU-hours at --gpu-hour-price, by GPU model; absent without prices.", []string{"model"}, nil)
	gpusHeldDesc = prometheus.NewDesc("sextant_gpus_held",
		"GPUs held now by the running attempts of running runs, by GPU model.", []string{"model"}, nil)
)

// Describe implements prometheus.Collector.
func (c *gpuHoursCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- gpuHoursDesc
	ch <- gpuCostDesc
	ch <- gpusHeldDesc
}

// Collect implements prometheus.Collector.
func (c *gpuHoursCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runs, err := c.o.Store.Runs(ctx, gpuhours.Query{All: true})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(gpuHoursDesc, err)
		return
	}
	now := c.o.nowMs()
	secs, cost, held := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, run := range runs {
		for _, a := range gpuhours.Compute(run, c.o.Prices, now).Attempts {
			if a.GPUs == 0 {
				continue
			}
			secs[a.Model] += a.GPUHours * 3600
			if a.Priced {
				cost[a.Model] += a.Cost
			}
			if a.Open && run.Running && a.EndMs == now {
				held[a.Model] += float64(a.GPUs)
			}
		}
	}
	for m, v := range secs {
		ch <- prometheus.MustNewConstMetric(gpuHoursDesc, prometheus.GaugeValue, v, m)
	}
	if c.o.Prices != nil {
		for m, v := range cost {
			ch <- prometheus.MustNewConstMetric(gpuCostDesc, prometheus.GaugeValue, v, m)
		}
	}
	for m, v := range held {
		ch <- prometheus.MustNewConstMetric(gpusHeldDesc, prometheus.GaugeValue, v, m)
	}
}
