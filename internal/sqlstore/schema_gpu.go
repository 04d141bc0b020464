package sqlstore

// gpuMigrations is the schema of GPU monitoring samples (see migrate.go
// for how migrations work).
var gpuMigrations = []string{
	// 1: samples and nodes.
	`
-- One row per node that has samples. latest_* repeat the node's newest
-- sample, so the pane's "now" view reads one row per node.
CREATE TABLE gpu_nodes (
	node_pk          INTEGER PRIMARY KEY,
	name             TEXT    NOT NULL UNIQUE,
	latest_ts_ms     INTEGER NOT NULL,
	latest_run_id    TEXT,
	latest_node_rank INTEGER,
	latest_data      BLOB    NOT NULL
);

-- One row per node per sample time, with every GPU of the sample packed in
-- data (docs/format/gpu-sample.md): 1,000 nodes at 10 s are 100 rows a
-- second whatever their GPU count, and a node's history is one range of
-- the primary key. run_id is NULL for samples of no run.
CREATE TABLE gpu_samples (
	node_pk   INTEGER NOT NULL,
	ts_ms     INTEGER NOT NULL,
	run_id    TEXT,
	node_rank INTEGER,
	data      BLOB    NOT NULL,
	PRIMARY KEY (node_pk, ts_ms)
) WITHOUT ROWID;

-- A run's samples, node by node in time order.
CREATE INDEX gpu_samples_run ON gpu_samples (run_id, node_pk, ts_ms) WHERE run_id IS NOT NULL;
`,
	// 2: node health history (gpu.HealthHistory).
	`
-- One row per health finding of a node's GPU (an Xid error, an ECC rise, a
-- throttle span, a lost GPU), whether or not a run held the GPU; kept far
-- longer than the samples. hkey is the finding's key (gpu.Health), so a
-- resent batch stores nothing twice. run_ids lists the runs that held the
-- GPU, comma-separated ('' when none is known).
CREATE TABLE gpu_health (
	hkey      TEXT    NOT NULL PRIMARY KEY,
	node      TEXT    NOT NULL,
	ts_ms     INTEGER NOT NULL,
	end_ms    INTEGER NOT NULL,
	is_open   INTEGER NOT NULL,
	gpu_index INTEGER NOT NULL,
	gpu_uuid  TEXT    NOT NULL,
	gpu_model TEXT    NOT NULL,
	kind      TEXT    NOT NULL,
	xid       INTEGER NOT NULL,
	message   TEXT    NOT NULL,
	run_ids   TEXT    NOT NULL
);

-- A node's history, newest first; and every node's, for the summary.
CREATE INDEX gpu_health_node ON gpu_health (node, ts_ms, hkey);
CREATE INDEX gpu_health_ts ON gpu_health (ts_ms, hkey);
`,
}
