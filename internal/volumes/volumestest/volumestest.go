// Package volumestest holds the conformance suite every volumes.Store
// passes.
package volumestest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/workspace"
)

// Store is what the suite needs: a volumes.Store that can also set grants
// (as the workspace's store does), to check that deletions drop them.
type Store interface {
	volumes.Store
	SetGrant(ctx context.Context, g workspace.Grant) error
}

// Sharing says how many server processes use a store: it decides which
// instances' upload claims a starting server releases (see
// volumes.Store.StartInstance).
type Sharing int

const (
	// Exclusive: one server process owns the store (SQLite).
	Exclusive Sharing = 1
	// Shared: replicas share the store (PostgreSQL).
	Shared Sharing = 2
)

// RunStoreTests runs the suite; open returns an empty store for each
// subtest, shared by as many processes as sharing says.
func RunStoreTests(t *testing.T, sharing Sharing, open func(t *testing.T) Store) {
	t.Run("Catalogs", func(t *testing.T) { testCatalogs(t, open(t)) })
	t.Run("Schemas", func(t *testing.T) { testSchemas(t, open(t)) })
	t.Run("Volumes", func(t *testing.T) { testVolumes(t, open(t)) })
	t.Run("DeleteDropsGrants", func(t *testing.T) { testDeleteDropsGrants(t, open(t)) })
	t.Run("UploadClaims", func(t *testing.T) { testUploadClaims(t, open(t)) })
	t.Run("LandedUploadSupersedesEarlierClaims", func(t *testing.T) { testLandedUploadSupersedes(t, open(t)) })
	t.Run("ClaimsGoWithTheirInstance", func(t *testing.T) { testClaimsGoWithTheirInstance(t, open(t), sharing) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, open(t)) })
}

func testUpdate(t *testing.T, s Store) {
	ctx := t.Context()
	must(t, "create catalog", s.CreateCatalog(ctx, &volumes.Catalog{Name: "main", Comment: "a", OwnerID: 1, Owner: "a@x", CreatedMs: 1, UpdatedMs: 1}))
	must(t, "create schema", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "team", Comment: "a", OwnerID: 1, Owner: "a@x", CreatedMs: 1, UpdatedMs: 1}))
	must(t, "create volume", s.CreateVolume(ctx, &volumes.Volume{ID: "v1", Catalog: "main", Schema: "team", Name: "ckpt", Comment: "a", OwnerID: 1, Owner: "a@x", CreatedMs: 1, UpdatedMs: 1}))
	must(t, "update catalog", s.UpdateCatalog(ctx, &volumes.Catalog{Name: "main", Comment: "b", OwnerID: 2, Owner: "b@x", CreatedMs: 99, UpdatedMs: 5}))
	must(t, "update schema", s.UpdateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "team", Comment: "c", OwnerID: 3, Owner: "c@x", UpdatedMs: 6}))
	must(t, "update volume", s.UpdateVolume(ctx, &volumes.Volume{ID: "v1", Catalog: "other", Name: "other", Comment: "d", OwnerID: 4, Owner: "d@x", UpdatedMs: 7}))
	c, err := s.GetCatalog(ctx, "main")
	must(t, "get catalog", err)
	if c.Comment != "b" || c.OwnerID != 2 || c.Owner != "b@x" || c.CreatedMs != 1 || c.UpdatedMs != 5 {
		t.Fatalf("catalog: %+v", c)
	}
	sc, err := s.GetSchema(ctx, "main", "team")
	must(t, "get schema", err)
	if sc.Comment != "c" || sc.OwnerID != 3 || sc.Owner != "c@x" || sc.CreatedMs != 1 || sc.UpdatedMs != 6 {
		t.Fatalf("schema: %+v", sc)
	}
	// A volume is updated by id; its names stay.
	v, err := s.GetVolume(ctx, "main", "team", "ckpt")
	must(t, "get volume", err)
	if v.ID != "v1" || v.Comment != "d" || v.OwnerID != 4 || v.Owner != "d@x" || v.CreatedMs != 1 || v.UpdatedMs != 7 {
		t.Fatalf("volume: %+v", v)
	}
	wantCode(t, "update missing catalog", s.UpdateCatalog(ctx, &volumes.Catalog{Name: "nope"}), errs.NotFound)
	wantCode(t, "update missing schema", s.UpdateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "nope"}), errs.NotFound)
	wantCode(t, "update missing volume", s.UpdateVolume(ctx, &volumes.Volume{ID: "nope"}), errs.NotFound)
}

