package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/sqlstore"
)

// The database is SQLite in the data directory unless --db names a
// PostgreSQL database, which several replicas of the server can share.

func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// validateDB checks the --db setting.
func validateDB(c *Config) error {
	if c.DB != "" && !isPostgres(c.DB) {
		return &ConfigError{"db", fmt.Sprintf("must be a PostgreSQL URL (postgres://user:password@host:5432/database), got %q; leave it empty for SQLite in the data directory", redactDB(c.DB))}
	}
	if c.DBPool < 0 {
		return &ConfigError{"db-pool", fmt.Sprintf("must not be negative, got %d", c.DBPool)}
	}
	return nil
}

// storeTarget is where the database lives: the --db URL, or sextant.db in
// the data directory (an absolute path, so that messages naming it say
// which directory was used).
func storeTarget(cfg Config) string {
	if cfg.DB != "" {
		return cfg.DB
	}
	return filepath.Join(absPath(cfg.DataDir), "sextant.db")
}

// absPath returns p as an absolute path, or p when that cannot be told.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// ensureDataDir creates the data directory if it does not exist; created
// says whether it did.
func ensureDataDir(dir string) (created bool, err error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("create the data directory %s: %w", absPath(dir), err)
	}
	return true, nil
}

// openStore opens the configured database, applying pending migrations.
// It creates a missing data directory, and says so in the log.
func openStore(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*sqlstore.Store, error) {
	if cfg.DB == "" {
		created, err := ensureDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if created && log != nil {
			log.Info("created the data directory", "path", absPath(cfg.DataDir))
		}
	}
	index := int64(cfg.SearchIndexMB) << 20
	if cfg.SearchIndexMB == 0 {
		index = -1 // off
	}
	return sqlstore.Open(ctx, storeTarget(cfg), sqlstore.Options{
		Limits:           cfg.Limits,
		Synchronous:      cfg.Synchronous,
		ReadConns:        cfg.DBPool,
		SearchIndexBytes: index,
		Logger:           log,
		Metrics:          reg,
	})
}

// serverSecret returns the signing secret: --secret-file's; with
// PostgreSQL the one every replica shares in the database; otherwise the
// one in the data directory.
func serverSecret(ctx context.Context, cfg Config, store *sqlstore.Store) ([]byte, error) {
	if cfg.SecretFile == "" && cfg.DB != "" {
		return store.SharedSecret(ctx)
	}
	return loadSecret(cfg.DataDir, cfg.SecretFile)
}

// redactDB hides the secrets of a database URL: the password after the
// user name, and the query parameters that carry one (password,
// sslpassword). A password may hold characters a URL should have escaped
// ('?', '@', '/'): the credentials end at the first '@' followed by a host
// that ends the authority ('/', '?' or the end), wherever a '?' stands.
func redactDB(s string) string {
	scheme := strings.Index(s, "://")
	if scheme > 0 {
		rest := s[scheme+3:]
		for i := 0; i < len(rest); i++ {
			if rest[i] != '@' {
				continue
			}
			host := rest[i+1:]
			end := strings.IndexAny(host, "/?@")
			if end >= 0 && host[end] == '@' {
				continue // not the host yet: the password holds an '@'
			}
			if user, _, ok := strings.Cut(rest[:i], ":"); ok {
				return s[:scheme+3] + user + ":****" + redactParams(rest[i:])
			}
			break
		}
	}
	return redactParams(s)
}

// redactParams masks the values of the query parameters that carry a
// password.
func redactParams(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	params := strings.Split(s[q+1:], "&")
	for i, p := range params {
		k, _, ok := strings.Cut(p, "=")
		if ok && (strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword")) {
			params[i] = k + "=****"
		}
	}
	return s[:q+1] + strings.Join(params, "&")
}
