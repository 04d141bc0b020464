// Command bench measures a real sextant server on this machine and prints
// the results as JSON.
//
//	go run ./bench [flags] ingest|history|search|reads|artifacts|auth|signin|progress|hang|slowclients|replicas|all
//
// It builds cmd/sextant, starts it on a free loopback port with a fresh
// data directory, drives it over HTTP exactly as clients do, and stops it.
// With -db postgres the servers keep their data in a PostgreSQL server the
// bench starts (one database each); replicas compares one and two replicas
// on PostgreSQL with one server on SQLite.
// The load generator runs on the same machine, so both share its cores:
// compare numbers within one run, not across machines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"
)

type config struct {
	bin            string
	keep           bool
	short          bool
	out            string
	duration       time.Duration
	runs           int
	historyN       int
	bulkN          int
	searchRuns     int
	artifactBytes  int64
	authRounds     int
	authRound      time.Duration
	authSearchRuns int
	serverArgs     []string
	postgres       bool
	// reads: the peers and what to measure (see reads.go).
	fmlBin        string
	mlflowBin     string
	mlflowVenv    string
	python        string
	readsParts    string
	readsSizes    string
	mlflowMaxRuns int
	bytesPoints   int
	readsRounds   int
	command       string
	// slowclients (see slowclients.go).
	slowClients int
	slowAddrs   int
	slowWindow  time.Duration
	// signin: see signin.go.
	signinRounds    int
	signinPhase     time.Duration
	signinAttackers int
	// progress: see progress.go.
	progressParts    string
	progressDuration time.Duration
	progressInterval time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "", "sextant binary to run (default: build ./cmd/sextant)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directories")
	flag.BoolVar(&c.short, "short", false, "smaller sizes, for a quick check")
	flag.StringVar(&c.out, "o", "", "also write the JSON results to this file")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "ingest: measured duration")
	flag.IntVar(&c.runs, "runs", 32, "ingest: concurrent runs")
	flag.IntVar(&c.historyN, "history-points", 200_000, "history: points in the full-history metric")
	flag.IntVar(&c.bulkN, "bulk-points", 10_000_000, "history: points in the bulk-interval metric")
	flag.IntVar(&c.searchRuns, "search-runs", 100_000, "search: runs to create")
	flag.Int64Var(&c.artifactBytes, "artifact-bytes", 4<<30, "artifacts: size of the artifact")
	flag.IntVar(&c.authRounds, "auth-rounds", 3, "auth: alternating ingest rounds per mode")
	flag.DurationVar(&c.authRound, "auth-round", 8*time.Second, "auth: measured duration of one ingest round")
	flag.IntVar(&c.authSearchRuns, "auth-search-runs", 100_000, "auth: runs in the permission search")
	flag.StringVar(&c.fmlBin, "fml", "", "reads: FastTrackML's fml binary, built from its public source (absent: no FastTrackML column)")
	flag.StringVar(&c.mlflowBin, "mlflow", "", "reads: the mlflow executable of a virtual environment with mlflow installed (absent: no MLflow column unless -mlflow-venv)")
	flag.StringVar(&c.mlflowVenv, "mlflow-venv", "", "reads: a directory for a virtual environment with the newest mlflow from PyPI, created when it has none (used when -mlflow is not given)")
	flag.StringVar(&c.python, "python", "", "reads: the Python with mlflow that times the client's get_metric_history (default: the one beside the mlflow executable)")
	flag.StringVar(&c.readsParts, "reads", "history,bulk,search,bytes", "reads: the parts to run, comma-separated")
	flag.StringVar(&c.readsSizes, "reads-search-runs", "2000,20000,100000", "reads: experiment sizes (runs) of the search part, comma-separated, ascending")
	flag.IntVar(&c.mlflowMaxRuns, "mlflow-search-max-runs", 2000, "reads: the largest search size also created on MLflow's server (it creates about 30 runs/s here)")
	flag.IntVar(&c.bytesPoints, "bytes-points", 2_000_000, "reads: points per series in the bytes-per-point part")
	flag.IntVar(&c.readsRounds, "reads-rounds", 15, "reads: timed rounds per measurement (peers at most 5)")
	flag.IntVar(&c.slowClients, "slow-clients", 3000, "slowclients: connections that trickle their bodies")
	flag.IntVar(&c.slowAddrs, "slow-addrs", 30, "slowclients: loopback source addresses they come from (127.0.0.2 and up)")
	flag.DurationVar(&c.slowWindow, "slow-window", 45*time.Second, "slowclients: how long each attack lasts (the server's --body-timeout is 30 s)")
	flag.IntVar(&c.signinRounds, "signin-rounds", 3, "signin: rounds of the three phases (at most 4)")
	flag.DurationVar(&c.signinPhase, "signin-phase", 8*time.Second, "signin: measured duration of one phase")
	flag.IntVar(&c.signinAttackers, "signin-attackers", 32, "signin: the attacker's concurrent requests")
	flag.StringVar(&c.progressParts, "progress-parts", "client,server", "progress: the parts to run, comma-separated")
	flag.DurationVar(&c.progressDuration, "progress-duration", 30*time.Second, "progress: measured duration of the server part")
	flag.DurationVar(&c.progressInterval, "progress-interval", 0, "progress: the simulated ranks' send interval (default: the Python sender's _SEND_INTERVAL_S)")
	serverArgs := flag.String("server-args", "", "extra flags for the server, space-separated (e.g. \"--debug-addr 127.0.0.1:6060\")")
	cpuProfile := flag.String("cpuprofile", "", "write the benchmark process's own CPU profile (the load generator's) to this file")
	db := flag.String("db", "sqlite", "database of the servers: sqlite, or postgres (a throwaway PostgreSQL server the bench starts)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench [flags] ingest|history|search|reads|artifacts|auth|signin|gpu|logs|progress|hang|slowclients|replicas|all ... (all: every one but replicas, reads and slowclients)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	c.serverArgs = strings.Fields(*serverArgs)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	c.command = strings.Join(os.Args, " ")
	switch *db {
	case "sqlite":
	case "postgres":
		c.postgres = true
	default:
		fmt.Fprintf(os.Stderr, "-db %q: want sqlite or postgres\n", *db)
		os.Exit(2)
	}
	if c.short {
		c.duration = 5 * time.Second
		c.historyN = 200_000
		c.bulkN = 1_000_000
		c.searchRuns = 10_000
		c.artifactBytes = 256 << 20
		c.authRounds, c.authRound, c.authSearchRuns = 1, 3*time.Second, 5_000
		c.readsSizes, c.bytesPoints, c.readsRounds = "2000,20000", 400_000, 5
		c.slowClients = 600
		c.signinRounds, c.signinPhase = 1, 3*time.Second
		c.progressDuration = 8 * time.Second
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, what []string) error {
	bin, cleanup, err := buildServer(c.bin)
	if err != nil {
		return err
	}
	defer cleanup()
	if c.postgres {
		if err := startPostgres(); err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer pg.srv.Stop()
	}
	results := map[string]any{
		"date":    time.Now().UTC().Format(time.RFC3339),
		"machine": machineInfo(),
		"db":      map[bool]string{false: "sqlite", true: "postgres"}[c.postgres],
	}
	var todo []string
	for _, w := range what {
		if w == "all" {
			todo = append(todo, "ingest", "history", "search", "artifacts", "auth", "gpu", "logs")
			continue
		}
		todo = append(todo, w)
	}
	for _, w := range todo {
		logf("== %s", w)
		var res any
		var err error
		switch w {
		case "ingest":
			res, err = benchIngest(ctx, c, bin)
		case "history":
			res, err = benchHistory(ctx, c, bin)
		case "search":
			res, err = benchSearch(ctx, c, bin)
		case "artifacts":
			res, err = benchArtifacts(ctx, c, bin)
		case "gpu":
			res, err = benchGPU(ctx, c, bin)
		case "auth":
			res, err = benchAuth(ctx, c, bin)
		case "signin":
			res, err = benchSignin(ctx, c, bin)
		case "replicas":
			res, err = benchReplicas(ctx, c, bin)
		case "logs":
			res, err = benchLogs(ctx, c, bin)
		case "reads":
			res, err = benchReads(ctx, c, bin)
		case "progress":
			res, err = benchProgress(ctx, c, bin)
		case "hang":
			res, err = benchHang(ctx, c, bin)
		case "slowclients":
			res, err = benchSlowClients(ctx, c, bin)
		default:
			return fmt.Errorf("unknown benchmark %q", w)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		results[w] = res
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if c.out != "" {
		return os.WriteFile(c.out, append(b, '\n'), 0o644)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