func wantCode(t *testing.T, what string, err error, code errs.Code) {
	t.Helper()
	if errs.CodeOf(err) != code {
		t.Fatalf("%s: got %v (code %q), want code %q", what, err, errs.CodeOf(err), code)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testCatalogs(t *testing.T, s Store) {
	ctx := t.Context()
	for _, n := range []string{"zeta", "alpha", "main"} {
		must(t, "create "+n, s.CreateCatalog(ctx, &volumes.Catalog{Name: n, Comment: "c " + n, OwnerID: 7, Owner: "o@x", CreatedMs: 1, UpdatedMs: 2}))
	}
	wantCode(t, "duplicate", s.CreateCatalog(ctx, &volumes.Catalog{Name: "main"}), errs.AlreadyExists)
	c, err := s.GetCatalog(ctx, "main")
	must(t, "get", err)
	if c.Name != "main" || c.Comment != "c main" || c.OwnerID != 7 || c.Owner != "o@x" || c.CreatedMs != 1 || c.UpdatedMs != 2 {
		t.Fatalf("get: %+v", c)
	}
	_, err = s.GetCatalog(ctx, "nope")
	wantCode(t, "get missing", err, errs.NotFound)
	all, err := s.ListCatalogs(ctx)
	must(t, "list", err)
	if len(all) != 3 || all[0].Name != "alpha" || all[1].Name != "main" || all[2].Name != "zeta" {
		t.Fatalf("list: %v", names(all))
	}
	must(t, "delete", s.DeleteCatalog(ctx, "zeta"))
	wantCode(t, "delete again", s.DeleteCatalog(ctx, "zeta"), errs.NotFound)
	_, err = s.GetCatalog(ctx, "zeta")
	wantCode(t, "get deleted", err, errs.NotFound)
}

func names(cs []*volumes.Catalog) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func testSchemas(t *testing.T, s Store) {
	ctx := t.Context()
	wantCode(t, "schema in a missing catalog", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "a"}), errs.NotFound)
	must(t, "catalog", s.CreateCatalog(ctx, &volumes.Catalog{Name: "main"}))
	must(t, "catalog", s.CreateCatalog(ctx, &volumes.Catalog{Name: "other"}))
	for _, n := range []string{"b", "a"} {
		must(t, "schema "+n, s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: n, Comment: "x", OwnerID: 3, Owner: "u@x", CreatedMs: 5, UpdatedMs: 6}))
	}
	must(t, "same name in another catalog", s.CreateSchema(ctx, &volumes.Schema{Catalog: "other", Name: "a"}))
	wantCode(t, "duplicate", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "a"}), errs.AlreadyExists)
	sc, err := s.GetSchema(ctx, "main", "a")
	must(t, "get", err)
	if sc.FullName() != "main.a" || sc.Comment != "x" || sc.OwnerID != 3 || sc.Owner != "u@x" || sc.CreatedMs != 5 || sc.UpdatedMs != 6 {
		t.Fatalf("get: %+v", sc)
	}
	_, err = s.GetSchema(ctx, "main", "c")
	wantCode(t, "get missing", err, errs.NotFound)
	list, err := s.ListSchemas(ctx, "main")
	must(t, "list", err)
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("list: %+v", list)
	}
	if list, _ := s.ListSchemas(ctx, "nope"); len(list) != 0 {
		t.Fatalf("list of a missing catalog: %+v", list)
	}
	wantCode(t, "delete a catalog with schemas", s.DeleteCatalog(ctx, "main"), errs.Conflict)
	must(t, "delete", s.DeleteSchema(ctx, "main", "a"))
	must(t, "delete", s.DeleteSchema(ctx, "main", "b"))
	wantCode(t, "delete again", s.DeleteSchema(ctx, "main", "b"), errs.NotFound)
	must(t, "delete the emptied catalog", s.DeleteCatalog(ctx, "main"))
}

