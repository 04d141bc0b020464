package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// Options configure a Service.
type Options struct {
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// Instance names this server process among those sharing the store,
	// on the upload claims it holds; "" means the host name, the process
	// id and a random suffix.
	Instance string
	// InstanceTTL is how long this instance's upload claims outlive it
	// on a store that replicas share, should it die without a word: its
	// liveness is renewed every third of it; 0 means 15 s. On a store
	// one process owns, a restart releases them at once.
	InstanceTTL time.Duration
	// Secret signs the session tokens of multipart uploads; servers that
	// share a store must share it, and keep it across restarts, for
	// uploads in progress to continue. Empty means a random one (tokens
	// then last as long as the process).
	Secret []byte
	// UploadTokenTTL is how long a multipart upload's session token is
	// valid after initiate; 0 means DefaultUploadTokenTTL.
	UploadTokenTTL time.Duration
}

// DefaultUploadTokenTTL is how long multipart session tokens are valid by
// default (as the artifact proxy's part tokens).
const DefaultUploadTokenTTL = 24 * time.Hour

// DefaultInstanceTTL is Options.InstanceTTL's default.
const DefaultInstanceTTL = 15 * time.Second

// Service is the volumes domain: catalogs, schemas, volumes and their
// files, with every access checked. It is safe for concurrent use.
type Service struct {
	store    Store
	blobs    blob.Store
	now      func() time.Time
	log      *slog.Logger
	instance string
	ttl      time.Duration
	secret   []byte
	tokenTTL time.Duration

	stop func()
	wg   sync.WaitGroup
}

var _ workspace.ResourceChecker = (*Service)(nil)

// NewService returns a Service keeping metadata in store and files in
// blobs (a store of its own: keys are "<volume id>/<path>"). A server
// calls Start before serving and Close after.
func NewService(store Store, blobs blob.Store, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Instance == "" {
		host, _ := os.Hostname()
		opts.Instance = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), newID()[:8])
	}
	if opts.InstanceTTL <= 0 {
		opts.InstanceTTL = DefaultInstanceTTL
	}
	if len(opts.Secret) == 0 {
		opts.Secret = make([]byte, 32)
		_, _ = rand.Read(opts.Secret)
	}
	if opts.UploadTokenTTL <= 0 {
		opts.UploadTokenTTL = DefaultUploadTokenTTL
	}
	return &Service{store: store, blobs: blobs, now: opts.Now, log: opts.Logger, instance: opts.Instance, ttl: opts.InstanceTTL,
		secret: opts.Secret, tokenTTL: opts.UploadTokenTTL, stop: func() {}}
}

// Start registers this server instance with the store, which releases
// the upload claims of instances that are gone (a server killed in the
// middle of uploads: its claims would otherwise hold back the .metadata
// of those checkpoints until they expire), and keeps the instance alive
// in the background until Close. On a full disk, where the server starts
// read-only, registering waits for space: it is tried again in the
// background (no upload can be claimed meanwhile: that is a write too).
func (s *Service) Start(ctx context.Context) error {
	registered, err := s.register(ctx)
	if err != nil && errs.CodeOf(err) != errs.InsufficientStorage {
		return err
	}
	if err != nil {
		s.log.Warn("the disk is full: the volumes service instance registers once space is freed", "err", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = cancel
	s.wg.Go(func() { s.keepAlive(lctx, registered) })
	return nil
}

// register records this instance and releases the claims of instances
// that are gone; it reports whether it did.
func (s *Service) register(ctx context.Context) (bool, error) {
	now := s.nowMs()
	n, err := s.store.StartInstance(ctx, s.instance, now, now+s.ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("register the volumes service instance: %w", err)
	}
	if n > 0 {
		s.log.Info("released the upload claims of servers that are gone", "claims", n)
	}
	return true, nil
}

// keepAlive renews the instance every third of its lifetime, and first
// registers it where Start could not.
func (s *Service) keepAlive(ctx context.Context, registered bool) {
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !registered {
			var err error
			if registered, err = s.register(ctx); registered {
				s.log.Info("registered the volumes service instance: there is space again")
			} else if ctx.Err() == nil && errs.CodeOf(err) != errs.InsufficientStorage {
				s.log.Warn("register the volumes service instance", "err", err)
			}
			continue
		}
		now := s.nowMs()
		n, err := s.store.KeepInstance(ctx, s.instance, now, now+s.ttl.Milliseconds())
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("renew the volumes service instance (its upload claims may be released by another replica)", "instance", s.instance, "err", err)
		case n > 0:
			s.log.Info("released the upload claims of replicas that are gone", "claims", n)
		}
	}
}

