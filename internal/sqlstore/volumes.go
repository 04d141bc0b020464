package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/workspace"
)

var _ volumes.Store = (*VolumeStore)(nil)

// CreateCatalog implements volumes.Store.
func (s *VolumeStore) CreateCatalog(ctx context.Context, c *volumes.Catalog) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO uc_catalogs (name, comment, owner_id, owner, created_time, updated_time) VALUES (?, ?, ?, ?, ?, ?)`,
			c.Name, c.Comment, c.OwnerID, c.Owner, c.CreatedMs, c.UpdatedMs)
		return sqlError(err, "catalog "+c.Name+" already exists")
	})
}

const catalogCols = `name, comment, owner_id, owner, created_time, updated_time`

func scanCatalog(sc interface{ Scan(...any) error }) (*volumes.Catalog, error) {
	c := &volumes.Catalog{}
	return c, sc.Scan(&c.Name, &c.Comment, &c.OwnerID, &c.Owner, &c.CreatedMs, &c.UpdatedMs)
}

// GetCatalog implements volumes.Store.
func (s *VolumeStore) GetCatalog(ctx context.Context, name string) (*volumes.Catalog, error) {
	c, err := scanCatalog(s.rdb.QueryRowContext(ctx, `SELECT `+catalogCols+` FROM uc_catalogs WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, volumes.CatalogNotFound(name)
	}
	return c, sqlError(err, "get catalog")
}

// ListCatalogs implements volumes.Store.
func (s *VolumeStore) ListCatalogs(ctx context.Context) ([]*volumes.Catalog, error) {
	var out []*volumes.Catalog
	err := s.queryEach(ctx, `SELECT `+catalogCols+` FROM uc_catalogs ORDER BY name`, nil, func(rows *sql.Rows) error {
		c, err := scanCatalog(rows)
		out = append(out, c)
		return err
	})
	return out, err
}

// DeleteCatalog implements volumes.Store.
func (s *VolumeStore) DeleteCatalog(ctx context.Context, name string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		// The catalog's row is locked first, as CreateSchema locks it: no
		// schema can appear between the count and the delete.
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM uc_catalogs WHERE name = ?`+tx.lock(), name).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return volumes.CatalogNotFound(name)
		}
		if err != nil {
			return sqlError(err, "get catalog")
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM uc_schemas WHERE catalog = ?`, name).Scan(&n); err != nil {
			return sqlError(err, "count schemas")
		}
		if n > 0 {
			return volumes.CatalogNotEmpty(name, n)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM uc_catalogs WHERE name = ?`, name)
		if err != nil {
			return sqlError(err, "delete catalog")
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return volumes.CatalogNotFound(name)
		}
		return deleteGrants(ctx, tx, workspace.ResourceCatalog, name)
	})
}

func deleteGrants(ctx context.Context, tx *wtx, kind workspace.ResourceKind, key string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM grants WHERE resource_kind = ? AND resource_key = ?`, int(kind), key)
	return sqlError(err, "delete grants")
}

