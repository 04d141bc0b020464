package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"time"
)

// serverMigrations hold what replicas of one server share beyond the
// domain data: settings (the signing secret) and leases on background
// jobs.
var serverMigrations = []string{
	`
CREATE TABLE settings (
	key   TEXT NOT NULL PRIMARY KEY,
	value TEXT NOT NULL
);

-- A lease gives one replica a background job (retention, garbage
-- collection) until expires (unix ms); the holder renews it while it runs.
CREATE TABLE leases (
	name    TEXT    NOT NULL PRIMARY KEY,
	holder  TEXT    NOT NULL,
	expires INTEGER NOT NULL
);
`,
}

// newInstanceID names a store instance: host name and a random suffix.
func newInstanceID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return host + "-" + hex.EncodeToString(b[:])
}

// SharedSecret returns the server's signing secret kept in the database,
// created by the first replica that asks: every replica of a server
// signs and checks tokens with the same key.
func (s *Store) SharedSecret(ctx context.Context) ([]byte, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	err := s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('secret', ?) ON CONFLICT DO NOTHING`, hex.EncodeToString(raw[:]))
		return sqlError(err, "store the server secret")
	})
	if err != nil {
		return nil, err
	}
	var v string
	if err := s.rdb.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = 'secret'`).Scan(&v); err != nil {
		return nil, sqlError(err, "read the server secret")
	}
	return []byte(v), nil
}

// leader reports whether this store (this replica) holds the lease on a
// background job that runs every period, acquiring or renewing it; never
// while the store is read-only (see Health). A
// lease outlives three missed periods, so that a replica that stops
// renewing hands the job over within three periods.
func (s *db) leader(ctx context.Context, job string, period time.Duration) bool {
	if !s.state().Writable {
		// Background jobs write; they wait for space (and would log a
		// failed lease every period meanwhile).
		return false
	}
	ok, err := s.acquireLease(ctx, job, s.instance, 3*period)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("background job lease", "job", job, "err", err)
	}
	return ok
}

// Leader reports whether this replica runs the named background job that
// runs every period, taking or renewing its lease in the leases table (see
// leader): the one replica holding it runs the job.
func (s *Store) Leader(ctx context.Context, job string, period time.Duration) bool {
	return s.leader(ctx, job, period)
}

// releaseLeases gives up this instance's leases, so that another replica
// (or this server, restarted) takes its jobs over at once.
func (s *db) releaseLeases(ctx context.Context) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE holder = ?`, s.instance)
		return sqlError(err, "release leases")
	})
}

// AcquireLease gives the named background job to holder for ttl, unless
// another holder has it and its lease has not expired. It returns whether
// holder has the lease now; the holder renews by calling again.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	return s.acquireLease(ctx, name, holder, ttl)
}

func (s *db) acquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := time.Now()
	var got string
	err := s.w.do(ctx, func(tx *wtx) error {
		err := tx.QueryRowContext(ctx, `INSERT INTO leases (name, holder, expires) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
			WHERE leases.holder = excluded.holder OR leases.expires < ?
			RETURNING holder`, name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli()).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // held by another replica
		}
		return sqlError(err, "acquire lease "+name)
	})
	return got == holder, err
}
