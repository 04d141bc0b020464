package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for MLflow databases on PostgreSQL

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/mlflowimport"
	"github.com/sextant/sextant/internal/tracking"
)

// ImportCommand copies an MLflow tracking database and its artifacts into
// Sextant's stores.
type ImportCommand struct {
	main *Main
}

const importAbout = `Copies experiments, runs, params, tags, metric histories, dataset inputs and
artifacts from an MLflow tracking server's database into the Sextant data
directory (or database and bucket) that the storage flags select, the same
flags and SEXTANT_* variables 'sextant server' takes. Run ids, experiment ids,
names, users and times are kept. Stop the Sextant server first when it uses
a SQLite data directory; with PostgreSQL (--db) it may keep running.

  --from sqlite:///mlflow.db            relative path (sqlite:////abs/mlflow.db: absolute)
  --from postgresql://user:pw@host/db   an MLflow database on PostgreSQL
  --artifacts DIR                       MLflow's --artifacts-destination, or its
                                        mlruns directory if it has moved
  --artifacts-root DIR                  a directory whose files the import may read
                                        where file: artifact locations point (repeat
                                        for several); locations elsewhere are refused`

// Run parses flags and imports.
func (c *ImportCommand) Run(ctx context.Context, fs *flag.FlagSet, args []string) error {
	m := c.main
	cfg := DefaultConfig()
	var from, artifactRoot string
	var skipExisting, asJSON, noArtifacts bool
	fs.StringVar(&from, "from", "", "the MLflow database URL (required)")
	fs.StringVar(&artifactRoot, "artifacts", "", "MLflow's artifact directory (see above)")
	var allowed []string
	fs.Func("artifacts-root", "a directory that file: artifact locations may point into (repeatable); the database names the locations, so others are refused", func(v string) error {
		allowed = append(allowed, v)
		return nil
	})
	fs.BoolVar(&noArtifacts, "no-artifacts", false, "import metadata only")
	fs.BoolVar(&skipExisting, "skip-existing", false, "leave runs that are already in Sextant alone (to finish an interrupted import)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	envErr := bindFlags(fs, &cfg, m.Getenv, storeFlags|blobFlags|logFlags)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if fs.NArg() > 0 {
		return usageError("import: unexpected arguments: %v", fs.Args())
	}
	if from == "" {
		return usageError("import: --from is required: the MLflow database, such as sqlite:///mlflow.db (see 'sextant import -h')")
	}
	if artifactRoot != "" && !noArtifacts {
		if st, err := os.Stat(artifactRoot); err != nil || !st.IsDir() {
			return fmt.Errorf("--artifacts %s is not a directory", artifactRoot)
		}
	}
	for _, d := range allowed {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return fmt.Errorf("--artifacts-root %s is not a directory", d)
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	restrictUmask()
	log := newLogger(m.Stderr, cfg)

	src, err := mlflowimport.OpenSource(ctx, from, sql.Open)
	if err != nil {
		return err
	}
	defer src.Close()

	store, err := openStore(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer store.Close(context.WithoutCancel(ctx))
	fmt.Fprintf(m.Stderr, "importing into %s\n", redactDB(storeTarget(cfg)))
	opts := mlflowimport.Options{SkipExisting: skipExisting, Logger: log}
	if !noArtifacts {
		blobs, err := openBlobs(ctx, cfg, "artifacts", m.Getenv, log)
		if err != nil {
			return err
		}
		svc := artifacts.New(blobs, artifacts.Options{})
		opts.Artifacts = &mlflowimport.ArtifactCopier{
			Root:    artifactRoot,
			Allowed: allowed,
			Upload: func(ctx context.Context, p string, f *os.File, size int64) error {
				_, err := svc.Upload(ctx, p, f, size)
				return err
			},
		}
	}
	start := time.Now()
	last := start
	opts.Progress = func(p mlflowimport.Progress) {
		if !asJSON && time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintf(m.Stderr, "imported %d runs (experiment %q)\n", p.RunsDone, p.Experiment)
		}
	}
	rep, err := mlflowimport.Import(ctx, src, store.Tracking(), opts)
	if err == nil {
		// MLflow's Default experiment came with the import; a database
		// without one gets Sextant's, as the server would create it.
		err = tracking.NewService(store.Tracking(), tracking.Options{Limits: cfg.Limits, Logger: log}).Init(ctx)
	}
	if rep != nil {
		if asJSON {
			enc := json.NewEncoder(m.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			printImportReport(m, rep, time.Since(start))
		}
	}
	if err != nil {
		return fmt.Errorf("import stopped: %w", err)
	}
	return nil
}

func printImportReport(m *Main, r *mlflowimport.Report, took time.Duration) {
	fmt.Fprintf(m.Stdout, "imported %d experiments, %d runs (%d skipped), %d params, %d tags, %d metric points, %d dataset inputs, %d artifact files (%d bytes) in %s\n",
		r.Experiments, r.Runs, r.SkippedRuns, r.Params, r.Tags, r.MetricPoints, r.DatasetInputs, r.ArtifactFiles, r.ArtifactBytes, took.Round(time.Millisecond))
	for from, to := range r.Renumbered {
		fmt.Fprintf(m.Stdout, "experiment id %s was taken; it is %s here\n", from, to)
	}
	for _, name := range r.Merged {
		fmt.Fprintf(m.Stdout, "experiment %q already existed; its runs were added to it\n", name)
	}
	if n := len(r.RefusedArtifacts); n > 0 {
		fmt.Fprintf(m.Stdout, "%d runs have artifact locations outside the directories named by --artifacts and --artifacts-root; they were not read (see the warnings above): pass --artifacts-root DIR with the directory MLflow wrote them to, and import again into a fresh data directory\n", n)
	}
	if n := len(r.MissingArtifacts); n > 0 {
		fmt.Fprintf(m.Stdout, "%d runs had artifacts that were not found (see the warnings above); pass --artifacts with MLflow's artifact directory\n", n)
	}
}