func testVolumes(t *testing.T, s Store) {
	ctx := t.Context()
	must(t, "catalog", s.CreateCatalog(ctx, &volumes.Catalog{Name: "main"}))
	wantCode(t, "volume in a missing schema", s.CreateVolume(ctx, &volumes.Volume{ID: "v0", Catalog: "main", Schema: "s", Name: "v"}), errs.NotFound)
	must(t, "schema", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "s"}))
	must(t, "schema", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "r"}))
	vols := []*volumes.Volume{
		{ID: "id2", Catalog: "main", Schema: "s", Name: "b", Comment: "c", OwnerID: 4, Owner: "o@x", CreatedMs: 8, UpdatedMs: 9},
		{ID: "id1", Catalog: "main", Schema: "s", Name: "a"},
		{ID: "id3", Catalog: "main", Schema: "r", Name: "a"},
	}
	for _, v := range vols {
		must(t, "volume "+v.FullName(), s.CreateVolume(ctx, v))
	}
	wantCode(t, "duplicate name", s.CreateVolume(ctx, &volumes.Volume{ID: "id9", Catalog: "main", Schema: "s", Name: "a"}), errs.AlreadyExists)
	wantCode(t, "duplicate id", s.CreateVolume(ctx, &volumes.Volume{ID: "id1", Catalog: "main", Schema: "s", Name: "z"}), errs.AlreadyExists)
	v, err := s.GetVolume(ctx, "main", "s", "b")
	must(t, "get", err)
	if *v != *vols[0] {
		t.Fatalf("get: %+v, want %+v", v, vols[0])
	}
	_, err = s.GetVolume(ctx, "main", "r", "b")
	wantCode(t, "get missing", err, errs.NotFound)
	list, err := s.ListVolumes(ctx, "main", "s")
	must(t, "list", err)
	if len(list) != 2 || list[0].ID != "id1" || list[1].ID != "id2" {
		t.Fatalf("list of a schema: %+v", list)
	}
	list, err = s.ListVolumes(ctx, "main", "")
	must(t, "list", err)
	if len(list) != 3 || list[0].ID != "id3" || list[1].ID != "id1" || list[2].ID != "id2" {
		t.Fatalf("list of a catalog (by schema, then name): %+v", list)
	}
	ids, err := s.VolumeIDs(ctx)
	must(t, "ids", err)
	if len(ids) != 3 || !ids["id1"] || !ids["id2"] || !ids["id3"] {
		t.Fatalf("ids: %v", ids)
	}
	wantCode(t, "delete a schema with volumes", s.DeleteSchema(ctx, "main", "s"), errs.Conflict)
	must(t, "delete", s.DeleteVolume(ctx, "id1"))
	wantCode(t, "delete again", s.DeleteVolume(ctx, "id1"), errs.NotFound)
	_, err = s.GetVolume(ctx, "main", "s", "a")
	wantCode(t, "get deleted", err, errs.NotFound)
	must(t, "recreate with a new id", s.CreateVolume(ctx, &volumes.Volume{ID: "id4", Catalog: "main", Schema: "s", Name: "a"}))
	if v, err := s.GetVolume(ctx, "main", "s", "a"); err != nil || v.ID != "id4" {
		t.Fatalf("recreated: %+v %v", v, err)
	}
}

