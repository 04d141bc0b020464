// Package volumes holds Sextant's governed file storage: catalogs, schemas
// and volumes (Unity Catalog's three-level namespace), and the files inside
// volumes, addressed as /Volumes/<catalog>/<schema>/<volume>/<path>.
//
// Catalogs, schemas and volumes are kept by a Store (internal/sqlstore);
// files live in a blob store under their volume's id, so that a volume
// deleted and created again under the same name never sees the old files.
// Every operation checks the caller's level through one function,
// Service.authorize: CAN_READ reads, CAN_EDIT writes (and creates schemas
// in a catalog, volumes in a schema), CAN_MANAGE deletes and grants.
// Levels granted on a catalog are inherited by its schemas and volumes, on
// a schema by its volumes; the owner of a securable (its creator) holds
// CAN_MANAGE on it; administrators hold every level everywhere.
//
// The package knows nothing of HTTP or SQL.
package volumes

import (
	"context"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// Limits of names.
const (
	// MaxNameLen is the longest catalog, schema or volume name, in bytes.
	MaxNameLen = 255
)

// Catalog is the first level of the namespace.
type Catalog struct {
	Name    string
	Comment string
	// OwnerID is the owner's user id (-1: the local administrator of
	// single-user mode); Owner their email.
	OwnerID   int64
	Owner     string
	CreatedMs int64
	UpdatedMs int64
}

// Schema is the second level: a catalog's child.
type Schema struct {
	Catalog   string
	Name      string
	Comment   string
	OwnerID   int64
	Owner     string
	CreatedMs int64
	UpdatedMs int64
}

// FullName returns "<catalog>.<schema>".
func (s *Schema) FullName() string { return s.Catalog + "." + s.Name }

// Volume is the third level: a directory tree of files in a schema.
type Volume struct {
	// ID is a random identifier, fixed at creation: the volume's files are
	// stored under it.
	ID        string
	Catalog   string
	Schema    string
	Name      string
	Comment   string
	OwnerID   int64
	Owner     string
	CreatedMs int64
	UpdatedMs int64
}

// FullName returns "<catalog>.<schema>.<volume>".
func (v *Volume) FullName() string { return v.Catalog + "." + v.Schema + "." + v.Name }

// Path returns the volume's root, "/Volumes/<catalog>/<schema>/<volume>".
func (v *Volume) Path() string { return Root + "/" + v.Catalog + "/" + v.Schema + "/" + v.Name }

// Store keeps catalogs, schemas and volumes. Names are lowercase and valid
// (ValidateName). Every method is atomic and safe for concurrent use.
// Missing objects give errs.NotFound, duplicates errs.AlreadyExists.
type Store interface {
	// CreateCatalog stores a new catalog.
	CreateCatalog(ctx context.Context, c *Catalog) error
	// GetCatalog returns a catalog.
	GetCatalog(ctx context.Context, name string) (*Catalog, error)
	// ListCatalogs returns every catalog, ordered by name.
	ListCatalogs(ctx context.Context) ([]*Catalog, error)
	// DeleteCatalog removes a catalog and the grants on it. A catalog that
	// still holds schemas is errs.Conflict.
	DeleteCatalog(ctx context.Context, name string) error
	// UpdateCatalog stores the comment, owner and update time of the
	// catalog named c.Name.
	UpdateCatalog(ctx context.Context, c *Catalog) error

	// CreateSchema stores a new schema; a missing catalog is errs.NotFound.
	CreateSchema(ctx context.Context, s *Schema) error
	// GetSchema returns a schema.
	GetSchema(ctx context.Context, catalog, name string) (*Schema, error)
	// ListSchemas returns a catalog's schemas, ordered by name (an unknown
	// catalog has none).
	ListSchemas(ctx context.Context, catalog string) ([]*Schema, error)
	// DeleteSchema removes a schema and the grants on it. A schema that
	// still holds volumes is errs.Conflict.
	DeleteSchema(ctx context.Context, catalog, name string) error
	// UpdateSchema stores the comment, owner and update time of the schema
	// s.Catalog.s.Name.
	UpdateSchema(ctx context.Context, s *Schema) error

	// CreateVolume stores a new volume (v.ID set by the caller); a missing
	// schema is errs.NotFound.
	CreateVolume(ctx context.Context, v *Volume) error
	// GetVolume returns a volume by name.
	GetVolume(ctx context.Context, catalog, schema, name string) (*Volume, error)
	// ListVolumes returns the volumes of a schema, or of every schema of
	// the catalog when schema is "", ordered by schema and name.
	ListVolumes(ctx context.Context, catalog, schema string) ([]*Volume, error)
	// DeleteVolume removes the volume with this id and the grants on it.
	DeleteVolume(ctx context.Context, id string) error
	// UpdateVolume stores the comment, owner and update time of the volume
	// with id v.ID.
	UpdateVolume(ctx context.Context, v *Volume) error
	// VolumeIDs returns the ids of every volume.
	VolumeIDs(ctx context.Context) (map[string]bool, error)

	// GetUserByEmail returns a user (see workspace.Store), for a new owner.
	GetUserByEmail(ctx context.Context, email string) (*workspace.User, string, error)

	// Grants returns the grants on each resource (the workspace's grants;
	// see workspace.Store).
	Grants(ctx context.Context, rs []workspace.Resource) (map[workspace.Resource][]workspace.Grant, error)

	// ClaimUpload records u as an upload in flight and sets u.ID, if check
	// accepts the other unexpired uploads in flight into u's directory,
	// oldest first (check's error is returned as is). Check and record are
	// atomic across every server sharing the store; claims that expired
	// before nowMs are dropped first. A missing volume is errs.NotFound.
	ClaimUpload(ctx context.Context, u *Upload, nowMs int64, check func(inFlight []Upload) error) error
	// RenewUpload moves a claim's expiry to expiresMs.
	RenewUpload(ctx context.Context, id, expiresMs int64) error
	// ReleaseUpload removes the claim u (its ID, of its file); a missing
	// one is not an error. With landed set, u's file has just been
	// published, so the claims of the uploads of that file that began
	// before u (smaller IDs) go too: u supersedes them, as a retry does
	// the attempts it retries, whichever server they were made through.
	ReleaseUpload(ctx context.Context, u *Upload, landed bool) error

	// StartInstance records that the server instance id holds upload
	// claims (Upload.Instance) and is alive until expiresMs, and removes
	// the claims of instances that are gone, returning how many: on a
	// database that one server process owns (SQLite), those of every other
	// instance; on one that replicas share (PostgreSQL), those of
	// instances whose liveness expired before nowMs or was never recorded.
	// Claims of no instance only expire.
	StartInstance(ctx context.Context, id string, nowMs, expiresMs int64) (int64, error)
	// KeepInstance moves the liveness of instance id to expiresMs and, on
	// a shared database, removes the claims of instances whose liveness
	// expired before nowMs, returning how many. On a database one process
	// owns it may do nothing.
	KeepInstance(ctx context.Context, id string, nowMs, expiresMs int64) (int64, error)
	// StopInstance removes the claims of instance id and its liveness.
	StopInstance(ctx context.Context, id string) error
}

// Upload is a file upload in flight, as the store records it so that every
// replica sees it: Name into directory Dir (relative to the volume's root)
// of volume VolumeID, since StartedMs, until ExpiresMs unless renewed.
type Upload struct {
	ID        int64
	VolumeID  string
	Dir, Name string
	// Instance is the server instance whose request carries the upload,
	// so that the claim goes when that server does (see
	// Store.StartInstance); "" for an upload that no one request carries
	// (a multipart upload), whose claim only expires.
	Instance  string
	StartedMs int64
	ExpiresMs int64
}

// ValidateName checks a catalog, schema or volume name (kind names which,
// for messages) and returns it lowercased: names are case-insensitive, 1 to
// MaxNameLen letters, digits, '_' and '-', not starting with '-'.
func ValidateName(kind, name string) (string, error) {
	if name == "" {
		return "", errs.Errorf(errs.Invalid, "a %s name is required", kind)
	}
	if len(name) > MaxNameLen {
		return "", errs.Errorf(errs.Invalid, "%s name %q is longer than %d bytes", kind, errs.Truncate(name, 120), MaxNameLen)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
		case r == '-' && i > 0:
		default:
			return "", errs.Errorf(errs.Invalid, "invalid %s name %q: use letters, digits, '_' and '-' (not first)", kind, errs.Truncate(name, 120))
		}
	}
	return strings.ToLower(name), nil
}

// SplitFullName splits "<catalog>.<schema>[.<volume>]" into n validated
// names.
func SplitFullName(kind, full string, n int) ([]string, error) {
	parts := strings.Split(full, ".")
	if len(parts) != n {
		want := "<catalog>.<schema>"
		if n == 3 {
			want += ".<volume>"
		}
		return nil, errs.Errorf(errs.Invalid, "invalid %s name %q: want %s", kind, errs.Truncate(full, 120), want)
	}
	kinds := []string{"catalog", "schema", "volume"}
	for i, p := range parts {
		v, err := ValidateName(kinds[i], p)
		if err != nil {
			return nil, err
		}
		parts[i] = v
	}
	return parts, nil
}
