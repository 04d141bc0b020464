package httpapi_test

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// replicas are two servers over one database, with one clock the test
// moves.
type replicas struct {
	mu  sync.Mutex
	now time.Time
	hs  [2]*httpapi.Server
	ws  [2]*workspace.Service
}

func (r *replicas) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

func (r *replicas) advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

func mustReplicas(t *testing.T, ttl time.Duration) *replicas {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(ctx) })
	rs := &replicas{now: time.Unix(1_800_000_000, 0)}
	for i := range rs.hs {
		tr := tracking.NewService(store.Tracking(), tracking.Options{})
		if err := tr.Init(ctx); err != nil {
			t.Fatal(err)
		}
		ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4, CacheTTL: ttl, Now: rs.clock})
		if err := ws.Init(ctx); err != nil {
			t.Fatal(err)
		}
		blobs, err := blob.OpenDir(filepath.Join(t.TempDir(), "artifacts"), blob.DirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs.ws[i] = ws
		rs.hs[i] = httpapi.New(httpapi.Options{Tracking: tr, Workspace: ws, Files: blobs, Auth: httpapi.AuthOn,
			Artifacts: artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")})})
	}
	if _, err := rs.ws[0].CreateUser(ctx, nil, admin, password, true); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.ws[0].CreateUser(ctx, nil, reader, password, false); err != nil {
		t.Fatal(err)
	}
	return rs
}

func (r *replicas) whoami(i int, user, pass string) int {
	req := httptest.NewRequest("GET", "/api/2.0/sextant/auth/whoami", nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	rec := httptest.NewRecorder()
	r.hs[i].ServeHTTP(rec, req)
	return rec.Code
}

// TestBasicCacheBoundAcrossReplicas: a password changed, or a user
// disabled, through one replica stops working there at once and on the
// other within CacheTTL (docs/auth.md: 10 seconds), though the other had
// the old pair cached; the new password works on both.
func TestBasicCacheBoundAcrossReplicas(t *testing.T) {
	const ttl = 10 * time.Second
	rs := mustReplicas(t, ttl)
	ctx := context.Background()
	for i := range rs.hs {
		if c := rs.whoami(i, reader, password); c != 200 {
			t.Fatalf("replica %d: %d", i, c)
		}
	}
	adminSub, err := rs.ws[0].AuthenticateBasic(ctx, admin, password, "test")
	if err != nil {
		t.Fatal(err)
	}
	const newPassword = "a different horse battery"
	if err := rs.ws[0].SetPassword(ctx, adminSub, reader, "", newPassword); err != nil {
		t.Fatal(err)
	}
	if c := rs.whoami(0, reader, password); c != 401 {
		t.Fatalf("old password on the replica that changed it: %d", c)
	}
	rs.advance(ttl - time.Second)
	if c := rs.whoami(1, reader, password); c != 200 {
		t.Fatalf("old password on the other replica within its cache time: %d (the cache under test is not in use)", c)
	}
	rs.advance(time.Second)
	if c := rs.whoami(1, reader, password); c != 401 {
		t.Fatalf("old password on the other replica after CacheTTL: %d", c)
	}
	for i := range rs.hs {
		if c := rs.whoami(i, reader, newPassword); c != 200 {
			t.Fatalf("new password on replica %d: %d", i, c)
		}
	}
	// Disabling: the same bound.
	rs.advance(ttl)
	for i := range rs.hs {
		rs.whoami(i, reader, newPassword)
	}
	disabled := true
	if _, err := rs.ws[0].UpdateUser(ctx, adminSub, reader, workspace.UserUpdate{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	if c := rs.whoami(0, reader, newPassword); c != 401 {
		t.Fatalf("disabled user on the replica that disabled them: %d", c)
	}
	rs.advance(ttl)
	if c := rs.whoami(1, reader, newPassword); c != 401 {
		t.Fatalf("disabled user on the other replica after CacheTTL: %d", c)
	}
}