// Close stops the background renewal and removes this instance's claims
// (the server has finished its requests) and liveness.
func (s *Service) Close(ctx context.Context) error {
	s.stop()
	s.wg.Wait()
	return s.store.StopInstance(ctx, s.instance)
}

func (s *Service) nowMs() int64 { return s.now().UnixMilli() }

// ---- authorization ----

// node is a securable and the securables above it, for authorize.
type node struct {
	res     workspace.Resource
	ownerID int64
	parent  *node
	// catalog and schema are the securable a catalog or schema node is,
	// for visible.
	catalog *Catalog
	schema  *Schema
}

func catalogNode(c *Catalog) *node {
	return &node{res: workspace.Resource{Kind: workspace.ResourceCatalog, Key: c.Name}, ownerID: c.OwnerID, catalog: c}
}

func schemaNode(c *Catalog, sc *Schema) *node {
	return &node{res: workspace.Resource{Kind: workspace.ResourceSchema, Key: sc.FullName()}, ownerID: sc.OwnerID, parent: catalogNode(c), schema: sc}
}

func volumeNode(c *Catalog, sc *Schema, v *Volume) *node {
	return &node{res: workspace.Resource{Kind: workspace.ResourceVolume, Key: v.FullName()}, ownerID: v.OwnerID, parent: schemaNode(c, sc)}
}

// chains returns, for each node, the grants on it and on each securable
// above it, nearest first, with the owner of each holding CAN_MANAGE: the
// chain workspace.Effective takes. One query serves all nodes.
func (s *Service) chains(ctx context.Context, nodes []*node) ([][][]workspace.Grant, error) {
	seen := map[workspace.Resource]bool{}
	var rs []workspace.Resource
	for _, n := range nodes {
		for m := n; m != nil; m = m.parent {
			if !seen[m.res] {
				seen[m.res] = true
				rs = append(rs, m.res)
			}
		}
	}
	grants, err := s.store.Grants(ctx, rs)
	if err != nil {
		return nil, err
	}
	out := make([][][]workspace.Grant, len(nodes))
	for i, n := range nodes {
		for m := n; m != nil; m = m.parent {
			g := grants[m.res]
			if m.ownerID > 0 {
				g = append(slices.Clip(g), workspace.Grant{Resource: m.res, Principal: workspace.Principal{Kind: workspace.PrincipalUser, ID: m.ownerID}, Level: workspace.CanManage})
			}
			out[i] = append(out[i], g)
		}
	}
	return out, nil
}

// authorize asks the permission policy (workspace.PermitVisible) whether
// the subject may do what needs need on n, given their level there
// (granted there or above, or as an owner) and whether they see it: nil,
// an error naming what is missing, or, for a securable they may not see,
// the error of a missing one.
func (s *Service) authorize(ctx context.Context, sub *workspace.Subject, n *node, need workspace.Level) error {
	ls, err := s.levels(ctx, sub, []*node{n})
	if err != nil {
		return err
	}
	op := securableOp(need)
	if ls[0] >= op.Level() || visible(ls[0]) {
		return workspace.Permit(ctx, sub, op, n.res, ls[0])
	}
	seen, err := s.seen(ctx, sub, n)
	if err != nil {
		return err
	}
	return workspace.PermitVisible(ctx, sub, op, n.res, ls[0], seen)
}