func testDeleteDropsGrants(t *testing.T, s Store) {
	ctx := t.Context()
	must(t, "catalog", s.CreateCatalog(ctx, &volumes.Catalog{Name: "main"}))
	must(t, "schema", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "s"}))
	must(t, "volume", s.CreateVolume(ctx, &volumes.Volume{ID: "v1", Catalog: "main", Schema: "s", Name: "v"}))
	rs := []workspace.Resource{
		{Kind: workspace.ResourceVolume, Key: "main.s.v"},
		{Kind: workspace.ResourceSchema, Key: "main.s"},
		{Kind: workspace.ResourceCatalog, Key: "main"},
	}
	for _, r := range rs {
		must(t, "grant", s.SetGrant(ctx, workspace.Grant{Resource: r, Principal: workspace.Principal{Kind: workspace.PrincipalGroup, ID: workspace.AllUsersGroup}, Level: workspace.CanRead}))
	}
	g, err := s.Grants(ctx, rs)
	must(t, "grants", err)
	for _, r := range rs {
		if len(g[r]) != 1 {
			t.Fatalf("grants on %s: %v", r, g[r])
		}
	}
	must(t, "delete volume", s.DeleteVolume(ctx, "v1"))
	must(t, "delete schema", s.DeleteSchema(ctx, "main", "s"))
	must(t, "delete catalog", s.DeleteCatalog(ctx, "main"))
	g, err = s.Grants(ctx, rs)
	must(t, "grants", err)
	for _, r := range rs {
		if len(g[r]) != 0 {
			t.Fatalf("grants on deleted %s survive: %v", r, g[r])
		}
	}
}

// claimer claims uploads into volume v1 of s, checking what each claim
// saw in flight.
type claimer struct {
	t *testing.T
	s Store
}

func (c claimer) claim(dir, name, instance string, nowMs, expiresMs int64, want []string, refuse error) (*volumes.Upload, error) {
	c.t.Helper()
	u := &volumes.Upload{VolumeID: "v1", Dir: dir, Name: name, Instance: instance, StartedMs: nowMs, ExpiresMs: expiresMs}
	var saw []string
	err := c.s.ClaimUpload(c.t.Context(), u, nowMs, func(inFlight []volumes.Upload) error {
		for i, o := range inFlight {
			if o.Dir != dir || o.VolumeID != "v1" || (i > 0 && o.ID <= inFlight[i-1].ID) {
				c.t.Fatalf("claim %s/%s: in flight %+v (want this directory's, oldest first)", dir, name, inFlight)
			}
			saw = append(saw, o.Name)
		}
		return refuse
	})
	slices.Sort(saw)
	if err == nil && !slices.Equal(saw, want) {
		c.t.Fatalf("claim %s/%s saw %q in flight, want %q", dir, name, saw, want)
	}
	return u, err
}

func mustVolume(t *testing.T, s Store) claimer {
	ctx := t.Context()
	must(t, "catalog", s.CreateCatalog(ctx, &volumes.Catalog{Name: "main"}))
	must(t, "schema", s.CreateSchema(ctx, &volumes.Schema{Catalog: "main", Name: "s"}))
	must(t, "volume", s.CreateVolume(ctx, &volumes.Volume{ID: "v1", Catalog: "main", Schema: "s", Name: "ckpt"}))
	return claimer{t, s}
}

