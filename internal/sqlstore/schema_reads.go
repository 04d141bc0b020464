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
	// 6: the change log of runs for the search index (runsearch/index.go):
	// one row per run, holding the number of the last change of anything
	// a search reads or returns of the run (its row, params, tags; its
	// latest metric values through its row, see logMetrics), from one
	// counter. A search asks for the runs of its experiment changed since
	// the index last looked, and reloads exactly those. One row per run
	// keeps the table as large as runs, with nothing to prune. The
	// triggers that fill it are SQLite's only (migration 7).
	`
CREATE TABLE run_changes (
	run_pk        INTEGER PRIMARY KEY,
	experiment_id INTEGER NOT NULL,
	seq           INTEGER NOT NULL
);
CREATE INDEX run_changes_experiment_seq ON run_changes (experiment_id, seq);
CREATE TABLE run_change_seq (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	seq INTEGER NOT NULL
);
INSERT INTO run_change_seq (id, seq) VALUES (1, 0);
`,
	// 7: the triggers that log run changes, on SQLite only: PostgreSQL
	// keeps no search index. There, replicas commit concurrently, so
	// change numbers would not come in commit order and "changed since
	// n" could miss a change committed late with a smaller number; and
	// every write would pay for triggers nobody reads. SQLite has one
	// writer: numbers are handed out in commit order.
	//
	// A change of a run's params or tags, or of the run itself (status,
	// end time, name, lifecycle, inputs counted in io_count, and the
	// metric counters: LogBatch's update of those is what records a change
	// of its latest metric values, one row per request instead of one per
	// series), gets the next number. The counts of params and tags are
	// left out: their rows' own triggers record those changes. A purged
	// run's row stays, so the index learns that the run is gone.
	sqliteOnly + `
CREATE TRIGGER run_changes_runs_insert AFTER INSERT ON runs BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT NEW.run_pk, NEW.experiment_id, c.seq FROM run_change_seq c WHERE c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_runs_update AFTER UPDATE OF run_id, experiment_id, name, user_id, status, start_time, end_time, artifact_uri, lifecycle_stage, metric_points, metric_keys, io_count ON runs BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT NEW.run_pk, NEW.experiment_id, c.seq FROM run_change_seq c WHERE c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_runs_delete AFTER DELETE ON runs BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT OLD.run_pk, OLD.experiment_id, c.seq FROM run_change_seq c WHERE c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_params_insert AFTER INSERT ON params BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT r.run_pk, r.experiment_id, c.seq FROM runs r, run_change_seq c WHERE r.run_pk = NEW.run_pk AND c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_params_update AFTER UPDATE ON params BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT r.run_pk, r.experiment_id, c.seq FROM runs r, run_change_seq c WHERE r.run_pk = NEW.run_pk AND c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_params_delete AFTER DELETE ON params BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT r.run_pk, r.experiment_id, c.seq FROM runs r, run_change_seq c WHERE r.run_pk = OLD.run_pk AND c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_tags_insert AFTER INSERT ON tags BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT r.run_pk, r.experiment_id, c.seq FROM runs r, run_change_seq c WHERE r.run_pk = NEW.run_pk AND c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_tags_update AFTER UPDATE ON tags BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT r.run_pk, r.experiment_id, c.seq FROM runs r, run_change_seq c WHERE r.run_pk = NEW.run_pk AND c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
CREATE TRIGGER run_changes_tags_delete AFTER DELETE ON tags BEGIN
	UPDATE run_change_seq SET seq = seq + 1 WHERE id = 1;
	INSERT INTO run_changes (run_pk, experiment_id, seq)
		SELECT r.run_pk, r.experiment_id, c.seq FROM runs r, run_change_seq c WHERE r.run_pk = OLD.run_pk AND c.id = 1
		ON CONFLICT (run_pk) DO UPDATE SET experiment_id = excluded.experiment_id, seq = excluded.seq;
END;
`,
	// 8: the index on (series_id, max_ts) serves the duplicate checks of
	// chunks that hold a single step (series logged without steps put
	// every point at step 0, where the span index cannot tell chunks
	// apart), and now holds only those. A series logged with steps wrote
	// each chunk into two indexes keyed by series, each write a page of
	// its own per series; under the ingest benchmark the two were 60% of
	// the pages every commit wrote. dropStored finds chunks of several
	// steps through the span index.
	`
DROP INDEX metric_chunks_series_ts;
CREATE INDEX metric_chunks_one_step ON metric_chunks (series_id, max_ts) WHERE min_step = max_step;
`,
	// 9: runs searched by name (attributes.run_name = 'x', which `sextant
	// runs` makes to find a run by its name) start from the runs of the
	// name, not from every run of the experiments (runsearch/plan.go).
	`CREATE INDEX runs_experiment_name ON runs (experiment_id, name);`,
}