// CreateSchema implements volumes.Store.
func (s *VolumeStore) CreateSchema(ctx context.Context, sc *volumes.Schema) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM uc_catalogs WHERE name = ?`+tx.lock(), sc.Catalog).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return volumes.CatalogNotFound(sc.Catalog)
		}
		if err != nil {
			return sqlError(err, "get catalog")
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO uc_schemas (catalog, name, comment, owner_id, owner, created_time, updated_time) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			sc.Catalog, sc.Name, sc.Comment, sc.OwnerID, sc.Owner, sc.CreatedMs, sc.UpdatedMs)
		return sqlError(err, "schema "+sc.FullName()+" already exists")
	})
}

const schemaCols = `catalog, name, comment, owner_id, owner, created_time, updated_time`

func scanSchema(sc interface{ Scan(...any) error }) (*volumes.Schema, error) {
	s := &volumes.Schema{}
	return s, sc.Scan(&s.Catalog, &s.Name, &s.Comment, &s.OwnerID, &s.Owner, &s.CreatedMs, &s.UpdatedMs)
}

// GetSchema implements volumes.Store.
func (s *VolumeStore) GetSchema(ctx context.Context, catalog, name string) (*volumes.Schema, error) {
	sc, err := scanSchema(s.rdb.QueryRowContext(ctx, `SELECT `+schemaCols+` FROM uc_schemas WHERE catalog = ? AND name = ?`, catalog, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, volumes.SchemaNotFound(catalog, name)
	}
	return sc, sqlError(err, "get schema")
}

// ListSchemas implements volumes.Store.
func (s *VolumeStore) ListSchemas(ctx context.Context, catalog string) ([]*volumes.Schema, error) {
	var out []*volumes.Schema
	err := s.queryEach(ctx, `SELECT `+schemaCols+` FROM uc_schemas WHERE catalog = ? ORDER BY name`, []any{catalog}, func(rows *sql.Rows) error {
		sc, err := scanSchema(rows)
		out = append(out, sc)
		return err
	})
	return out, err
}

// DeleteSchema implements volumes.Store.
func (s *VolumeStore) DeleteSchema(ctx context.Context, catalog, name string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM uc_schemas WHERE catalog = ? AND name = ?`+tx.lock(), catalog, name).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return volumes.SchemaNotFound(catalog, name)
		}
		if err != nil {
			return sqlError(err, "get schema")
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM uc_volumes WHERE catalog = ? AND schema_name = ?`, catalog, name).Scan(&n); err != nil {
			return sqlError(err, "count volumes")
		}
		if n > 0 {
			return volumes.SchemaNotEmpty(catalog, name, n)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM uc_schemas WHERE catalog = ? AND name = ?`, catalog, name)
		if err != nil {
			return sqlError(err, "delete schema")
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return volumes.SchemaNotFound(catalog, name)
		}
		return deleteGrants(ctx, tx, workspace.ResourceSchema, catalog+"."+name)
	})
}

// CreateVolume implements volumes.Store.
func (s *VolumeStore) CreateVolume(ctx context.Context, v *volumes.Volume) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM uc_schemas WHERE catalog = ? AND name = ?`+tx.lock(), v.Catalog, v.Schema).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return volumes.SchemaNotFound(v.Catalog, v.Schema)
		}
		if err != nil {
			return sqlError(err, "get schema")
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO uc_volumes (volume_id, catalog, schema_name, name, comment, owner_id, owner, created_time, updated_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			v.ID, v.Catalog, v.Schema, v.Name, v.Comment, v.OwnerID, v.Owner, v.CreatedMs, v.UpdatedMs)
		return sqlError(err, "volume "+v.FullName()+" already exists")
	})
}

const volumeCols = `volume_id, catalog, schema_name, name, comment, owner_id, owner, created_time, updated_time`

func scanVolume(sc interface{ Scan(...any) error }) (*volumes.Volume, error) {
	v := &volumes.Volume{}
	return v, sc.Scan(&v.ID, &v.Catalog, &v.Schema, &v.Name, &v.Comment, &v.OwnerID, &v.Owner, &v.CreatedMs, &v.UpdatedMs)
}

// GetVolume implements volumes.Store.
func (s *VolumeStore) GetVolume(ctx context.Context, catalog, schema, name string) (*volumes.Volume, error) {
	v, err := scanVolume(s.rdb.QueryRowContext(ctx, `SELECT `+volumeCols+` FROM uc_volumes WHERE catalog = ? AND schema_name = ? AND name = ?`, catalog, schema, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, volumes.VolumeNotFound(catalog + "." + schema + "." + name)
	}
	return v, sqlError(err, "get volume")
}

// ListVolumes implements volumes.Store.
func (s *VolumeStore) ListVolumes(ctx context.Context, catalog, schema string) ([]*volumes.Volume, error) {
	q, args := `SELECT `+volumeCols+` FROM uc_volumes WHERE catalog = ? AND schema_name = ? ORDER BY name`, []any{catalog, schema}
	if schema == "" {
		q, args = `SELECT `+volumeCols+` FROM uc_volumes WHERE catalog = ? ORDER BY schema_name, name`, []any{catalog}
	}
	var out []*volumes.Volume
	err := s.queryEach(ctx, q, args, func(rows *sql.Rows) error {
		v, err := scanVolume(rows)
		out = append(out, v)
		return err
	})
	return out, err
}

// DeleteVolume implements volumes.Store.
func (s *VolumeStore) DeleteVolume(ctx context.Context, id string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var full string
		err := tx.QueryRowContext(ctx, `SELECT catalog || '.' || schema_name || '.' || name FROM uc_volumes WHERE volume_id = ?`, id).Scan(&full)
		if errors.Is(err, sql.ErrNoRows) {
			return volumes.VolumeNotFound(id)
		}
		if err != nil {
			return sqlError(err, "get volume")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM uc_volumes WHERE volume_id = ?`, id); err != nil {
			return sqlError(err, "delete volume")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM uc_volume_uploads WHERE volume_id = ?`, id); err != nil {
			return sqlError(err, "delete volume")
		}
		return deleteGrants(ctx, tx, workspace.ResourceVolume, full)
	})
}

// VolumeIDs implements volumes.Store.
func (s *VolumeStore) VolumeIDs(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	err := s.queryEach(ctx, `SELECT volume_id FROM uc_volumes`, nil, func(rows *sql.Rows) error {
		var id string
		err := rows.Scan(&id)
		out[id] = true
		return err
	})
	return out, err
}

// ClaimUpload implements volumes.Store. The volume's row is locked first
// (on PostgreSQL; SQLite has one writer), so claims into one volume from
// every replica are checked and recorded one at a time.
func (s *VolumeStore) ClaimUpload(ctx context.Context, u *volumes.Upload, nowMs int64, check func(inFlight []volumes.Upload) error) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM uc_volumes WHERE volume_id = ?`+tx.lock(), u.VolumeID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return volumes.VolumeNotFound(u.VolumeID)
		}
		if err != nil {
			return sqlError(err, "claim upload")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM uc_volume_uploads WHERE volume_id = ? AND dir = ? AND expires < ?`, u.VolumeID, u.Dir, nowMs); err != nil {
			return sqlError(err, "claim upload")
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, name, instance, started, expires FROM uc_volume_uploads WHERE volume_id = ? AND dir = ? ORDER BY id`, u.VolumeID, u.Dir)
		if err != nil {
			return sqlError(err, "claim upload")
		}
		var others []volumes.Upload
		for rows.Next() {
			o := volumes.Upload{VolumeID: u.VolumeID, Dir: u.Dir}
			if err := rows.Scan(&o.ID, &o.Name, &o.Instance, &o.StartedMs, &o.ExpiresMs); err != nil {
				rows.Close()
				return sqlError(err, "claim upload")
			}
			others = append(others, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return sqlError(err, "claim upload")
		}
		if err := check(others); err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO uc_volume_uploads (volume_id, dir, name, instance, started, expires) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			u.VolumeID, u.Dir, u.Name, u.Instance, u.StartedMs, u.ExpiresMs).Scan(&u.ID)
		return sqlError(err, "claim upload")
	})
}

