package sqlstore

// workspaceMigrations is the schema of users, credentials, groups, the
// folder tree, permissions, comments and the audit log.
var workspaceMigrations = []string{
	`
CREATE TABLE users (
	user_id       INTEGER PRIMARY KEY,
	email         TEXT    NOT NULL UNIQUE,
	display_name  TEXT    NOT NULL,
	password_hash TEXT    NOT NULL,
	is_admin      INTEGER NOT NULL,
	disabled      INTEGER NOT NULL,
	created_time  INTEGER NOT NULL
);

-- Personal access tokens, stored as SHA-256 hashes of their secrets.
CREATE TABLE tokens (
	token_id       INTEGER PRIMARY KEY,
	user_id        INTEGER NOT NULL,
	name           TEXT    NOT NULL,
	hash           BLOB    NOT NULL UNIQUE,
	created_time   INTEGER NOT NULL,
	expires_time   INTEGER NOT NULL,
	last_used_time INTEGER NOT NULL,
	revoked_time   INTEGER NOT NULL
);
CREATE INDEX tokens_user ON tokens (user_id);

-- Browser sessions, stored as SHA-256 hashes of their cookies.
CREATE TABLE sessions (
	hash         BLOB    PRIMARY KEY,
	user_id      INTEGER NOT NULL,
	created_time INTEGER NOT NULL,
	expires_time INTEGER NOT NULL,
	csrf         TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE user_groups (
	group_id INTEGER PRIMARY KEY,
	name     TEXT    NOT NULL UNIQUE
);

CREATE TABLE group_members (
	group_id INTEGER NOT NULL,
	user_id  INTEGER NOT NULL,
	PRIMARY KEY (group_id, user_id)
) WITHOUT ROWID;
CREATE INDEX group_members_user ON group_members (user_id);

CREATE TABLE folders (
	folder_id    INTEGER PRIMARY KEY,
	path         TEXT    NOT NULL UNIQUE,
	parent       TEXT    NOT NULL,
	owner_id     INTEGER NOT NULL,
	created_time INTEGER NOT NULL
);
CREATE INDEX folders_parent ON folders (parent);

-- resource_kind 1 is a folder (key: its path), 2 an experiment (key: its
-- id); principal_kind 1 is a user, 2 a group (id 0: every user).
CREATE TABLE grants (
	resource_kind  INTEGER NOT NULL,
	resource_key   TEXT    NOT NULL,
	principal_kind INTEGER NOT NULL,
	principal_id   INTEGER NOT NULL,
	level          INTEGER NOT NULL,
	PRIMARY KEY (resource_kind, resource_key, principal_kind, principal_id)
) WITHOUT ROWID;

CREATE TABLE comments (
	comment_id   INTEGER PRIMARY KEY,
	target_kind  TEXT    NOT NULL,
	target_id    TEXT    NOT NULL,
	author_id    INTEGER NOT NULL,
	body         TEXT    NOT NULL,
	created_time INTEGER NOT NULL,
	updated_time INTEGER NOT NULL
);
CREATE INDEX comments_target ON comments (target_kind, target_id, created_time);

CREATE TABLE audit_log (
	event_id INTEGER PRIMARY KEY,
	time     INTEGER NOT NULL,
	actor_id INTEGER NOT NULL,
	actor    TEXT    NOT NULL,
	action   TEXT    NOT NULL,
	target   TEXT    NOT NULL,
	detail   TEXT    NOT NULL
);
`,
	// 2: a comment goes with the run or experiment it is on, in the
	// transaction that deletes the target's row for good (a purge), by a
	// trigger: target_id names a run or an experiment, so no foreign key
	// can. Comments left on targets that are gone already (purged, or
	// never there: the API took any target before it checked) go now.
	// PostgreSQL has its own text (pgMigrations).
	`
DELETE FROM comments WHERE target_kind = 'run' AND target_id NOT IN (SELECT run_id FROM runs);
DELETE FROM comments WHERE target_kind = 'experiment' AND target_id NOT IN (SELECT CAST(experiment_id AS TEXT) FROM experiments);
DELETE FROM comments WHERE target_kind NOT IN ('run', 'experiment');
CREATE TRIGGER comments_purge_run AFTER DELETE ON runs BEGIN
	DELETE FROM comments WHERE target_kind = 'run' AND target_id = OLD.run_id;
END;
CREATE TRIGGER comments_purge_experiment AFTER DELETE ON experiments BEGIN
	DELETE FROM comments WHERE target_kind = 'experiment' AND target_id = CAST(OLD.experiment_id AS TEXT);
END;
`,
}

// nodeTokenMigrations make tokens node tokens (workspace/nodes.go): the
// GPU nodes a token may report for, one name a line (names hold no
// control characters), empty for a user's token. A component of its own, after
// workspace's, so that workspace's migrations stay as they shipped.
var nodeTokenMigrations = []string{
	`ALTER TABLE tokens ADD COLUMN nodes TEXT NOT NULL DEFAULT '';`,
}

// workspaceCommentPurgePG is workspace migration 2 on PostgreSQL, whose
// triggers call functions.
const workspaceCommentPurgePG = `
DELETE FROM comments WHERE target_kind = 'run' AND target_id NOT IN (SELECT run_id FROM runs);
DELETE FROM comments WHERE target_kind = 'experiment' AND target_id NOT IN (SELECT CAST(experiment_id AS TEXT) FROM experiments);
DELETE FROM comments WHERE target_kind NOT IN ('run', 'experiment');
CREATE FUNCTION comments_purge_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM comments WHERE target_kind = 'run' AND target_id = OLD.run_id;
	RETURN NULL;
END $$;
CREATE TRIGGER comments_purge_run AFTER DELETE ON runs FOR EACH ROW EXECUTE FUNCTION comments_purge_run();
CREATE FUNCTION comments_purge_experiment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM comments WHERE target_kind = 'experiment' AND target_id = CAST(OLD.experiment_id AS TEXT);
	RETURN NULL;
END $$;
CREATE TRIGGER comments_purge_experiment AFTER DELETE ON experiments FOR EACH ROW EXECUTE FUNCTION comments_purge_experiment();
`
