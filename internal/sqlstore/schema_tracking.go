package sqlstore

// trackingMigrations is the schema of experiments, runs, metrics, logged
// models and the registry (see migrate.go for how migrations work).
var trackingMigrations = []string{
	// 1: the tracking core.
	`
CREATE TABLE experiments (
	experiment_id     INTEGER PRIMARY KEY,
	name              TEXT    NOT NULL UNIQUE,
	artifact_location TEXT    NOT NULL,
	lifecycle_stage   TEXT    NOT NULL,
	creation_time     INTEGER NOT NULL,
	last_update_time  INTEGER NOT NULL
);
CREATE INDEX experiments_creation ON experiments (creation_time);

CREATE TABLE experiment_tags (
	experiment_id INTEGER NOT NULL,
	key           TEXT    NOT NULL,
	value         TEXT    NOT NULL,
	PRIMARY KEY (experiment_id, key)
) WITHOUT ROWID;

-- run_pk is an internal integer key so that the tables that hang off a run
-- (params, tags, metric series) stay small and join fast; run_id is the
-- public 32-hex id.
CREATE TABLE runs (
	run_pk          INTEGER PRIMARY KEY,
	run_id          TEXT    NOT NULL UNIQUE,
	experiment_id   INTEGER NOT NULL,
	name            TEXT    NOT NULL,
	user_id         TEXT    NOT NULL,
	status          INTEGER NOT NULL,
	start_time      INTEGER NOT NULL,
	end_time        INTEGER,
	artifact_uri    TEXT    NOT NULL,
	lifecycle_stage TEXT    NOT NULL,
	deleted_time    INTEGER,
	metric_points   INTEGER NOT NULL DEFAULT 0,
	metric_keys     INTEGER NOT NULL DEFAULT 0,
	param_count     INTEGER NOT NULL DEFAULT 0,
	tag_count       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_experiment_start ON runs (experiment_id, start_time DESC, run_id);

CREATE TABLE params (
	run_pk INTEGER NOT NULL,
	key    TEXT    NOT NULL,
	value  TEXT    NOT NULL,
	PRIMARY KEY (run_pk, key)
) WITHOUT ROWID;
CREATE INDEX params_key_value ON params (key, value);

CREATE TABLE tags (
	run_pk INTEGER NOT NULL,
	key    TEXT    NOT NULL,
	value  TEXT    NOT NULL,
	PRIMARY KEY (run_pk, key)
) WITHOUT ROWID;

-- One row per (run, metric key): the latest point (by step, then
-- timestamp, then value) for search and RunData, and the series counters.
-- value is NULL when the latest value is NaN (is_nan = 1).
CREATE TABLE metric_series (
	series_id      INTEGER PRIMARY KEY,
	run_pk         INTEGER NOT NULL,
	key            TEXT    NOT NULL,
	step           INTEGER NOT NULL,
	timestamp      INTEGER NOT NULL,
	value          REAL,
	is_nan         INTEGER NOT NULL,
	model_id       TEXT,
	dataset_name   TEXT,
	dataset_digest TEXT,
	max_step       INTEGER NOT NULL,
	point_count    INTEGER NOT NULL,
	small_chunks   INTEGER NOT NULL,
	UNIQUE (run_pk, key)
);
CREATE INDEX metric_series_key_value ON metric_series (key, value, run_pk);
CREATE INDEX metric_series_compact ON metric_series (small_chunks) WHERE small_chunks >= 2;

-- Compressed slices of a series (see docs/format/chunk.md). Fresh writes
-- land as small chunks, one per series per request; compaction merges them
-- into chunks of up to Options.ChunkPoints points. summary holds the
-- chunk's first, lowest, highest and last point (4 x 24 bytes).
CREATE TABLE metric_chunks (
	chunk_id       INTEGER PRIMARY KEY,
	series_id      INTEGER NOT NULL,
	min_step       INTEGER NOT NULL,
	max_step       INTEGER NOT NULL,
	min_ts         INTEGER NOT NULL,
	max_ts         INTEGER NOT NULL,
	count          INTEGER NOT NULL,
	model_id       TEXT,
	dataset_name   TEXT,
	dataset_digest TEXT,
	summary        BLOB    NOT NULL,
	data           BLOB    NOT NULL
);
CREATE INDEX metric_chunks_series ON metric_chunks (series_id, min_step);

CREATE TABLE datasets (
	dataset_pk    INTEGER PRIMARY KEY,
	experiment_id INTEGER NOT NULL,
	name          TEXT    NOT NULL,
	digest        TEXT    NOT NULL,
	source_type   TEXT    NOT NULL,
	source        TEXT    NOT NULL,
	schema        TEXT    NOT NULL,
	profile       TEXT    NOT NULL,
	UNIQUE (experiment_id, name, digest)
);

CREATE TABLE run_inputs (
	run_pk     INTEGER NOT NULL,
	dataset_pk INTEGER NOT NULL,
	PRIMARY KEY (run_pk, dataset_pk)
) WITHOUT ROWID;

CREATE TABLE input_tags (
	run_pk     INTEGER NOT NULL,
	dataset_pk INTEGER NOT NULL,
	key        TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	PRIMARY KEY (run_pk, dataset_pk, key)
) WITHOUT ROWID;

CREATE TABLE run_model_inputs (
	run_pk   INTEGER NOT NULL,
	model_id TEXT    NOT NULL,
	PRIMARY KEY (run_pk, model_id)
) WITHOUT ROWID;

CREATE TABLE run_model_outputs (
	run_pk   INTEGER NOT NULL,
	model_id TEXT    NOT NULL,
	step     INTEGER NOT NULL,
	PRIMARY KEY (run_pk, model_id, step)
) WITHOUT ROWID;
`,
	// 2: logged models (MLflow 3) and the model registry.
	`
CREATE TABLE logged_models (
	model_pk          INTEGER PRIMARY KEY,
	model_id          TEXT    NOT NULL UNIQUE,
	experiment_id     INTEGER NOT NULL,
	name              TEXT    NOT NULL,
	model_type        TEXT    NOT NULL,
	source_run_id     TEXT    NOT NULL,
	artifact_uri      TEXT    NOT NULL,
	status            INTEGER NOT NULL,
	status_message    TEXT    NOT NULL,
	creation_time     INTEGER NOT NULL,
	last_updated_time INTEGER NOT NULL,
	lifecycle_stage   TEXT    NOT NULL
);
CREATE INDEX logged_models_experiment ON logged_models (experiment_id, creation_time);

CREATE TABLE logged_model_tags (
	model_pk INTEGER NOT NULL,
	key      TEXT    NOT NULL,
	value    TEXT    NOT NULL,
	PRIMARY KEY (model_pk, key)
) WITHOUT ROWID;

CREATE TABLE logged_model_params (
	model_pk INTEGER NOT NULL,
	key      TEXT    NOT NULL,
	value    TEXT    NOT NULL,
	PRIMARY KEY (model_pk, key)
) WITHOUT ROWID;

-- The latest point of each metric logged with a model id, per dataset.
-- value is NULL when it is NaN (is_nan = 1).
CREATE TABLE logged_model_metrics (
	model_id       TEXT    NOT NULL,
	key            TEXT    NOT NULL,
	dataset_name   TEXT    NOT NULL,
	dataset_digest TEXT    NOT NULL,
	run_id         TEXT    NOT NULL,
	step           INTEGER NOT NULL,
	timestamp      INTEGER NOT NULL,
	value          REAL,
	is_nan         INTEGER NOT NULL,
	PRIMARY KEY (model_id, key, dataset_name, dataset_digest)
) WITHOUT ROWID;

CREATE TABLE registered_models (
	rm_pk             INTEGER PRIMARY KEY,
	name              TEXT    NOT NULL UNIQUE,
	description       TEXT    NOT NULL,
	user_id           TEXT    NOT NULL,
	creation_time     INTEGER NOT NULL,
	last_updated_time INTEGER NOT NULL
);

CREATE TABLE registered_model_tags (
	rm_pk INTEGER NOT NULL,
	key   TEXT    NOT NULL,
	value TEXT    NOT NULL,
	PRIMARY KEY (rm_pk, key)
) WITHOUT ROWID;

CREATE TABLE registered_model_aliases (
	rm_pk   INTEGER NOT NULL,
	alias   TEXT    NOT NULL,
	version INTEGER NOT NULL,
	PRIMARY KEY (rm_pk, alias)
) WITHOUT ROWID;

CREATE TABLE model_versions (
	rm_pk             INTEGER NOT NULL,
	version           INTEGER NOT NULL,
	creation_time     INTEGER NOT NULL,
	last_updated_time INTEGER NOT NULL,
	user_id           TEXT    NOT NULL,
	current_stage     TEXT    NOT NULL,
	description       TEXT    NOT NULL,
	source            TEXT    NOT NULL,
	storage_location  TEXT    NOT NULL,
	run_id            TEXT    NOT NULL,
	run_link          TEXT    NOT NULL,
	model_id          TEXT    NOT NULL,
	PRIMARY KEY (rm_pk, version)
) WITHOUT ROWID;
CREATE INDEX model_versions_model_id ON model_versions (model_id) WHERE model_id != '';

CREATE TABLE model_version_tags (
	rm_pk   INTEGER NOT NULL,
	version INTEGER NOT NULL,
	key     TEXT    NOT NULL,
	value   TEXT    NOT NULL,
	PRIMARY KEY (rm_pk, version, key)
) WITHOUT ROWID;

-- Next version number per registered model: versions are never reused,
-- even after deletions.
CREATE TABLE model_version_counters (
	rm_pk        INTEGER PRIMARY KEY,
	last_version INTEGER NOT NULL
);
`,
	// 3: find the chunks of a moment in time quickly (duplicate checks of
	// series logged without steps).
	`CREATE INDEX metric_chunks_series_ts ON metric_chunks (series_id, max_ts);`,
}
