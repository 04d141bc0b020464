package volumes

import (
	"context"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// Update is a change to a catalog, schema or volume, as Unity Catalog's
// PATCH takes it: nil fields stay as they are.
type Update struct {
	// NewName renames; only the current name is accepted (see rename).
	NewName *string
	Comment *string
	// Owner is the new owner's email: an active user of the workspace.
	Owner *string
}

// UpdateCatalog changes a catalog's comment or owner (CAN_MANAGE on it).
func (s *Service) UpdateCatalog(ctx context.Context, sub *workspace.Subject, name string, u Update) (*Catalog, error) {
	c, err := s.catalog(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, catalogNode(c), workspace.CanManage); err != nil {
		return nil, err
	}
	if err := s.apply(ctx, "catalog", c.Name, u, &c.Comment, &c.OwnerID, &c.Owner, &c.UpdatedMs); err != nil {
		return nil, err
	}
	return c, s.store.UpdateCatalog(ctx, c)
}

// UpdateSchema changes a schema's comment or owner (CAN_MANAGE on it).
func (s *Service) UpdateSchema(ctx context.Context, sub *workspace.Subject, catalog, name string, u Update) (*Schema, error) {
	c, sc, err := s.schema(ctx, catalog, name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, schemaNode(c, sc), workspace.CanManage); err != nil {
		return nil, err
	}
	if err := s.apply(ctx, "schema", sc.Name, u, &sc.Comment, &sc.OwnerID, &sc.Owner, &sc.UpdatedMs); err != nil {
		return nil, err
	}
	return sc, s.store.UpdateSchema(ctx, sc)
}

// UpdateVolume changes a volume's comment or owner (CAN_MANAGE on it).
func (s *Service) UpdateVolume(ctx context.Context, sub *workspace.Subject, catalog, schema, name string, u Update) (*Volume, error) {
	c, sc, v, err := s.volume(ctx, catalog, schema, name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, volumeNode(c, sc, v), workspace.CanManage); err != nil {
		return nil, err
	}
	if err := s.apply(ctx, "volume", v.Name, u, &v.Comment, &v.OwnerID, &v.Owner, &v.UpdatedMs); err != nil {
		return nil, err
	}
	return v, s.store.UpdateVolume(ctx, v)
}

// apply checks u and applies it to the fields of a securable named name.
// Renaming is refused: grants name their securable by its full name, and
// paths under /Volumes by its names, in jobs and checkpoints that would
// break; a new securable and a copy do what a rename would.
func (s *Service) apply(ctx context.Context, kind, name string, u Update, comment *string, ownerID *int64, ownerEmail *string, updatedMs *int64) error {
	if u.NewName != nil {
		if n, err := ValidateName(kind, *u.NewName); err != nil || n != name {
			return errs.Errorf(errs.Invalid, "renaming a %s is not supported (%s to %q): create a new one and copy what it holds (sextant volumes cp -r), then delete this one", kind, name, *u.NewName)
		}
	}
	if u.Owner != nil {
		usr, _, err := s.store.GetUserByEmail(ctx, *u.Owner)
		if errs.Is(err, errs.NotFound) || err == nil && usr.Disabled {
			return errs.Errorf(errs.Invalid, "owner %q is not an active user of this workspace", *u.Owner)
		}
		if err != nil {
			return err
		}
		*ownerID, *ownerEmail = usr.ID, usr.Email
	}
	if u.Comment != nil {
		*comment = *u.Comment
	}
	*updatedMs = s.nowMs()
	return nil
}