// seen reports whether the subject sees a catalog or schema without
// CAN_READ on it: it holds something they can read.
func (s *Service) seen(ctx context.Context, sub *workspace.Subject, n *node) (bool, error) {
	switch {
	case n.catalog != nil:
		return s.catalogVisible(ctx, sub, n.catalog)
	case n.schema != nil && n.parent != nil && n.parent.catalog != nil:
		vis, err := s.visibleSchemas(ctx, sub, n.parent.catalog, []*Schema{n.schema})
		return len(vis) > 0, err
	}
	return false, nil
}

// securableOp is the policy's operation on a securable that needs l.
func securableOp(l workspace.Level) workspace.Operation {
	switch {
	case l <= workspace.CanRead:
		return workspace.OpReadSecurable
	case l == workspace.CanEdit:
		return workspace.OpEditSecurable
	}
	return workspace.OpManageSecurable
}

// levels returns the subject's level on each node (for listings).
func (s *Service) levels(ctx context.Context, sub *workspace.Subject, nodes []*node) ([]workspace.Level, error) {
	out := make([]workspace.Level, len(nodes))
	if sub.IsActiveAdmin() {
		for i := range out {
			out[i] = workspace.CanManage
		}
		return out, nil
	}
	c, err := s.chains(ctx, nodes)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		out[i] = workspace.Effective(sub, c[i])
	}
	return out, nil
}

// visible reports whether a level lets the subject see a securable.
func visible(l workspace.Level) bool { return l >= workspace.OpReadSecurable.Level() }

// ResourceLevel implements workspace.ResourceChecker, for the permission
// API on catalogs, schemas and volumes: errs.NotFound when r names none.
func (s *Service) ResourceLevel(ctx context.Context, sub *workspace.Subject, r workspace.Resource) (workspace.Level, error) {
	var n *node
	switch r.Kind {
	case workspace.ResourceCatalog:
		c, err := s.catalog(ctx, r.Key)
		if err != nil {
			return workspace.NoAccess, err
		}
		n = catalogNode(c)
	case workspace.ResourceSchema:
		names, err := SplitFullName("schema", r.Key, 2)
		if err != nil {
			return workspace.NoAccess, err
		}
		c, sc, err := s.schema(ctx, names[0], names[1])
		if err != nil {
			return workspace.NoAccess, err
		}
		n = schemaNode(c, sc)
	case workspace.ResourceVolume:
		names, err := SplitFullName("volume", r.Key, 3)
		if err != nil {
			return workspace.NoAccess, err
		}
		c, sc, v, err := s.volume(ctx, names[0], names[1], names[2])
		if err != nil {
			return workspace.NoAccess, err
		}
		n = volumeNode(c, sc, v)
	default:
		return workspace.NoAccess, errs.Errorf(errs.Invalid, "%s is not a catalog, schema or volume", r)
	}
	ls, err := s.levels(ctx, sub, []*node{n})
	if err != nil {
		return workspace.NoAccess, err
	}
	return ls[0], nil
}

// ---- lookups ----

func (s *Service) catalog(ctx context.Context, name string) (*Catalog, error) {
	name, err := ValidateName("catalog", name)
	if err != nil {
		return nil, err
	}
	return s.store.GetCatalog(ctx, name)
}

func (s *Service) schema(ctx context.Context, catalog, name string) (*Catalog, *Schema, error) {
	c, err := s.catalog(ctx, catalog)
	if err != nil {
		return nil, nil, err
	}
	name, err = ValidateName("schema", name)
	if err != nil {
		return nil, nil, err
	}
	sc, err := s.store.GetSchema(ctx, c.Name, name)
	if err != nil {
		return nil, nil, err
	}
	return c, sc, nil
}

func (s *Service) volume(ctx context.Context, catalog, schema, name string) (*Catalog, *Schema, *Volume, error) {
	c, sc, err := s.schema(ctx, catalog, schema)
	if err != nil {
		return nil, nil, nil, err
	}
	name, err = ValidateName("volume", name)
	if err != nil {
		return nil, nil, nil, err
	}
	v, err := s.store.GetVolume(ctx, c.Name, sc.Name, name)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, sc, v, nil
}

// access looks up the volume of p and checks need on it.
func (s *Service) access(ctx context.Context, sub *workspace.Subject, p Path, need workspace.Level) (*Volume, error) {
	c, sc, v, err := s.volume(ctx, p.Catalog, p.Schema, p.Volume)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, volumeNode(c, sc, v), need); err != nil {
		return nil, err
	}
	return v, nil
}