// testUploadClaims: a claim sees the other unexpired claims of its
// directory, a refused claim records nothing, releases and expiries free
// names, renewals keep them, and a deleted volume's claims are gone.
func testUploadClaims(t *testing.T, s Store) {
	ctx := t.Context()
	c := mustVolume(t, s)
	claim := c.claim
	a, err := claim("step-1", "__0_0.distcp", "", 10, 1000, nil, nil)
	must(t, "first claim", err)
	b, err := claim("step-1", "__1_0.distcp", "", 10, 1000, []string{"__0_0.distcp"}, nil)
	must(t, "second claim", err)
	if a.ID == b.ID || a.ID == 0 {
		t.Fatalf("claim ids %d and %d", a.ID, b.ID)
	}
	refused := errors.New("refused")
	if _, err := claim("step-1", ".metadata", "", 10, 1000, []string{"__0_0.distcp", "__1_0.distcp"}, refused); err != refused {
		t.Fatalf("a refused claim returned %v, want check's own error", err)
	}
	// The claim's fields come back as recorded.
	_, err = claim("step-1", "probe", "", 10, 1000, []string{"__0_0.distcp", "__1_0.distcp"}, nil)
	must(t, "probe", err)
	_ = s.ClaimUpload(ctx, &volumes.Upload{VolumeID: "v1", Dir: "step-1", Name: "x"}, 10, func(inFlight []volumes.Upload) error {
		if len(inFlight) != 3 || inFlight[0] != *a || inFlight[1] != *b {
			t.Fatalf("in flight %+v, want %+v and %+v first", inFlight, *a, *b)
		}
		return refused
	})
	// Another directory is separate; the refused claim left nothing.
	_, err = claim("step-2", "__0_0.distcp", "", 10, 1000, nil, nil)
	must(t, "other directory", err)
	must(t, "release", s.ReleaseUpload(ctx, a, false))
	must(t, "release twice", s.ReleaseUpload(ctx, a, false))
	_, err = claim("step-1", "x", "", 10, 1000, []string{"__1_0.distcp", "probe"}, nil)
	must(t, "after release", err)
	// Expiry: at 2000 the claims of step-1 have expired, unless renewed.
	must(t, "renew", s.RenewUpload(ctx, b.ID, 5000))
	_, err = claim("step-1", "y", "", 2000, 3000, []string{"__1_0.distcp"}, nil)
	must(t, "after expiry", err)
	_, err = claim("step-1", "z", "", 6000, 7000, nil, nil)
	must(t, "after every expiry", err)

	must(t, "delete volume", s.DeleteVolume(ctx, "v1"))
	_, err = claim("step-1", "w", "", 6000, 7000, nil, nil)
	wantCode(t, "claim in a deleted volume", err, errs.NotFound)
	must(t, "volume again", s.CreateVolume(ctx, &volumes.Volume{ID: "v1", Catalog: "main", Schema: "s", Name: "ckpt"}))
	_, err = claim("step-1", "w", "", 6000, 7000, nil, nil)
	must(t, "a new volume starts with no claims", err)
}

// testLandedUploadSupersedes: an upload that lands releases the claims of
// the earlier uploads of its file (the attempts it retried), not those of
// later ones or of other files; one that failed releases only its own.
func testLandedUploadSupersedes(t *testing.T, s Store) {
	ctx := t.Context()
	c := mustVolume(t, s)
	_, err := c.claim("d", "shard", "dead", 10, 1000, nil, nil)
	must(t, "first attempt", err)
	_, err = c.claim("d", "shard", "", 10, 1000, []string{"shard"}, nil)
	must(t, "second attempt", err)
	_, err = c.claim("d", "other", "a", 10, 1000, []string{"shard", "shard"}, nil)
	must(t, "another file", err)
	retry, err := c.claim("d", "shard", "a", 10, 1000, []string{"other", "shard", "shard"}, nil)
	must(t, "retry", err)
	later, err := c.claim("d", "shard", "a", 10, 1000, []string{"other", "shard", "shard", "shard"}, nil)
	must(t, "later", err)
	failed, err := c.claim("d", "other", "a", 10, 1000, []string{"other", "shard", "shard", "shard", "shard"}, nil)
	must(t, "an upload that fails", err)
	must(t, "failed", s.ReleaseUpload(ctx, failed, false))
	// A claim of another file with the retry's id releases nothing.
	must(t, "release of another file", s.ReleaseUpload(ctx, &volumes.Upload{ID: retry.ID, VolumeID: "v1", Dir: "d", Name: "nope"}, true))
	must(t, "the retry landed", s.ReleaseUpload(ctx, retry, true))
	_, err = c.claim("d", "probe", "", 10, 1000, []string{"other", "shard"}, nil)
	must(t, "after the retry landed", err)
	must(t, "later landed", s.ReleaseUpload(ctx, later, true))
	_, err = c.claim("d", "probe2", "", 10, 1000, []string{"other", "probe"}, nil)
	must(t, "after later landed", err)
}

