package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/workspace"
)

const (
	adminEmail = "admin@example.com"
	alice      = "alice@example.com"
	bob        = "bob@example.com"
	carol      = "carol@example.com"
	password   = "right-password"
)

// mustService returns a workspace over a fresh SQLite store with an
// admin, alice, bob and carol, all with password.
func mustService(t *testing.T, opts workspace.Options) *workspace.Service {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	opts.BcryptCost = bcrypt.MinCost
	ws := workspace.NewService(store.Workspace(), opts)
	if err := ws.Init(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{adminEmail, alice, bob, carol} {
		if _, err := ws.CreateUser(ctx, nil, e, password, e == adminEmail); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// gate holds every password check until opened.
type gate struct {
	entered chan struct{}
	open    chan struct{}
}

func holdChecks(ws *workspace.Service) *gate {
	g := &gate{entered: make(chan struct{}, 1000), open: make(chan struct{})}
	workspace.SetCompare(ws, func(hash, pw []byte) error {
		g.entered <- struct{}{}
		<-g.open
		return bcrypt.CompareHashAndPassword(hash, pw)
	})
	return g
}

func login(ws *workspace.Service, email, pw, addr string) error {
	_, _, _, err := ws.Login(context.Background(), email, pw, addr)
	return err
}

// Parallel wrong passwords for one account: each reserves its place before
// its check, so only the budget's worth get checked, however many arrive
// together.
func TestSignInParallelGuessesGetOnlyTheBudget(t *testing.T) {
	for _, basic := range []bool{false, true} {
		t.Run(fmt.Sprintf("basic=%v", basic), func(t *testing.T) {
			ws := mustService(t, workspace.Options{MaxPasswordChecks: 100, PasswordCheckWait: time.Minute})
			g := holdChecks(ws)
			before := ws.SignInStats().PasswordChecks
			const n = 40
			results := make(chan error, n)
			for i := range n {
				go func() {
					pw := fmt.Sprintf("wrong-password-%d", i)
					if basic {
						_, err := ws.AuthenticateBasic(context.Background(), alice, pw, "10.0.0.1")
						results <- err
					} else {
						results <- login(ws, alice, pw, "10.0.0.1")
					}
				}()
			}
			// The refused attempts answer while the others are still held
			// in their checks: nothing here waits on a clock.
			codes := map[errs.Code]int{}
			for range n - 10 {
				codes[errs.CodeOf(<-results)]++
			}
			if codes[errs.Throttled] != n-10 {
				t.Fatalf("while 10 checks are in flight: %v, want %d throttled", codes, n-10)
			}
			close(g.open)
			for range 10 {
				codes[errs.CodeOf(<-results)]++
			}
			if codes[errs.Unauthenticated] != 10 {
				t.Fatalf("results %v, want 10 unauthenticated", codes)
			}
			if got := ws.SignInStats().PasswordChecks - before; got != 10 {
				t.Fatalf("%d password checks, want 10", got)
			}
		})
	}
}

// Spellings of one email (case, spaces and tabs around it) share its
// budget; the lock holds for the address that spent it, not for the
// account's owner elsewhere.
func TestSignInSpellingsShareTheBudget(t *testing.T) {
	ws := mustService(t, workspace.Options{})
	for i := range 10 {
		if err := login(ws, alice, fmt.Sprint("wrong-", i), "10.0.0.1"); !errs.Is(err, errs.Unauthenticated) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	checks := ws.SignInStats().PasswordChecks
	for _, spelling := range []string{alice, "  alice@example.com", "alice@example.com\t", "ALICE@Example.com", " Alice@example.com \t"} {
		if err := login(ws, spelling, "wrong-again", "10.0.0.1"); !errs.Is(err, errs.Throttled) {
			t.Fatalf("login as %q after the lock: %v, want Throttled", spelling, err)
		}
		if _, err := ws.AuthenticateBasic(context.Background(), spelling, "wrong-again", "10.0.0.1"); !errs.Is(err, errs.Throttled) {
			t.Fatalf("Basic as %q after the lock: %v, want Throttled", spelling, err)
		}
	}
	if got := ws.SignInStats().PasswordChecks; got != checks {
		t.Fatalf("%d password checks after the lock, want none", got-checks)
	}
	// The attacker's address is locked out of alice even with her password...
	if err := login(ws, alice, password, "10.0.0.1"); !errs.Is(err, errs.Throttled) {
		t.Fatalf("right password from the locked address: %v, want Throttled", err)
	}
	// ...but alice, elsewhere, is not.
	if err := login(ws, alice, password, "10.0.0.2"); err != nil {
		t.Fatalf("right password from another address: %v", err)
	}
}

// An account guessed at from many addresses is locked for everyone, its
// right password included; other accounts are not.
func TestSignInAccountUnderAttackIsLocked(t *testing.T) {
	ws := mustService(t, workspace.Options{})
	for i := range 50 {
		if err := login(ws, bob, "wrong-password", fmt.Sprintf("10.0.%d.1", i/10)); !errs.Is(err, errs.Unauthenticated) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if err := login(ws, bob, password, "10.9.9.9"); !errs.Is(err, errs.Throttled) {
		t.Fatalf("bob from a fresh address after 50 failures: %v, want Throttled", err)
	}
	if err := login(ws, alice, password, "10.0.0.1"); err != nil {
		t.Fatalf("alice from an attacking address: %v", err)
	}
}

// A flood of failures with made-up emails from one address (every client
// behind a proxy) does not refuse a right password from it.
func TestSignInFloodFromOneAddressKeepsRightPasswords(t *testing.T) {
	ws := mustService(t, workspace.Options{})
	const proxy = "127.0.0.1"
	for i := range 105 {
		if err := login(ws, fmt.Sprintf("nobody-%d@example.com", i), "wrong-password", proxy); !errs.Is(err, errs.Unauthenticated) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if err := login(ws, adminEmail, password, proxy); err != nil {
		t.Fatalf("admin's login after the flood: %v", err)
	}
	if _, err := ws.AuthenticateBasic(context.Background(), adminEmail, password, proxy); err != nil {
		t.Fatalf("admin's Basic after the flood: %v", err)
	}
}

// An address runs one check at a time: a second attempt from it waits for
// the first, and is refused when it cannot start in time; other addresses
// are not held up.
func TestSignInOneCheckAtATimePerAddress(t *testing.T) {
	ws := mustService(t, workspace.Options{MaxPasswordChecks: 4, PasswordCheckWait: 50 * time.Millisecond})
	g := holdChecks(ws)
	first := make(chan error, 1)
	go func() { first <- login(ws, "nobody-x@example.com", "wrong-password", "10.6.6.6") }()
	<-g.entered
	if err := login(ws, adminEmail, password, "10.6.6.6"); !errs.Is(err, errs.Throttled) {
		t.Fatalf("a second check from a busy address: %v, want Throttled", err)
	}
	other := make(chan error, 1)
	go func() { other <- login(ws, alice, password, "10.0.0.7") }()
	<-g.entered // another address gets a slot while the first one is busy
	close(g.open)
	if err := <-first; !errs.Is(err, errs.Unauthenticated) {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
}

// The server-wide cap on password checks: with its slots taken, a check
// waits PasswordCheckWait and is refused.
func TestSignInServerWideCheckSlots(t *testing.T) {
	ws := mustService(t, workspace.Options{MaxPasswordChecks: 2, PasswordCheckWait: 50 * time.Millisecond})
	g := holdChecks(ws)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = login(ws, alice, fmt.Sprint("wrong-", i), fmt.Sprint("10.1.0.", i))
		}()
	}
	<-g.entered
	<-g.entered
	err := login(ws, bob, password, "10.2.0.1")
	if !errs.Is(err, errs.Throttled) {
		t.Fatalf("a third check with two slots taken: %v, want Throttled", err)
	}
	close(g.open)
	wg.Wait()
	if err := login(ws, bob, password, "10.2.0.1"); err != nil {
		t.Fatalf("once the slots are free: %v", err)
	}
	if got := ws.SignInStats().Throttled; got != 1 {
		t.Fatalf("Throttled = %d, want 1", got)
	}
}

// A permission change drops only the cached verifications of the users it
// touches: a grant on one's own folder sends no one back to bcrypt; a new
// password ends the old one's cached verification at once.
func TestPermissionChangeKeepsOthersVerified(t *testing.T) {
	ctx := context.Background()
	ws := mustService(t, workspace.Options{})
	subs := map[string]*workspace.Subject{}
	for _, e := range []string{alice, bob, carol} {
		sub, err := ws.AuthenticateBasic(ctx, e, password, "10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		subs[e] = sub
	}
	checks := ws.SignInStats().PasswordChecks
	home := workspace.Resource{Kind: workspace.ResourceFolder, Key: workspace.HomeOf(alice)}
	for _, p := range []string{bob, "group:users"} {
		if err := ws.SetPermission(ctx, subs[alice], home, p, workspace.CanRead); err != nil {
			t.Fatal(err)
		}
		for _, e := range []string{alice, bob, carol} {
			if _, err := ws.AuthenticateBasic(ctx, e, password, "10.0.0.1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := ws.SignInStats().PasswordChecks - checks; got != 0 {
		t.Fatalf("%d password checks after grants on alice's folder, want 0", got)
	}
	if err := ws.SetPassword(ctx, subs[bob], bob, password, "bobs-new-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.AuthenticateBasic(ctx, bob, password, "10.0.0.1"); !errs.Is(err, errs.Unauthenticated) {
		t.Fatalf("bob's old password after the change: %v, want Unauthenticated", err)
	}
	if _, err := ws.AuthenticateBasic(ctx, carol, password, "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if got := ws.SignInStats().PasswordChecks - checks; got != 1 {
		t.Fatalf("%d password checks after bob's new password, want 1 (his old one)", got)
	}
}

// An IPv6 host is usually given a /64: its addresses share one budget, so
// that it cannot lock an account by spreading guesses over them.
func TestSignInIPv6PrefixSharesTheBudget(t *testing.T) {
	ws := mustService(t, workspace.Options{})
	for i := range 10 {
		if err := login(ws, bob, "wrong-password", fmt.Sprintf("2001:db8:1:2::%x", i+1)); !errs.Is(err, errs.Unauthenticated) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if err := login(ws, bob, "wrong-password", "2001:db8:1:2:ffff::99"); !errs.Is(err, errs.Throttled) {
		t.Fatalf("an 11th guess from another address of the same /64: %v, want Throttled", err)
	}
	if err := login(ws, bob, password, "2001:db8:1:3::1"); err != nil {
		t.Fatalf("bob from another /64: %v", err)
	}
}
