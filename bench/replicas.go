package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// benchReplicas measures ingest with one and with two server replicas on
// one PostgreSQL database, beside one server on SQLite, in the same run:
// the same 32 concurrent runs, each sending 1000-metric log-batch requests,
// spread over the replicas; then reads of what they ingested (downsampled
// curves, history pages, metric-ordered searches) from 8 clients spread
// the same way. Everything (PostgreSQL, the servers and the
// load) shares this machine's cores, so the ratio shows what a second
// replica adds when CPU is not added with it.
func benchReplicas(ctx context.Context, c config, bin string) (any, error) {
	if pg.srv == nil {
		if err := startPostgres(); err != nil {
			return nil, err
		}
		defer func() { pg.srv.Stop(); pg.srv = nil }()
	}
	dir, err := os.MkdirTemp("", "sextant-bench-replicas-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := map[string]any{
		"runs":          c.runs,
		"batch_metrics": len(ingestKeys) * ingestStepsPerBatch,
		"target":        "two replicas ingest at least 1.6x one replica",
	}
	rates, readRates := map[string]float64{}, map[string]float64{}
	for _, setup := range []struct {
		name     string
		replicas int
		postgres bool
	}{{"sqlite_1", 1, false}, {"postgres_1", 1, true}, {"postgres_2", 2, true}} {
		// --db "" is SQLite in the data directory.
		extra := []string{"--db", ""}
		if setup.postgres {
			db, err := pg.databaseFor(ctx, setup.name)
			if err != nil {
				return nil, err
			}
			extra = []string{"--db", db}
		}
		var ss []*server
		var cls []*client
		killAll := func() {
			for _, s := range ss {
				s.kill()
			}
		}
		for i := range setup.replicas {
			s, err := startServer(ctx, bin, filepath.Join(dir, fmt.Sprintf("%s-%d", setup.name, i)), append(extra, c.serverArgs...)...)
			if err != nil {
				killAll()
				return nil, err
			}
			ss = append(ss, s)
			cls = append(cls, newClient(s.url))
		}
		exp, err := cls[0].createExperiment(ctx, "/Shared/bench/replicas")
		if err != nil {
			killAll()
			return nil, err
		}
		runIDs := make([]string, c.runs)
		for i := range runIDs {
			if runIDs[i], err = cls[0].createRun(ctx, exp, fmt.Sprintf("r-%02d", i), time.Now().UnixMilli()); err != nil {
				killAll()
				return nil, err
			}
		}
		load, err := runIngestLoadOn(ctx, cls, ss, runIDs, 2*time.Second, c.duration)
		if err != nil {
			killAll()
			return nil, err
		}
		logf("replicas: %s: %.0f points/s (%d errors)", setup.name, load.rate, load.errors)
		rates[setup.name] = load.rate
		// Then reads of what was ingested, spread over the replicas too.
		reads, err := runReadLoadOn(ctx, cls, ss, exp, runIDs, 8, c.duration)
		if err != nil {
			killAll()
			return nil, err
		}
		logf("replicas: %s: %.0f reads/s (%d errors)", setup.name, reads.rate, reads.errors)
		readRates[setup.name] = reads.rate
		readLat := map[string]any{}
		for k, l := range reads.lat {
			readLat[k] = l.summary()
		}
		res[setup.name] = map[string]any{
			"replicas":          setup.replicas,
			"points_per_second": math.Round(load.rate),
			"latency":           load.lat.summary(),
			"errors":            load.errors,
			"server_cpu_cores":  load.cpuCores,
			"machine_cpu_busy":  math.Round(100*load.machineBusy) / 100,
			"measured_seconds":  load.seconds,
			"reads": map[string]any{
				"workers":          8,
				"reads_per_second": math.Round(reads.rate),
				"latency":          readLat,
				"errors":           reads.errors,
				"first_error":      reads.firstErr,
				"server_cpu_cores": reads.cpuCores,
				"measured_seconds": reads.seconds,
			},
		}
		for _, s := range ss {
			if err := s.stop(); err != nil {
				return nil, err
			}
		}
	}
	if rates["postgres_1"] > 0 {
		res["ratio_postgres_2_over_1"] = math.Round(100*rates["postgres_2"]/rates["postgres_1"]) / 100
		res["ratio_postgres_1_over_sqlite"] = math.Round(100*rates["postgres_1"]/rates["sqlite_1"]) / 100
	}
	if readRates["postgres_1"] > 0 {
		res["reads_ratio_postgres_2_over_1"] = math.Round(100*readRates["postgres_2"]/readRates["postgres_1"]) / 100
		res["reads_ratio_postgres_1_over_sqlite"] = math.Round(100*readRates["postgres_1"]/readRates["sqlite_1"]) / 100
	}
	return res, nil
}
