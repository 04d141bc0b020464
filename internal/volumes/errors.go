package volumes

import (
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// The errors every volume store gives for missing and non-empty objects,
// worded here so that each backend answers alike. The missing ones are
// worded by the permission policy (workspace.NotFoundError), which answers
// a securable the caller may not see exactly as a missing one.

// CatalogNotFound is the error for a catalog name that names none.
func CatalogNotFound(name string) error {
	return workspace.NotFoundError(workspace.Resource{Kind: workspace.ResourceCatalog, Key: name})
}

// SchemaNotFound is the error for a schema a catalog does not have.
func SchemaNotFound(catalog, name string) error {
	return workspace.NotFoundError(workspace.Resource{Kind: workspace.ResourceSchema, Key: catalog + "." + name})
}

// VolumeNotFound is the error for a volume (its full name or id) that
// names none.
func VolumeNotFound(name string) error {
	return workspace.NotFoundError(workspace.Resource{Kind: workspace.ResourceVolume, Key: name})
}

// CatalogNotEmpty is the error for deleting a catalog that holds schemas.
func CatalogNotEmpty(name string, schemas int) error {
	return errs.Errorf(errs.Conflict, "catalog %s is not empty: it holds %d schema(s)", name, schemas)
}

// SchemaNotEmpty is the error for deleting a schema that holds volumes.
func SchemaNotEmpty(catalog, name string, volumes int) error {
	return errs.Errorf(errs.Conflict, "schema %s.%s is not empty: it holds %d volume(s)", catalog, name, volumes)
}
