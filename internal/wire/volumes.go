package wire

import (
	"github.com/sextant/sextant/internal/volumes"
)

// Volumes: catalogs, schemas and volumes in Unity Catalog's REST shapes
// (/api/2.1/unity-catalog/...), and the Databricks Files API
// (/api/2.0/fs/...), under /Volumes and /Workspace (docs/volumes.md).

// Catalog is a Unity Catalog catalog.
type Catalog struct {
	Name      string `json:"name"`
	FullName  string `json:"full_name"`
	Comment   string `json:"comment,omitempty"`
	Owner     string `json:"owner"`
	CreatedAt int64  `json:"created_at"`
	CreatedBy string `json:"created_by"`
	UpdatedAt int64  `json:"updated_at"`
}

// ToCatalog returns c's wire shape.
func ToCatalog(c *volumes.Catalog) Catalog {
	return Catalog{c.Name, c.Name, c.Comment, c.Owner, c.CreatedMs, c.Owner, c.UpdatedMs}
}

// Schema is a Unity Catalog schema.
type Schema struct {
	Name        string `json:"name"`
	CatalogName string `json:"catalog_name"`
	FullName    string `json:"full_name"`
	Comment     string `json:"comment,omitempty"`
	Owner       string `json:"owner"`
	CreatedAt   int64  `json:"created_at"`
	CreatedBy   string `json:"created_by"`
	UpdatedAt   int64  `json:"updated_at"`
}

// ToSchema returns sc's wire shape.
func ToSchema(sc *volumes.Schema) Schema {
	return Schema{sc.Name, sc.Catalog, sc.FullName(), sc.Comment, sc.Owner, sc.CreatedMs, sc.Owner, sc.UpdatedMs}
}

// Volume is a Unity Catalog volume; Sextant's are all MANAGED.
type Volume struct {
	Name        string `json:"name"`
	CatalogName string `json:"catalog_name"`
	SchemaName  string `json:"schema_name"`
	FullName    string `json:"full_name"`
	VolumeID    string `json:"volume_id"`
	VolumeType  string `json:"volume_type"`
	Comment     string `json:"comment,omitempty"`
	Owner       string `json:"owner"`
	CreatedAt   int64  `json:"created_at"`
	CreatedBy   string `json:"created_by"`
	UpdatedAt   int64  `json:"updated_at"`
}

// ToVolume returns v's wire shape.
func ToVolume(v *volumes.Volume) Volume {
	return Volume{v.Name, v.Catalog, v.Schema, v.FullName(), v.ID, "MANAGED", v.Comment, v.Owner, v.CreatedMs, v.Owner, v.UpdatedMs}
}

// CreateCatalogRequest is the body of POST /catalogs.
type CreateCatalogRequest struct {
	Name    string `json:"name"`
	Comment string `json:"comment,omitempty"`
}

// CreateSchemaRequest is the body of POST /schemas.
type CreateSchemaRequest struct {
	Name        string `json:"name"`
	CatalogName string `json:"catalog_name"`
	Comment     string `json:"comment,omitempty"`
}

// CreateVolumeRequest is the body of POST /volumes. Only MANAGED volumes
// without a storage location are supported.
type CreateVolumeRequest struct {
	CatalogName     string `json:"catalog_name"`
	SchemaName      string `json:"schema_name"`
	Name            string `json:"name"`
	VolumeType      string `json:"volume_type,omitempty"`
	Comment         string `json:"comment,omitempty"`
	StorageLocation string `json:"storage_location,omitempty"`
}

// UpdateRequest is the body of a PATCH of a catalog, schema or volume;
// nil fields stay as they are.
type UpdateRequest struct {
	NewName *string `json:"new_name,omitempty"`
	Comment *string `json:"comment,omitempty"`
	Owner   *string `json:"owner,omitempty"`
}

// CatalogsResponse answers GET /catalogs.
type CatalogsResponse struct {
	Catalogs      []Catalog `json:"catalogs"`
	NextPageToken string    `json:"next_page_token"`
}

// SchemasResponse answers GET /schemas.
type SchemasResponse struct {
	NextPageToken string   `json:"next_page_token"`
	Schemas       []Schema `json:"schemas"`
}

// VolumesResponse answers GET /volumes.
type VolumesResponse struct {
	NextPageToken string   `json:"next_page_token"`
	Volumes       []Volume `json:"volumes"`
}

// DirEntry is a file or directory of a Files API listing; a file's size
// is set, 0 included, and a directory's is absent.
type DirEntry struct {
	Path         string `json:"path"`
	Name         string `json:"name"`
	IsDirectory  bool   `json:"is_directory"`
	FileSize     *int64 `json:"file_size,omitempty"`
	LastModified int64  `json:"last_modified,omitempty"`
}

// DirListing answers GET /api/2.0/fs/directories/...: a page of entries,
// and the token of the next one ("" at the end).
type DirListing struct {
	Contents      []DirEntry `json:"contents"`
	NextPageToken string     `json:"next_page_token,omitempty"`
}

// FSEndpoint is one API of GET /api/2.0/fs/endpoints, how the Databricks
// SDK learns that this host's Files API takes multipart uploads.
type FSEndpoint struct {
	API                      string `json:"api"`
	APIVersion               string `json:"api_version"`
	Scheme                   string `json:"scheme"`
	Hostname                 string `json:"hostname"`
	MultipartUploadSupported bool   `json:"multipart_upload_supported"`
}

// FSEndpoints answers GET /api/2.0/fs/endpoints.
type FSEndpoints struct {
	Endpoints []FSEndpoint `json:"endpoints"`
}

// MultipartUpload answers action=initiate-upload.
type MultipartUpload struct {
	MultipartUpload struct {
		SessionToken string `json:"session_token"`
	} `json:"multipart_upload"`
}

// CompleteUploadRequest is the body of action=complete-upload: the
// parts in order, each with the ETag its upload answered.
type CompleteUploadRequest struct {
	Parts []UploadPart `json:"parts"`
}

// UploadPart is a part of a CompleteUploadRequest.
type UploadPart struct {
	PartNumber Int    `json:"part_number"`
	ETag       string `json:"etag"`
}
