package volumes_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/blobtest"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/workspace"
)

// env is a volumes service over a real SQLite store and blob store, with a
// workspace of users: an administrator and four others.
type env struct {
	store *sqlstore.Store
	svc   *volumes.Service
	ws    *workspace.Service
	blobs blob.Store
	users map[string]*workspace.Subject
}

func mustEnv(t *testing.T, blobs blob.Store) *env {
	t.Helper()
	ctx := t.Context()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	svc := volumes.NewService(store.Volumes(), blobs, volumes.Options{})
	ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4, Resources: svc})
	if err := ws.Init(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{store: store, svc: svc, ws: ws, blobs: blobs, users: map[string]*workspace.Subject{}}
	for _, name := range []string{"admin", "alice", "bob", "carol", "dave"} {
		u, err := ws.CreateUser(ctx, nil, name+"@example.com", "a long password", name == "admin")
		if err != nil {
			t.Fatal(err)
		}
		e.users[name] = &workspace.Subject{User: u}
	}
	return e
}

func mustDir(t *testing.T) blob.Store {
	d, err := blob.OpenDir(filepath.Join(t.TempDir(), "volumes"), blob.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func wantCode(t *testing.T, what string, err error, code errs.Code) {
	t.Helper()
	if errs.CodeOf(err) != code {
		t.Fatalf("%s: got %v (code %q), want %q", what, err, errs.CodeOf(err), code)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func path(t *testing.T, s string) volumes.Path {
	t.Helper()
	p, err := volumes.ParsePath(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) put(t *testing.T, who, p, data string, overwrite bool) error {
	t.Helper()
	_, err := e.svc.PutFile(t.Context(), e.users[who], path(t, p), strings.NewReader(data), int64(len(data)), overwrite)
	return err
}

func (e *env) read(t *testing.T, who, p string, off, n int64) (string, error) {
	t.Helper()
	rc, _, err := e.svc.OpenFile(t.Context(), e.users[who], path(t, p), func(volumes.FileInfo) (int64, int64, error) { return off, n, nil })
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// world makes catalog main (admin), gives alice CAN_EDIT on it, and lets
// her create schema main.team and volume main.team.ckpt.
func (e *env) world(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	_, err := e.svc.CreateCatalog(ctx, e.users["admin"], "main", "")
	must(t, "create catalog", err)
	must(t, "grant alice", e.ws.SetPermission(ctx, e.users["admin"], workspace.Resource{Kind: workspace.ResourceCatalog, Key: "main"}, "alice@example.com", workspace.CanEdit))
	_, err = e.svc.CreateSchema(ctx, e.users["alice"], "main", "team", "")
	must(t, "create schema", err)
	_, err = e.svc.CreateVolume(ctx, e.users["alice"], "main", "team", "ckpt", "")
	must(t, "create volume", err)
}

func TestPermissions(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	ctx := t.Context()
	_, err := e.svc.CreateCatalog(ctx, e.users["alice"], "mine", "")
	wantCode(t, "non-admin creates a catalog", err, errs.PermissionDenied)
	e.world(t)
	_, err = e.svc.CreateSchema(ctx, e.users["bob"], "main", "bobs", "")
	wantCode(t, "bob creates a schema without CAN_EDIT on the catalog", err, errs.NotFound)
	_, err = e.svc.CreateVolume(ctx, e.users["bob"], "main", "team", "v", "")
	wantCode(t, "bob creates a volume without CAN_EDIT on the schema", err, errs.NotFound)

	const f = "/Volumes/main/team/ckpt/a.txt"
	must(t, "owner writes", e.put(t, "alice", f, "hello", true))
	_, err = e.read(t, "bob", f, 0, -1)
	wantCode(t, "bob reads without a grant", err, errs.NotFound)
	if !strings.Contains(errs.MessageOf(err), "volume main.team.ckpt does not exist") {
		t.Fatalf("message: %s", errs.MessageOf(err))
	}
	vol := workspace.Resource{Kind: workspace.ResourceVolume, Key: "main.team.ckpt"}
	must(t, "alice grants bob CAN_READ", e.ws.SetPermission(ctx, e.users["alice"], vol, "bob@example.com", workspace.CanRead))
	if got, err := e.read(t, "bob", f, 1, 3); err != nil || got != "ell" {
		t.Fatalf("bob reads a range: %q %v", got, err)
	}
	wantCode(t, "reader writes", e.put(t, "bob", f, "x", true), errs.PermissionDenied)
	wantCode(t, "reader grants", e.ws.SetPermission(ctx, e.users["bob"], vol, "dave@example.com", workspace.CanRead), errs.PermissionDenied)
	// Inheritance: CAN_EDIT on the schema reaches its volumes.
	must(t, "grant carol on the schema", e.ws.SetPermission(ctx, e.users["alice"], workspace.Resource{Kind: workspace.ResourceSchema, Key: "main.team"}, "carol@example.com", workspace.CanEdit))
	must(t, "carol writes through the schema grant", e.put(t, "carol", "/Volumes/main/team/ckpt/b.txt", "c", true))
	wantCode(t, "carol deletes the volume", e.svc.DeleteVolume(ctx, e.users["carol"], "main", "team", "ckpt"), errs.PermissionDenied)
	// Groups: group:users reaches everyone.
	_, err = e.read(t, "dave", f, 0, -1)
	wantCode(t, "dave reads", err, errs.NotFound)
	must(t, "grant every user", e.ws.SetPermission(ctx, e.users["admin"], workspace.Resource{Kind: workspace.ResourceCatalog, Key: "main"}, "group:users", workspace.CanRead))
	if _, err := e.read(t, "dave", f, 0, -1); err != nil {
		t.Fatalf("dave reads through group:users on the catalog: %v", err)
	}
	// Owners keep CAN_MANAGE without a grant: alice owns the schema.
	must(t, "alice loses her catalog grant", e.ws.SetPermission(ctx, e.users["admin"], workspace.Resource{Kind: workspace.ResourceCatalog, Key: "main"}, "alice@example.com", workspace.NoAccess))
	grants, err := e.ws.Permissions(ctx, e.users["alice"], vol)
	must(t, "owner lists grants", err)
	if len(grants) != 1 || grants[0].PrincipalName != "bob@example.com" || grants[0].Level != workspace.CanRead {
		t.Fatalf("grants on the volume: %+v", grants)
	}
	// Unknown securables are not found, before any permission check.
	wantCode(t, "grant on a missing volume", e.ws.SetPermission(ctx, e.users["admin"], workspace.Resource{Kind: workspace.ResourceVolume, Key: "main.team.nope"}, "bob@example.com", workspace.CanRead), errs.NotFound)
	must(t, "owner deletes", e.svc.DeleteVolume(ctx, e.users["alice"], "main", "team", "ckpt"))
	// A recreated volume starts empty and without the old grants.
	_, err = e.svc.CreateVolume(ctx, e.users["alice"], "main", "team", "ckpt", "")
	must(t, "recreate", err)
	_, err = e.svc.StatFile(ctx, e.users["alice"], path(t, f))
	wantCode(t, "old file in the new volume", err, errs.NotFound)
	if grants, err := e.ws.Permissions(ctx, e.users["alice"], vol); err != nil || len(grants) != 0 {
		t.Fatalf("grants on the new volume: %+v %v", grants, err)
	}
}

func TestListingsShowWhatYouCanRead(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	ctx := t.Context()
	e.world(t)
	_, err := e.svc.CreateCatalog(ctx, e.users["admin"], "private", "")
	must(t, "catalog", err)
	_, err = e.svc.CreateVolume(ctx, e.users["alice"], "main", "team", "other", "")
	must(t, "volume", err)
	must(t, "grant bob", e.ws.SetPermission(ctx, e.users["alice"], workspace.Resource{Kind: workspace.ResourceVolume, Key: "main.team.ckpt"}, "bob@example.com", workspace.CanRead))
	cats, err := e.svc.ListCatalogs(ctx, e.users["bob"])
	must(t, "list catalogs", err)
	if len(cats) != 1 || cats[0].Name != "main" {
		t.Fatalf("bob sees catalogs %+v, want main only", cats)
	}
	if cats, _ := e.svc.ListCatalogs(ctx, e.users["admin"]); len(cats) != 2 {
		t.Fatalf("admin sees %d catalogs", len(cats))
	}
	if cats, _ := e.svc.ListCatalogs(ctx, e.users["dave"]); len(cats) != 0 {
		t.Fatalf("dave sees %+v", cats)
	}
	vols, err := e.svc.ListVolumes(ctx, e.users["bob"], "main", "team")
	must(t, "list volumes", err)
	if len(vols) != 1 || vols[0].Name != "ckpt" {
		t.Fatalf("bob sees volumes %+v", vols)
	}
	if vols, _ := e.svc.ListVolumes(ctx, e.users["alice"], "main", "team"); len(vols) != 2 {
		t.Fatalf("alice sees %d volumes", len(vols))
	}
	_, err = e.svc.ListSchemas(ctx, e.users["dave"], "main")
	wantCode(t, "dave lists schemas", err, errs.NotFound)
	_, err = e.svc.GetCatalog(ctx, e.users["bob"], "private")
	wantCode(t, "bob gets a private catalog", err, errs.NotFound)
	_, err = e.svc.GetCatalog(ctx, e.users["bob"], "nope")
	wantCode(t, "missing catalog", err, errs.NotFound)
}

func TestDeleteNonEmpty(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	ctx := t.Context()
	e.world(t)
	must(t, "put", e.put(t, "alice", "/Volumes/main/team/ckpt/x/y.bin", "data", true))
	wantCode(t, "delete catalog", e.svc.DeleteCatalog(ctx, e.users["admin"], "main", false), errs.Conflict)
	wantCode(t, "delete schema", e.svc.DeleteSchema(ctx, e.users["alice"], "main", "team", false), errs.Conflict)
	must(t, "force", e.svc.DeleteCatalog(ctx, e.users["admin"], "main", true))
	if got, err := e.blobs.List(ctx, "", "", 0); err != nil || len(got) != 0 {
		t.Fatalf("files left after a forced delete: %v %v", got, err)
	}
}

func TestFilesDir(t *testing.T) { testFiles(t, mustDir(t)) }

// TestFilesS3 runs the file tests with the files in S3 (MinIO), where
// directories are only key prefixes.
func TestFilesS3(t *testing.T) {
	srv := blobtest.MustS3Server(t)
	testFiles(t, srv.MustOpen(t))
}

func testFiles(t *testing.T, blobs blob.Store) {
	e := mustEnv(t, blobs)
	ctx := t.Context()
	e.world(t)
	alice := e.users["alice"]
	const root = "/Volumes/main/team/ckpt"
	must(t, "put", e.put(t, "alice", root+"/a/b/c.txt", "0123456789", true))
	if got, err := e.read(t, "alice", root+"/a/b/c.txt", 2, 3); err != nil || got != "234" {
		t.Fatalf("range: %q %v", got, err)
	}
	info, err := e.svc.StatFile(ctx, alice, path(t, root+"/a/b/c.txt"))
	must(t, "stat", err)
	if info.Size != 10 || info.ETag == "" || info.ModTime.IsZero() {
		t.Fatalf("stat: %+v", info)
	}
	wantCode(t, "overwrite=false", e.put(t, "alice", root+"/a/b/c.txt", "x", false), errs.AlreadyExists)
	must(t, "overwrite=true", e.put(t, "alice", root+"/a/b/c.txt", "new", true))
	if got, _ := e.read(t, "alice", root+"/a/b/c.txt", 0, -1); got != "new" {
		t.Fatalf("after overwrite: %q", got)
	}
	wantCode(t, "file over a directory", e.put(t, "alice", root+"/a/b", "x", true), errs.Conflict)
	wantCode(t, "file under a file", e.put(t, "alice", root+"/a/b/c.txt/d", "x", true), errs.Conflict)
	wantCode(t, "file at the root", e.put(t, "alice", root, "x", true), errs.Invalid)
	_, err = e.svc.StatFile(ctx, alice, path(t, root+"/a/b"))
	wantCode(t, "stat a directory as a file", err, errs.NotFound)
	_, err = e.svc.StatFile(ctx, alice, path(t, root+"/missing"))
	wantCode(t, "stat missing", err, errs.NotFound)
	if strings.Contains(errs.MessageOf(err), "blob") {
		t.Fatalf("message names internals: %s", errs.MessageOf(err))
	}

	// Directories: mkdir -p, empty ones stay, listings page.
	must(t, "mkdir -p", e.svc.MakeDir(ctx, alice, path(t, root+"/d/e/f")))
	must(t, "mkdir again", e.svc.MakeDir(ctx, alice, path(t, root+"/d/e")))
	wantCode(t, "mkdir over a file", e.svc.MakeDir(ctx, alice, path(t, root+"/a/b/c.txt/x")), errs.Conflict)
	must(t, "stat an empty dir", e.svc.StatDir(ctx, alice, path(t, root+"/d/e/f")))
	wantCode(t, "stat a file as a dir", e.svc.StatDir(ctx, alice, path(t, root+"/a/b/c.txt")), errs.NotFound)
	wantCode(t, "stat a missing dir", e.svc.StatDir(ctx, alice, path(t, root+"/zzz")), errs.NotFound)
	got, next, err := e.svc.ListDir(ctx, alice, path(t, root+"/d/e/f"), "", 0)
	if err != nil || len(got) != 0 || next != "" {
		t.Fatalf("list an empty dir: %v %q %v", got, next, err)
	}
	for i := range 5 {
		must(t, "put", e.put(t, "alice", fmt.Sprintf("%s/d/f%d", root, i), "x", true))
	}
	var all []string
	tok := ""
	for pages := 0; ; pages++ {
		page, next, err := e.svc.ListDir(ctx, alice, path(t, root+"/d"), tok, 2)
		must(t, "list", err)
		if len(page) > 2 || pages > 5 {
			t.Fatalf("page of %d", len(page))
		}
		for _, de := range page {
			all = append(all, fmt.Sprintf("%s:%v", de.Name, de.IsDir))
		}
		if next == "" {
			break
		}
		tok = next
	}
	if strings.Join(all, " ") != "e:true f0:false f1:false f2:false f3:false f4:false" {
		t.Fatalf("listing: %v", all)
	}
	_, _, err = e.svc.ListDir(ctx, alice, path(t, root+"/d"), "!!not-a-token", 0)
	wantCode(t, "bad token", err, errs.Invalid)
	_, _, err = e.svc.ListDir(ctx, alice, path(t, root+"/nope"), "", 0)
	wantCode(t, "list missing", err, errs.NotFound)
	wantCode(t, "delete a non-empty dir", e.svc.DeleteDir(ctx, alice, path(t, root+"/d/e")), errs.Conflict)
	must(t, "delete an empty dir", e.svc.DeleteDir(ctx, alice, path(t, root+"/d/e/f")))
	must(t, "delete its emptied parent", e.svc.DeleteDir(ctx, alice, path(t, root+"/d/e")))
	wantCode(t, "delete it again", e.svc.DeleteDir(ctx, alice, path(t, root+"/d/e")), errs.NotFound)
	wantCode(t, "delete the root", e.svc.DeleteDir(ctx, alice, path(t, root)), errs.Invalid)
	wantCode(t, "delete a dir as a file", e.svc.DeleteFile(ctx, alice, path(t, root+"/d")), errs.Invalid)
	must(t, "delete a file", e.svc.DeleteFile(ctx, alice, path(t, root+"/d/f0")))
	wantCode(t, "delete it again", e.svc.DeleteFile(ctx, alice, path(t, root+"/d/f0")), errs.NotFound)
}

// blockingBody is an upload body that sends its first bytes, then waits
// for release before ending.
type blockingBody struct {
	first   []byte
	sent    chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockingBody(data string) *blockingBody {
	return &blockingBody{first: []byte(data), sent: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	b.once.Do(func() { close(b.sent) })
	<-b.release
	return 0, io.EOF
}

// startPut runs a PutFile with a body that blocks until released.
func (e *env) startPut(t *testing.T, p, data string, overwrite bool) (*blockingBody, chan error) {
	body := newBlockingBody(data)
	done := make(chan error, 1)
	go func() {
		_, err := e.svc.PutFile(context.Background(), e.users["alice"], path(t, p), body, -1, overwrite)
		done <- err
	}()
	select {
	case <-body.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("upload did not start")
	}
	return body, done
}

func TestMetadataWaitsForShards(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	e.world(t)
	const dir = "/Volumes/main/team/ckpt/step_1"
	body, done := e.startPut(t, dir+"/__0_0.distcp", "shard", true)
	err := e.put(t, "alice", dir+"/.metadata", "meta", true)
	wantCode(t, ".metadata while a shard uploads", err, errs.Conflict)
	if !strings.Contains(errs.MessageOf(err), "__0_0.distcp") {
		t.Fatalf("message does not name the shard: %s", errs.MessageOf(err))
	}
	// Other directories are not held up.
	must(t, ".metadata of another checkpoint", e.put(t, "alice", "/Volumes/main/team/ckpt/step_0/.metadata", "meta", true))
	close(body.release)
	must(t, "shard", <-done)
	must(t, ".metadata after the shards", e.put(t, "alice", dir+"/.metadata", "meta", true))
}

// TestRestartReleasesClaimsOfTheKilledServer: a server killed in the
// middle of a shard's upload leaves its claim in the database; the next
// server started on the database releases it, so the shard uploaded again
// and then the .metadata land at once (they waited two minutes before).
// The killed server is a Service that never ends its upload.
func TestRestartReleasesClaimsOfTheKilledServer(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	e.world(t)
	const dir = "/Volumes/main/team/ckpt/step_1"
	killed := volumes.NewService(e.store.Volumes(), e.blobs, volumes.Options{Instance: "killed"})
	must(t, "start the first server", killed.Start(t.Context()))
	t.Cleanup(func() { killed.Close(context.Background()) })
	body := newBlockingBody("part of a shard")
	go killed.PutFile(context.Background(), e.users["alice"], path(t, dir+"/__0_0.distcp"), body, -1, true)
	<-body.sent
	wantCode(t, ".metadata while the shard uploads", e.put(t, "alice", dir+"/.metadata", "meta", true), errs.Conflict)

	restarted := volumes.NewService(e.store.Volumes(), e.blobs, volumes.Options{Instance: "restarted"})
	must(t, "restart", restarted.Start(t.Context()))
	t.Cleanup(func() { restarted.Close(context.Background()) })
	_, err := restarted.PutFile(t.Context(), e.users["alice"], path(t, dir+"/__0_0.distcp"), strings.NewReader("shard"), 5, true)
	must(t, "the shard again", err)
	_, err = restarted.PutFile(t.Context(), e.users["alice"], path(t, dir+"/.metadata"), strings.NewReader("meta"), 4, true)
	must(t, ".metadata after the restart", err)
	close(body.release) // lets the goroutine end; its claim is gone already
}

// TestLandedRetrySupersedesItsAttempt: a shard uploaded again while its
// first attempt is still in flight on the server (a client that gave up
// on a stalled connection) releases the attempt's claim once it lands, so
// the .metadata does not wait for the attempt; the message of a refused
// .metadata names the files still in flight.
func TestLandedRetrySupersedesItsAttempt(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	e.world(t)
	const dir = "/Volumes/main/team/ckpt/step_1"
	attempt, attemptDone := e.startPut(t, dir+"/__0_0.distcp", "shard", true)
	other, otherDone := e.startPut(t, dir+"/__1_0.distcp", "shard", true)
	err := e.put(t, "alice", dir+"/.metadata", "meta", true)
	wantCode(t, ".metadata while two shards upload", err, errs.Conflict)
	if msg := errs.MessageOf(err); !strings.Contains(msg, "2 other file(s)") || !strings.Contains(msg, "__0_0.distcp (for ") || !strings.Contains(msg, "__1_0.distcp (for ") {
		t.Fatalf("message does not say what is in flight: %s", msg)
	}
	must(t, "the retry of shard 0", e.put(t, "alice", dir+"/__0_0.distcp", "shard", true))
	err = e.put(t, "alice", dir+"/.metadata", "meta", true)
	wantCode(t, ".metadata while shard 1 uploads", err, errs.Conflict)
	if msg := errs.MessageOf(err); !strings.Contains(msg, "1 other file(s)") || strings.Contains(msg, "__0_0.distcp") {
		t.Fatalf("message names a shard that has landed: %s", msg)
	}
	close(other.release)
	must(t, "shard 1", <-otherDone)
	must(t, ".metadata", e.put(t, "alice", dir+"/.metadata", "meta", true))
	close(attempt.release)
	<-attemptDone
}

func TestOverwriteFalseIsExclusive(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	e.world(t)
	const f = "/Volumes/main/team/ckpt/lock"
	body, done := e.startPut(t, f, "first", false)
	wantCode(t, "second writer", e.put(t, "alice", f, "second", false), errs.AlreadyExists)
	close(body.release)
	must(t, "first writer", <-done)
	if got, _ := e.read(t, "alice", f, 0, -1); got != "first" {
		t.Fatalf("content %q", got)
	}
}

func TestVolumeDeletedWhileWriting(t *testing.T) {
	for name, blobs := range map[string]func(t *testing.T) blob.Store{
		"Dir": mustDir,
		"S3":  func(t *testing.T) blob.Store { return blobtest.MustS3Server(t).MustOpen(t) },
	} {
		t.Run(name, func(t *testing.T) {
			e := mustEnv(t, blobs(t))
			ctx := t.Context()
			e.world(t)
			body, done := e.startPut(t, "/Volumes/main/team/ckpt/big.bin", strings.Repeat("x", 1<<16), true)
			must(t, "delete the volume", e.svc.DeleteVolume(ctx, e.users["alice"], "main", "team", "ckpt"))
			close(body.release)
			err := <-done
			wantCode(t, "the upload", err, errs.NotFound)
			if !strings.Contains(errs.MessageOf(err), "deleted while") {
				t.Fatalf("message: %s", errs.MessageOf(err))
			}
			_, err = e.svc.CreateVolume(ctx, e.users["alice"], "main", "team", "ckpt", "")
			must(t, "recreate", err)
			_, err = e.svc.StatFile(ctx, e.users["alice"], path(t, "/Volumes/main/team/ckpt/big.bin"))
			wantCode(t, "the file in the new volume", err, errs.NotFound)
			entries, err := e.blobs.List(ctx, "", "", 0)
			must(t, "list", err)
			if len(entries) != 0 {
				t.Fatalf("blobs left: %+v", entries)
			}
		})
	}
}

func TestRemoveOrphans(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	ctx := t.Context()
	e.world(t)
	must(t, "put", e.put(t, "alice", "/Volumes/main/team/ckpt/keep", "k", true))
	blobtest.MustPut(t, e.blobs, "0123456789abcdef0123456789abcdef/x/y", []byte("orphan"))
	must(t, "remove orphans", e.svc.RemoveOrphans(ctx))
	entries, err := e.blobs.List(ctx, "", "", 0)
	must(t, "list", err)
	if len(entries) != 1 {
		t.Fatalf("entries: %+v", entries)
	}
	if got, err := e.read(t, "alice", "/Volumes/main/team/ckpt/keep", 0, -1); err != nil || got != "k" {
		t.Fatalf("kept file: %q %v", got, err)
	}
}

func TestOpenFileSeesOneVersion(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	e.world(t)
	const f = "/Volumes/main/team/ckpt/v"
	a, b := bytes.Repeat([]byte("a"), 1<<15), bytes.Repeat([]byte("b"), 1<<15)
	must(t, "put", e.put(t, "alice", f, string(a), true))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := a
			if i%2 == 1 {
				data = b
			}
			_, _ = e.svc.PutFile(context.Background(), e.users["alice"], path(t, f), bytes.NewReader(data), int64(len(data)), true)
		}
	})
	// Versions of one size: a read that opens a newer version than it
	// stat'ed keeps it (the same range), so no read is refused.
	for range 200 {
		got, err := e.read(t, "alice", f, 100, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1000 || strings.Trim(got, string(got[0])) != "" {
			t.Fatalf("mixed versions in one read")
		}
	}
	close(stop)
	wg.Wait()
}

// rewritingStore overwrites a blob with the next of versions just before
// each of the first opens of it, as a writer in a loop racing a reader's
// stat and open would.
type rewritingStore struct {
	blob.Store
	versions [][]byte
	rewrites int // opens that rewrite first; the rest do not
	opens    int
}

func (s *rewritingStore) Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, blob.Info, error) {
	if s.opens < s.rewrites && len(s.versions) > 0 {
		v := s.versions[s.opens%len(s.versions)]
		if _, err := s.Store.Put(ctx, key, bytes.NewReader(v), int64(len(v))); err != nil {
			return nil, blob.Info{}, err
		}
	}
	s.opens++
	return s.Store.Open(ctx, key, off, n)
}

func TestOpenFileRacingOverwrites(t *testing.T) {
	store := &rewritingStore{Store: mustDir(t)}
	e := mustEnv(t, store)
	e.world(t)
	const f = "/Volumes/main/team/ckpt/v"
	a, b := bytes.Repeat([]byte("a"), 3000), bytes.Repeat([]byte("b"), 3000)
	must(t, "put", e.put(t, "alice", f, string(a), true))

	// Every open finds a version newer than the stat's, of the same size:
	// the range is the same for it, so it is read, whole.
	store.versions, store.rewrites, store.opens = [][]byte{b, a}, 1<<30, 0
	for i := range 10 {
		got, err := e.read(t, "alice", f, 100, 1000)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if len(got) != 1000 || strings.Trim(got, string(got[0])) != "" {
			t.Fatalf("read %d: mixed versions", i)
		}
	}

	// The open finds a longer version: a range that depends on the size
	// (the last 100 bytes) is picked again for the version found.
	c := bytes.Repeat([]byte("c"), 5000)
	store.versions, store.rewrites, store.opens = [][]byte{c}, 1, 0
	var picked []int64
	rc, info, err := e.svc.OpenFile(t.Context(), e.users["alice"], path(t, f), func(fi volumes.FileInfo) (int64, int64, error) {
		picked = append(picked, fi.Size)
		return fi.Size - 100, 100, nil
	})
	must(t, "open the tail", err)
	got, err := io.ReadAll(rc)
	rc.Close()
	must(t, "read the tail", err)
	if info.Size != 5000 || string(got) != strings.Repeat("c", 100) || len(picked) != 3 || picked[0] != 3000 || picked[2] != 5000 {
		t.Fatalf("tail: info %+v, %q, picked for sizes %v", info, got, picked)
	}

	// The open finds a version shorter than the range's start: picked
	// again, not refused as a bad range.
	store.versions, store.rewrites, store.opens = [][]byte{[]byte("short")}, 1, 0
	rc, _, err = e.svc.OpenFile(t.Context(), e.users["alice"], path(t, f), func(fi volumes.FileInfo) (int64, int64, error) {
		return fi.Size - 5, 5, nil
	})
	must(t, "open after a shrink", err)
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "short" {
		t.Fatalf("after a shrink: %q %v", got, err)
	}
}

func TestUpdate(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	ctx := t.Context()
	e.world(t) // alice owns main.team and main.team.ckpt, with CAN_EDIT on main
	str := func(s string) *string { return &s }

	_, err := e.svc.UpdateVolume(ctx, e.users["bob"], "main", "team", "ckpt", volumes.Update{Comment: str("x")})
	wantCode(t, "bob updates without CAN_MANAGE", err, errs.NotFound)
	_, err = e.svc.UpdateCatalog(ctx, e.users["alice"], "main", volumes.Update{Comment: str("x")})
	wantCode(t, "alice updates the catalog with CAN_EDIT only", err, errs.PermissionDenied)
	v, err := e.svc.UpdateVolume(ctx, e.users["alice"], "main", "team", "ckpt", volumes.Update{Comment: str("checkpoints of run 42")})
	must(t, "owner sets the comment", err)
	if v.Comment != "checkpoints of run 42" || v.Owner != "alice@example.com" {
		t.Fatalf("after the comment: %+v", v)
	}
	for _, u := range []volumes.Update{
		{NewName: str("ckpt2")}, {Owner: str("nobody@example.com")}, {NewName: str("../x")},
	} {
		_, err = e.svc.UpdateVolume(ctx, e.users["alice"], "main", "team", "ckpt", u)
		wantCode(t, fmt.Sprintf("update %+v", u), err, errs.Invalid)
	}
	// Alice owns the schema too, which gives her CAN_MANAGE on its volumes:
	// the administrator gives it to carol.
	sc, err := e.svc.UpdateSchema(ctx, e.users["admin"], "main", "team", volumes.Update{Owner: str("carol@example.com"), Comment: str("team")})
	must(t, "admin gives the schema to carol", err)
	if sc.Owner != "carol@example.com" || sc.Comment != "team" {
		t.Fatalf("schema: %+v", sc)
	}
	// The same name is no rename; the owner moves to bob, who now manages
	// the volume, and alice no longer does (her catalog grant is CAN_EDIT).
	v, err = e.svc.UpdateVolume(ctx, e.users["alice"], "main", "team", "ckpt", volumes.Update{NewName: str("ckpt"), Owner: str("bob@example.com")})
	must(t, "owner gives the volume to bob", err)
	if v.Owner != "bob@example.com" || v.Comment != "checkpoints of run 42" {
		t.Fatalf("after the owner: %+v", v)
	}
	got, err := e.svc.GetVolume(ctx, e.users["bob"], "main", "team", "ckpt")
	must(t, "bob reads the volume", err)
	if got.Owner != "bob@example.com" || got.Comment != "checkpoints of run 42" || got.UpdatedMs < got.CreatedMs {
		t.Fatalf("stored: %+v", got)
	}
	_, err = e.svc.UpdateVolume(ctx, e.users["alice"], "main", "team", "ckpt", volumes.Update{Comment: str("mine")})
	wantCode(t, "alice, no longer the owner", err, errs.PermissionDenied)
	must(t, "bob, the new owner, deletes", e.svc.DeleteVolume(ctx, e.users["bob"], "main", "team", "ckpt"))

	c, err := e.svc.UpdateCatalog(ctx, e.users["admin"], "main", volumes.Update{Comment: str("")})
	must(t, "admin clears the catalog's comment", err)
	if c.Comment != "" || c.Owner != "admin@example.com" {
		t.Fatalf("catalog: %+v", c)
	}
	_, err = e.svc.UpdateCatalog(ctx, e.users["admin"], "nope", volumes.Update{Comment: str("x")})
	wantCode(t, "missing catalog", err, errs.NotFound)
}

// TestUploadSessionTokens: a multipart session token is signed, names the
// user who initiated the upload and expires: another user (even one who
// may write the volume), a token signed with another secret and an
// expired token upload no part.
func TestUploadSessionTokens(t *testing.T) {
	e := mustEnv(t, mustDir(t))
	e.world(t)
	ctx := t.Context()
	now := time.Now()
	secret := []byte("0123456789abcdef0123456789abcdef")
	svc := volumes.NewService(e.store.Volumes(), e.blobs, volumes.Options{Secret: secret, UploadTokenTTL: time.Hour, Now: func() time.Time { return now }})
	other := volumes.NewService(e.store.Volumes(), e.blobs, volumes.Options{Secret: []byte("another secret of the same length")})
	p := path(t, "/Volumes/main/team/ckpt/big.bin")
	tok, err := svc.InitiateUpload(ctx, e.users["alice"], p, true)
	must(t, "initiate", err)
	part := func(s *volumes.Service, who, tok string) error {
		_, err := s.UploadPart(ctx, e.users[who], p, tok, 1, strings.NewReader("x"), 1)
		return err
	}
	must(t, "alice's part", part(svc, "alice", tok))
	wantCode(t, "the admin's part with alice's token", part(svc, "admin", tok), errs.PermissionDenied)
	wantCode(t, "a token of another secret", part(other, "alice", tok), errs.Invalid)
	body, sig, _ := strings.Cut(tok, ".")
	wantCode(t, "an unsigned token", part(svc, "alice", body), errs.Invalid)
	wantCode(t, "a forged signature", part(svc, "alice", body+"."+strings.Repeat("A", len(sig))), errs.Invalid)
	now = now.Add(time.Hour)
	err = part(svc, "alice", tok)
	wantCode(t, "an expired token", err, errs.PermissionDenied)
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}
}
