package sqlstore

// eventMigrations is the schema of run events (see migrate.go for how
// migrations work, and internal/runevents for the model).
//
// A purged run takes its events with it: by the foreign keys' ON DELETE
// CASCADE on PostgreSQL, and on SQLite by the trigger eventPurgeTrigger,
// which OpenEvents creates.
var eventMigrations = []string{
	// 1: run events.
	`
-- One row per run with events: the Seq the next event gets, and how many
-- events the run holds (replaced ones not counted).
CREATE TABLE run_event_state (
	run_pk   INTEGER PRIMARY KEY REFERENCES runs (run_pk) ON DELETE CASCADE,
	next_seq INTEGER NOT NULL,
	events   INTEGER NOT NULL
);

-- The events, by run and Seq. An event replaced by its key is deleted and
-- inserted again with a new seq, so readers that continue after the last
-- seq they saw get every change. kind, severity are runevents' persisted
-- numbers; end_ms is 0 for instants and open spans (is_open = 1); gpu and
-- step are -1 when none; data is the JSON of runevents.EncodeData
-- (checkpoint, attrs).
CREATE TABLE run_events (
	run_pk   INTEGER NOT NULL REFERENCES runs (run_pk) ON DELETE CASCADE,
	seq      INTEGER NOT NULL,
	key      TEXT    NOT NULL,
	kind     INTEGER NOT NULL,
	severity INTEGER NOT NULL,
	time_ms  INTEGER NOT NULL,
	end_ms   INTEGER NOT NULL,
	is_open  INTEGER NOT NULL,
	node     TEXT    NOT NULL,
	gpu      INTEGER NOT NULL,
	step     INTEGER NOT NULL,
	message  TEXT    NOT NULL,
	data     TEXT    NOT NULL,
	PRIMARY KEY (run_pk, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX run_events_key ON run_events (run_pk, key);

-- The running runs, which the watcher of idle and stalled runs looks at
-- every 30 s: a few rows of a table that may hold millions.
CREATE INDEX runs_running ON runs (run_pk) WHERE status = 1;
`,
}

// eventPurgeTrigger deletes a run's events with the run, on SQLite.
const eventPurgeTrigger = `CREATE TRIGGER IF NOT EXISTS run_events_purge AFTER DELETE ON runs BEGIN
	DELETE FROM run_events WHERE run_pk = OLD.run_pk;
	DELETE FROM run_event_state WHERE run_pk = OLD.run_pk;
END`
