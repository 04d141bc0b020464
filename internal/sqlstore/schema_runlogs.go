package sqlstore

// runlogMigrations is the schema of run logs (see migrate.go for how
// migrations work, and internal/runlogs for the model).
//
// Runs are soft-deleted (their logs become unreadable) and may later be
// purged for good: the log then goes in the same transaction as the run,
// by the foreign keys' ON DELETE CASCADE on PostgreSQL, and on SQLite
// (whose foreign keys are not enforced) by the trigger purgeTrigger,
// which OpenLogs creates.
var runlogMigrations = []string{
	// 1: run logs.
	`
-- One row per run that has a log: the number the next line gets, the
-- stored text size, how many chunks are small (not full; compaction
-- merges them) and when the last append landed (quiet runs are
-- compacted by a sweep).
CREATE TABLE run_log_state (
	run_pk         INTEGER PRIMARY KEY REFERENCES runs (run_pk) ON DELETE CASCADE,
	next_line      INTEGER NOT NULL,
	bytes          INTEGER NOT NULL,
	small_chunks   INTEGER NOT NULL,
	last_append_ms INTEGER NOT NULL
);
CREATE INDEX run_log_state_small ON run_log_state (small_chunks) WHERE small_chunks >= 2;

-- The next sequence number expected from each source (launcher process)
-- of a run: lines below it were stored already, so a retried append is
-- stored once.
CREATE TABLE run_log_sources (
	run_pk   INTEGER NOT NULL REFERENCES runs (run_pk) ON DELETE CASCADE,
	source   TEXT    NOT NULL,
	next_seq INTEGER NOT NULL,
	PRIMARY KEY (run_pk, source)
) WITHOUT ROWID;

-- Compressed chunks of consecutive lines (docs/format/runlog-chunk.md).
-- The chunks of a run tile its lines 1 to next_line-1 without overlap.
-- nodes and streams are bit sets (runlogs.NodeBit, StreamBit) so filtered
-- reads skip chunks without decoding them; is_full says the chunk reached
-- runlogs.ChunkLines lines or ChunkBytes of text.
CREATE TABLE run_log_chunks (
	chunk_id   INTEGER PRIMARY KEY,
	run_pk     INTEGER NOT NULL REFERENCES runs (run_pk) ON DELETE CASCADE,
	first_line INTEGER NOT NULL,
	count      INTEGER NOT NULL,
	min_ts     INTEGER NOT NULL,
	max_ts     INTEGER NOT NULL,
	nodes      INTEGER NOT NULL,
	streams    INTEGER NOT NULL,
	raw_bytes  INTEGER NOT NULL,
	is_full    INTEGER NOT NULL,
	data       BLOB    NOT NULL
);
CREATE UNIQUE INDEX run_log_chunks_line ON run_log_chunks (run_pk, first_line);
CREATE INDEX run_log_chunks_small ON run_log_chunks (run_pk, first_line) WHERE is_full = 0;
`,
}

// purgeTrigger deletes a run's log with the run, on SQLite.
const purgeTrigger = `CREATE TRIGGER IF NOT EXISTS run_logs_purge AFTER DELETE ON runs BEGIN
	DELETE FROM run_log_chunks WHERE run_pk = OLD.run_pk;
	DELETE FROM run_log_sources WHERE run_pk = OLD.run_pk;
	DELETE FROM run_log_state WHERE run_pk = OLD.run_pk;
END`
