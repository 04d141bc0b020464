package sqlstore

// readsMigrations are the indexes (and the tables they need) that keep
// reads and searches from scanning: chunk listings that read an index
// alone, and run searches that start from the most selective filter. They
// are a component of their own (see migrate.go), after tracking, whose
// tables they index.
var readsMigrations = []string{
	// 1: chunk listings in (min_step, max_step) order from the index
	// alone; it serves every lookup the index on (series_id, min_step) did.
	`
CREATE INDEX metric_chunks_span ON metric_chunks (series_id, min_step, max_step);
DROP INDEX metric_chunks_series;
`,
	// 2: run searches. The latest values get their run's experiment, and
	// the index on them leads with it, so that a search walks one
	// experiment's runs in the order of a metric, or the runs whose metric
	// passes a filter, without stepping over other experiments'. Tags get
	// the index on (key, value) that params have, so that an equality
	// filter on either can drive a search.
	`
ALTER TABLE metric_series ADD COLUMN experiment_id INTEGER;
UPDATE metric_series SET experiment_id = (SELECT r.experiment_id FROM runs r WHERE r.run_pk = metric_series.run_pk);
CREATE INDEX metric_series_exp_key_value ON metric_series (experiment_id, key, value);
DROP INDEX metric_series_key_value;
CREATE INDEX tags_key_value ON tags (key, value);
`,
	// 3: how many input and output rows a run has (run_inputs,
	// run_model_inputs, run_model_outputs), so that loading a page of runs
	// looks for those only where there are some.
	`
ALTER TABLE runs ADD COLUMN io_count INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET io_count = (SELECT COUNT(*) FROM run_inputs i WHERE i.run_pk = runs.run_pk)
	+ (SELECT COUNT(*) FROM run_model_inputs m WHERE m.run_pk = runs.run_pk)
	+ (SELECT COUNT(*) FROM run_model_outputs o WHERE o.run_pk = runs.run_pk);
`,
	// 4: a sketch of each large chunk (metrics.Sketch: each sixteenth's
	// lowest and highest point, as a chunk), so that a sampled read of a
	// long series reads a few dozen points a chunk. Chunks written before
	// have none until compaction rewrites them; reads decode those.
	`ALTER TABLE metric_chunks ADD COLUMN sketch BLOB;`,
	// 5: overviews (overview.go): one row for each run of consecutive
	// settled chunks of a series, with each chunk's first, lowest, highest
	// and last point as a chunk (data) and their summary, so that a
	// sampled read of a long series reads few rows. Compaction builds them.
	`
CREATE TABLE metric_overviews (
	series_id      INTEGER NOT NULL,
	min_step       INTEGER NOT NULL,
	max_step       INTEGER NOT NULL,
	min_ts         INTEGER NOT NULL,
	max_ts         INTEGER NOT NULL,
	count          INTEGER NOT NULL,
	chunks         INTEGER NOT NULL,
	model_id       TEXT,
	dataset_name   TEXT,
	dataset_digest TEXT,
	summary        BLOB    NOT NULL,
	data           BLOB    NOT NULL,
	PRIMARY KEY (series_id, min_step)
);
`,
}