// RenewUpload implements volumes.Store.
func (s *VolumeStore) RenewUpload(ctx context.Context, id, expiresMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `UPDATE uc_volume_uploads SET expires = ? WHERE id = ?`, expiresMs, id)
		return sqlError(err, "renew upload claim")
	})
}

// ReleaseUpload implements volumes.Store. The claim is matched by its file
// too: SQLite may give a released claim's id to a new one.
func (s *VolumeStore) ReleaseUpload(ctx context.Context, u *volumes.Upload, landed bool) error {
	return s.w.do(ctx, func(tx *wtx) error {
		q := `DELETE FROM uc_volume_uploads WHERE volume_id = ? AND dir = ? AND name = ? AND id = ?`
		if landed {
			q = `DELETE FROM uc_volume_uploads WHERE volume_id = ? AND dir = ? AND name = ? AND id <= ?`
		}
		_, err := tx.ExecContext(ctx, q, u.VolumeID, u.Dir, u.Name, u.ID)
		return sqlError(err, "release upload claim")
	})
}

// instanceLease names the lease that holds a server instance's liveness
// on a shared database.
const instanceLeasePrefix = "volume-uploads:"

// StartInstance implements volumes.Store. SQLite's database belongs to one
// server process (docs/deploy.md), so every other instance is gone; on
// PostgreSQL the instance's liveness is a lease, and an instance without a
// live lease is gone.
func (s *VolumeStore) StartInstance(ctx context.Context, id string, nowMs, expiresMs int64) (int64, error) {
	if !s.shared() {
		var n int64
		err := s.w.do(ctx, func(tx *wtx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM uc_volume_uploads WHERE instance <> '' AND instance <> ?`, id)
			if err != nil {
				return sqlError(err, "release the upload claims of servers that are gone")
			}
			n, _ = res.RowsAffected()
			return nil
		})
		return n, err
	}
	return s.keepInstance(ctx, id, nowMs, expiresMs, true)
}

// KeepInstance implements volumes.Store; on SQLite it does nothing (no
// other process shares the database).
func (s *VolumeStore) KeepInstance(ctx context.Context, id string, nowMs, expiresMs int64) (int64, error) {
	if !s.shared() {
		return 0, nil
	}
	return s.keepInstance(ctx, id, nowMs, expiresMs, false)
}

// keepInstance records id's lease until expiresMs and removes the claims
// of instances whose lease expired before nowMs, and with unrecorded also
// those of instances that have no lease.
func (s *db) keepInstance(ctx context.Context, id string, nowMs, expiresMs int64, unrecorded bool) (int64, error) {
	var n int64
	err := s.w.do(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO leases (name, holder, expires) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires`, instanceLeasePrefix+id, id, expiresMs); err != nil {
			return sqlError(err, "renew the volumes instance lease")
		}
		q := `DELETE FROM uc_volume_uploads WHERE instance <> '' AND instance <> ? AND EXISTS (
			SELECT 1 FROM leases WHERE leases.name = ? || uc_volume_uploads.instance AND leases.expires < ?)`
		if unrecorded {
			q = `DELETE FROM uc_volume_uploads WHERE instance <> '' AND instance <> ? AND NOT EXISTS (
				SELECT 1 FROM leases WHERE leases.name = ? || uc_volume_uploads.instance AND leases.expires >= ?)`
		}
		res, err := tx.ExecContext(ctx, q, id, instanceLeasePrefix, nowMs)
		if err != nil {
			return sqlError(err, "release the upload claims of replicas that are gone")
		}
		n, _ = res.RowsAffected()
		// The leases of gone instances, once their claims are gone.
		_, err = tx.ExecContext(ctx, `DELETE FROM leases WHERE name LIKE ? AND expires < ? AND NOT EXISTS (
			SELECT 1 FROM uc_volume_uploads WHERE ? || uc_volume_uploads.instance = leases.name)`, instanceLeasePrefix+"%", nowMs, instanceLeasePrefix)
		return sqlError(err, "drop the leases of replicas that are gone")
	})
	return n, err
}