// testClaimsGoWithTheirInstance: a starting instance releases the claims
// of instances that are gone, never those of live ones on a shared store,
// and the claims of no instance only expire; a stopped instance's claims
// are gone.
func testClaimsGoWithTheirInstance(t *testing.T, s Store, sharing Sharing) {
	ctx := t.Context()
	c := mustVolume(t, s)
	start := func(id string, nowMs int64) int64 {
		t.Helper()
		n, err := s.StartInstance(ctx, id, nowMs, nowMs+1000)
		must(t, "start "+id, err)
		return n
	}
	keep := func(id string, nowMs int64) int64 {
		t.Helper()
		n, err := s.KeepInstance(ctx, id, nowMs, nowMs+1000)
		must(t, "keep "+id, err)
		return n
	}
	inFlight := func(nowMs int64) []string {
		t.Helper()
		var names []string
		err := s.ClaimUpload(ctx, &volumes.Upload{VolumeID: "v1", Dir: "d", Name: "probe"}, nowMs, func(in []volumes.Upload) error {
			for _, o := range in {
				names = append(names, o.Name+"@"+o.Instance)
			}
			return errors.New("probe")
		})
		if err == nil || err.Error() != "probe" {
			t.Fatalf("probe: %v", err)
		}
		slices.Sort(names)
		return names
	}
	if n := start("a", 100); n != 0 {
		t.Fatalf("the first start released %d claims", n)
	}
	_, err := c.claim("d", "a1", "a", 100, 100_000, nil, nil)
	must(t, "claim of a", err)
	_, err = c.claim("d", "m", "", 100, 100_000, []string{"a1"}, nil)
	must(t, "claim of no instance", err)
	_, err = c.claim("e", "a2", "a", 100, 100_000, nil, nil)
	must(t, "claim of a in another directory", err)

	if sharing == Exclusive {
		// One process owns the store: an instance starting means that
		// every other one is gone, at once.
		if n := start("b", 200); n != 2 {
			t.Fatalf("b's start released %d claims, want a's 2", n)
		}
		if got := inFlight(200); !slices.Equal(got, []string{"m@"}) {
			t.Fatalf("in flight after b started: %q", got)
		}
	} else {
		// A replica starting while a is alive keeps a's claims, and
		// renewals keep them; once a's liveness has expired, the next
		// renewal of b (or start of another) releases them.
		if n := start("b", 200); n != 0 {
			t.Fatalf("b's start released %d claims of a live replica", n)
		}
		_, err = c.claim("d", "b1", "b", 200, 100_000, []string{"a1", "m"}, nil)
		must(t, "claim of b", err)
		if n := keep("a", 900); n != 0 {
			t.Fatalf("a's renewal released %d claims", n)
		}
		if n := keep("b", 1500); n != 0 {
			t.Fatalf("b's renewal released %d claims of a live replica", n)
		}
		if n := start("c", 1800); n != 0 {
			t.Fatalf("c's start released %d claims of live replicas", n)
		}
		if got := inFlight(1800); !slices.Equal(got, []string{"a1@a", "b1@b", "m@"}) {
			t.Fatalf("in flight: %q", got)
		}
		// a stops renewing: its liveness ends at 1900; b's and c's
		// renewals go on.
		keep("b", 1850)
		if n := keep("c", 2000); n != 2 {
			t.Fatalf("c's renewal after a's expiry released %d claims, want a's 2", n)
		}
		if got := inFlight(2000); !slices.Equal(got, []string{"b1@b", "m@"}) {
			t.Fatalf("in flight after a expired: %q", got)
		}
		// An instance never recorded is gone for a starting one.
		_, err = c.claim("d", "x1", "x", 2000, 100_000, []string{"b1", "m"}, nil)
		must(t, "claim of an unrecorded instance", err)
		keep("b", 2100)
		if n := start("d", 2100); n != 1 {
			t.Fatalf("d's start released %d claims, want x's 1", n)
		}
	}
	must(t, "stop b", s.StopInstance(ctx, "b"))
	if got := inFlight(2200); !slices.Equal(got, []string{"m@"}) {
		t.Fatalf("in flight after b stopped: %q", got)
	}
	// The claim of no instance expires as any claim does.
	if got := inFlight(200_000); len(got) != 0 {
		t.Fatalf("in flight after every expiry: %q", got)
	}
}
