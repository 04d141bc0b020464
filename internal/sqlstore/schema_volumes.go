package sqlstore

// volumeMigrations is the schema of catalogs, schemas and volumes
// (internal/volumes). Grants on them live in the workspace's grants table
// (resource kinds 3, 4 and 5, keyed by full name); the files of a volume
// live in the volumes blob store under its volume_id.
var volumeMigrations = []string{
	`
CREATE TABLE uc_catalogs (
	name         TEXT    PRIMARY KEY,
	comment      TEXT    NOT NULL,
	owner_id     INTEGER NOT NULL,
	owner        TEXT    NOT NULL,
	created_time INTEGER NOT NULL,
	updated_time INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE uc_schemas (
	catalog      TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	comment      TEXT    NOT NULL,
	owner_id     INTEGER NOT NULL,
	owner        TEXT    NOT NULL,
	created_time INTEGER NOT NULL,
	updated_time INTEGER NOT NULL,
	PRIMARY KEY (catalog, name)
) WITHOUT ROWID;

CREATE TABLE uc_volumes (
	volume_id    TEXT    PRIMARY KEY,
	catalog      TEXT    NOT NULL,
	schema_name  TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	comment      TEXT    NOT NULL,
	owner_id     INTEGER NOT NULL,
	owner        TEXT    NOT NULL,
	created_time INTEGER NOT NULL,
	updated_time INTEGER NOT NULL,
	UNIQUE (catalog, schema_name, name)
) WITHOUT ROWID;
`,
	// Uploads in flight, claimed here rather than in a replica's memory so
	// that a checkpoint's .metadata waits for shards uploaded through any
	// replica, and overwrite=false is exclusive across replicas.
	`
CREATE TABLE uc_volume_uploads (
	id        INTEGER PRIMARY KEY,
	volume_id TEXT    NOT NULL,
	dir       TEXT    NOT NULL,
	name      TEXT    NOT NULL,
	expires   INTEGER NOT NULL
);
CREATE INDEX uc_volume_uploads_dir ON uc_volume_uploads (volume_id, dir);
`,
	// 3: a claim names the server instance carrying its upload (empty for
	// multipart uploads and claims made before this migration, which only
	// expire) and when it began; the claims of an instance go when it does
	// (the liveness of the instances of a shared database is a lease named
	// "volume-uploads:<instance>").
	`
ALTER TABLE uc_volume_uploads ADD COLUMN instance TEXT NOT NULL DEFAULT '';
ALTER TABLE uc_volume_uploads ADD COLUMN started INTEGER NOT NULL DEFAULT 0;
CREATE INDEX uc_volume_uploads_instance ON uc_volume_uploads (instance);
`,
}