// StopInstance implements volumes.Store.
func (s *VolumeStore) StopInstance(ctx context.Context, id string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM uc_volume_uploads WHERE instance = ?`, id); err != nil {
			return sqlError(err, "release the instance's upload claims")
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = ?`, instanceLeasePrefix+id)
		return sqlError(err, "release the volumes instance lease")
	})
}

// UpdateCatalog implements volumes.Store.
func (s *VolumeStore) UpdateCatalog(ctx context.Context, c *volumes.Catalog) error {
	return s.updateSecurable(ctx, "catalog "+c.Name, `UPDATE uc_catalogs SET comment = ?, owner_id = ?, owner = ?, updated_time = ? WHERE name = ?`,
		c.Comment, c.OwnerID, c.Owner, c.UpdatedMs, c.Name)
}

// UpdateSchema implements volumes.Store.
func (s *VolumeStore) UpdateSchema(ctx context.Context, sc *volumes.Schema) error {
	return s.updateSecurable(ctx, "schema "+sc.FullName(), `UPDATE uc_schemas SET comment = ?, owner_id = ?, owner = ?, updated_time = ? WHERE catalog = ? AND name = ?`,
		sc.Comment, sc.OwnerID, sc.Owner, sc.UpdatedMs, sc.Catalog, sc.Name)
}

// UpdateVolume implements volumes.Store.
func (s *VolumeStore) UpdateVolume(ctx context.Context, v *volumes.Volume) error {
	return s.updateSecurable(ctx, "volume "+v.FullName(), `UPDATE uc_volumes SET comment = ?, owner_id = ?, owner = ?, updated_time = ? WHERE volume_id = ?`,
		v.Comment, v.OwnerID, v.Owner, v.UpdatedMs, v.ID)
}

func (s *db) updateSecurable(ctx context.Context, what, query string, args ...any) error {
	return s.w.do(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return sqlError(err, "update "+what)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return errs.Errorf(errs.NotFound, "%s does not exist", what)
		}
		return nil
	})
}

// GetUserByEmail is the workspace's (volumes name owners by email).
func (s *VolumeStore) GetUserByEmail(ctx context.Context, email string) (*workspace.User, string, error) {
	return (&WorkspaceStore{s.db}).GetUserByEmail(ctx, email)
}

// Grants is the workspace's (volumes are securables of the workspace).
func (s *VolumeStore) Grants(ctx context.Context, rs []workspace.Resource) (map[workspace.Resource][]workspace.Grant, error) {
	return (&WorkspaceStore{s.db}).Grants(ctx, rs)
}