func owner(sub *workspace.Subject) (int64, string) {
	if sub == nil || sub.User == nil {
		return 0, ""
	}
	return sub.User.ID, sub.User.Email
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- catalogs ----

// CreateCatalog creates a catalog (administrators only); its creator owns
// it.
func (s *Service) CreateCatalog(ctx context.Context, sub *workspace.Subject, name, comment string) (*Catalog, error) {
	name, err := ValidateName("catalog", name)
	if err != nil {
		return nil, err
	}
	if err := workspace.Permit(ctx, sub, workspace.OpCreateCatalog, workspace.Resource{}, workspace.NoAccess); err != nil {
		return nil, err
	}
	id, email := owner(sub)
	c := &Catalog{Name: name, Comment: comment, OwnerID: id, Owner: email, CreatedMs: s.nowMs(), UpdatedMs: s.nowMs()}
	if err := s.store.CreateCatalog(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCatalog returns a catalog the subject can see: one on which they hold
// CAN_READ, or that holds a schema or volume they can read.
func (s *Service) GetCatalog(ctx context.Context, sub *workspace.Subject, name string) (*Catalog, error) {
	c, err := s.catalog(ctx, name)
	if err != nil {
		return nil, err
	}
	ok, err := s.catalogVisible(ctx, sub, c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, s.authorize(ctx, sub, catalogNode(c), workspace.CanRead)
	}
	return c, nil
}

// ListCatalogs returns the catalogs the subject can see.
func (s *Service) ListCatalogs(ctx context.Context, sub *workspace.Subject) ([]*Catalog, error) {
	all, err := s.store.ListCatalogs(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Catalog
	for _, c := range all {
		ok, err := s.catalogVisible(ctx, sub, c)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// catalogVisible reports whether the subject can read the catalog or
// something in it.
func (s *Service) catalogVisible(ctx context.Context, sub *workspace.Subject, c *Catalog) (bool, error) {
	if sub.IsActiveAdmin() {
		return true, nil
	}
	schemas, err := s.store.ListSchemas(ctx, c.Name)
	if err != nil {
		return false, err
	}
	vols, err := s.store.ListVolumes(ctx, c.Name, "")
	if err != nil {
		return false, err
	}
	nodes := []*node{catalogNode(c)}
	byName := map[string]*Schema{}
	for _, sc := range schemas {
		nodes = append(nodes, schemaNode(c, sc))
		byName[sc.Name] = sc
	}
	for _, v := range vols {
		if sc := byName[v.Schema]; sc != nil {
			nodes = append(nodes, volumeNode(c, sc, v))
		}
	}
	ls, err := s.levels(ctx, sub, nodes)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(ls, visible), nil
}

// DeleteCatalog deletes a catalog (CAN_MANAGE on it). A catalog that holds
// schemas is refused unless force, which deletes them and their volumes.
func (s *Service) DeleteCatalog(ctx context.Context, sub *workspace.Subject, name string, force bool) error {
	c, err := s.catalog(ctx, name)
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, sub, catalogNode(c), workspace.CanManage); err != nil {
		return err
	}
	schemas, err := s.store.ListSchemas(ctx, c.Name)
	if err != nil {
		return err
	}
	if len(schemas) > 0 && !force {
		return errs.Errorf(errs.Conflict, "catalog %s is not empty (it holds schema %s); delete its schemas first, or pass force=true to delete them with their volumes and files", c.Name, schemas[0].FullName())
	}
	for _, sc := range schemas {
		if err := s.deleteSchema(ctx, sc, true); err != nil {
			return err
		}
	}
	return s.store.DeleteCatalog(ctx, c.Name)
}

// ---- schemas ----

// CreateSchema creates a schema in a catalog (CAN_EDIT on the catalog);
// its creator owns it.
func (s *Service) CreateSchema(ctx context.Context, sub *workspace.Subject, catalog, name, comment string) (*Schema, error) {
	c, err := s.catalog(ctx, catalog)
	if err != nil {
		return nil, err
	}
	name, err = ValidateName("schema", name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, catalogNode(c), workspace.CanEdit); err != nil {
		return nil, err
	}
	id, email := owner(sub)
	sc := &Schema{Catalog: c.Name, Name: name, Comment: comment, OwnerID: id, Owner: email, CreatedMs: s.nowMs(), UpdatedMs: s.nowMs()}
	if err := s.store.CreateSchema(ctx, sc); err != nil {
		return nil, err
	}
	return sc, nil
}

// GetSchema returns a schema the subject can see (CAN_READ on it, or on a
// volume in it).
func (s *Service) GetSchema(ctx context.Context, sub *workspace.Subject, catalog, name string) (*Schema, error) {
	c, sc, err := s.schema(ctx, catalog, name)
	if err != nil {
		return nil, err
	}
	vis, err := s.visibleSchemas(ctx, sub, c, []*Schema{sc})
	if err != nil {
		return nil, err
	}
	if len(vis) == 0 {
		return nil, s.authorize(ctx, sub, schemaNode(c, sc), workspace.CanRead)
	}
	return sc, nil
}

// ListSchemas returns the schemas of a catalog that the subject can see;
// a catalog they cannot see at all is refused.
func (s *Service) ListSchemas(ctx context.Context, sub *workspace.Subject, catalog string) ([]*Schema, error) {
	c, err := s.GetCatalog(ctx, sub, catalog)
	if err != nil {
		return nil, err
	}
	all, err := s.store.ListSchemas(ctx, c.Name)
	if err != nil {
		return nil, err
	}
	return s.visibleSchemas(ctx, sub, c, all)
}

func (s *Service) visibleSchemas(ctx context.Context, sub *workspace.Subject, c *Catalog, schemas []*Schema) ([]*Schema, error) {
	if sub.IsActiveAdmin() || len(schemas) == 0 {
		return schemas, nil
	}
	vols, err := s.store.ListVolumes(ctx, c.Name, "")
	if err != nil {
		return nil, err
	}
	var nodes []*node
	var owners []int // index into schemas of each node
	for i, sc := range schemas {
		nodes = append(nodes, schemaNode(c, sc))
		owners = append(owners, i)
		for _, v := range vols {
			if v.Schema == sc.Name {
				nodes = append(nodes, volumeNode(c, sc, v))
				owners = append(owners, i)
			}
		}
	}
	ls, err := s.levels(ctx, sub, nodes)
	if err != nil {
		return nil, err
	}
	ok := make([]bool, len(schemas))
	for i, l := range ls {
		if visible(l) {
			ok[owners[i]] = true
		}
	}
	var out []*Schema
	for i, sc := range schemas {
		if ok[i] {
			out = append(out, sc)
		}
	}
	return out, nil
}

// DeleteSchema deletes a schema (CAN_MANAGE on it). A schema that holds
// volumes is refused unless force, which deletes them and their files.
func (s *Service) DeleteSchema(ctx context.Context, sub *workspace.Subject, catalog, name string, force bool) error {
	c, sc, err := s.schema(ctx, catalog, name)
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, sub, schemaNode(c, sc), workspace.CanManage); err != nil {
		return err
	}
	return s.deleteSchema(ctx, sc, force)
}

func (s *Service) deleteSchema(ctx context.Context, sc *Schema, force bool) error {
	vols, err := s.store.ListVolumes(ctx, sc.Catalog, sc.Name)
	if err != nil {
		return err
	}
	if len(vols) > 0 && !force {
		return errs.Errorf(errs.Conflict, "schema %s is not empty (it holds volume %s); delete its volumes first, or pass force=true to delete them with their files", sc.FullName(), vols[0].FullName())
	}
	for _, v := range vols {
		if err := s.deleteVolume(ctx, v); err != nil {
			return err
		}
	}
	return s.store.DeleteSchema(ctx, sc.Catalog, sc.Name)
}

// ---- volumes ----

// CreateVolume creates a volume in a schema (CAN_EDIT on the schema); its
// creator owns it.
func (s *Service) CreateVolume(ctx context.Context, sub *workspace.Subject, catalog, schema, name, comment string) (*Volume, error) {
	c, sc, err := s.schema(ctx, catalog, schema)
	if err != nil {
		return nil, err
	}
	name, err = ValidateName("volume", name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, schemaNode(c, sc), workspace.CanEdit); err != nil {
		return nil, err
	}
	id, email := owner(sub)
	v := &Volume{ID: newID(), Catalog: c.Name, Schema: sc.Name, Name: name, Comment: comment, OwnerID: id, Owner: email, CreatedMs: s.nowMs(), UpdatedMs: s.nowMs()}
	if err := s.store.CreateVolume(ctx, v); err != nil {
		return nil, err
	}
	return v, nil
}

// GetVolume returns a volume (CAN_READ on it).
func (s *Service) GetVolume(ctx context.Context, sub *workspace.Subject, catalog, schema, name string) (*Volume, error) {
	c, sc, v, err := s.volume(ctx, catalog, schema, name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, sub, volumeNode(c, sc, v), workspace.CanRead); err != nil {
		return nil, err
	}
	return v, nil
}

// ListVolumes returns the volumes of a schema that the subject can read;
// a schema they cannot see at all is refused.
func (s *Service) ListVolumes(ctx context.Context, sub *workspace.Subject, catalog, schema string) ([]*Volume, error) {
	c, sc, err := s.schema(ctx, catalog, schema)
	if err != nil {
		return nil, err
	}
	if _, err := s.GetSchema(ctx, sub, c.Name, sc.Name); err != nil {
		return nil, err
	}
	vols, err := s.store.ListVolumes(ctx, c.Name, sc.Name)
	if err != nil {
		return nil, err
	}
	nodes := make([]*node, len(vols))
	for i, v := range vols {
		nodes[i] = volumeNode(c, sc, v)
	}
	ls, err := s.levels(ctx, sub, nodes)
	if err != nil {
		return nil, err
	}
	var out []*Volume
	for i, v := range vols {
		if visible(ls[i]) {
			out = append(out, v)
		}
	}
	return out, nil
}

// DeleteVolume deletes a volume and its files (CAN_MANAGE on it). Uploads
// still in flight into it fail and store nothing.
func (s *Service) DeleteVolume(ctx context.Context, sub *workspace.Subject, catalog, schema, name string) error {
	c, sc, v, err := s.volume(ctx, catalog, schema, name)
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, sub, volumeNode(c, sc, v), workspace.CanManage); err != nil {
		return err
	}
	return s.deleteVolume(ctx, v)
}

// deleteVolume removes the volume's row first, so that no new request
// reaches it and uploads in flight see it gone when they finish (and drop
// what they stored), then its files.
func (s *Service) deleteVolume(ctx context.Context, v *Volume) error {
	if err := s.store.DeleteVolume(ctx, v.ID); err != nil {
		return err
	}
	if err := s.blobs.DeleteAll(context.WithoutCancel(ctx), v.ID+"/"); err != nil {
		// The volume is gone for its users; RemoveOrphans retries at the
		// next start.
		s.log.Error("delete the files of a deleted volume", "volume", v.FullName(), "id", v.ID, "err", err)
	}
	return nil
}

// RemoveOrphans deletes the files of volumes that no longer exist (left
// by a deletion that failed or was interrupted). It lists the stored
// volume ids first and reads the volumes after: a volume created meanwhile
// (on another replica) is in the second read before any file of it can be
// in the listing.
func (s *Service) RemoveOrphans(ctx context.Context) error {
	var prefixes []string
	after := ""
	for {
		entries, err := s.blobs.List(ctx, "", after, 1000)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir {
				prefixes = append(prefixes, e.Name)
			}
		}
		if len(entries) < 1000 {
			break
		}
		after = entries[len(entries)-1].Name
	}
	ids, err := s.store.VolumeIDs(ctx)
	if err != nil {
		return err
	}
	for _, p := range prefixes {
		if id := p[:len(p)-1]; !ids[id] {
			s.log.Info("removing the files of a deleted volume", "id", id)
			if err := s.blobs.DeleteAll(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}
