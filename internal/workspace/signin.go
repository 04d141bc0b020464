package workspace

import (
	"context"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// Sign-in throttling.
//
// A password check is a bcrypt run, deliberately slow, that anyone who can
// reach the server may ask for. Guesses are bounded by failure budgets,
// kept for failureWindowLen in this replica's memory (several replicas
// multiply the allowance, which still stops guessing):
//
//   - Per address and account: maxFailuresPerPair failed checks for one
//     normalised email from one client address; then that address is
//     refused for that account (429) until the window passes. A single
//     attacker locks an account only for itself, never for its owner
//     elsewhere.
//   - Per account: maxFailuresPerEmail failed checks from all addresses
//     together; then the account is under attack (guesses from many
//     addresses) and every password sign-in to it is refused until the
//     window passes, the correct password included. Credentials verified
//     before (the Basic cache), tokens and sessions keep working.
//
// No budget is kept per address alone: a proxy or a NAT puts many honest
// users behind one address, and failures with made-up emails from it must
// not refuse a right password for an account nobody guessed at. What one
// address can cost is bounded instead, and so is the whole:
//
//   - Per address: one check at a time. A flood from one address queues
//     behind itself and takes at most one core; other addresses' sign-ins
//     go on beside it.
//   - Server-wide: at most Options.MaxPasswordChecks checks at once.
//
// A check that cannot start within Options.PasswordCheckWait (its
// address's turn, then a server-wide slot) is refused with 429, retry in a
// second.
//
// Every attempt that will check a password reserves its place in the
// budgets before the check runs, and the reservation becomes a failure or
// is released after it: parallel attempts cannot all pass a check made
// before any of them has failed. The budgets are keyed by the normalised
// email (NormalizeEmail), so that spellings of one address (case, spaces
// around it) share them.
const (
	maxFailuresPerPair  = 10
	maxFailuresPerEmail = 50
	failureWindowLen    = 5 * time.Minute
	// maxWindows bounds the throttle's memory under a spray of made-up
	// emails and addresses: past it, expired windows are dropped, and if
	// that is not enough, all of them.
	maxWindows = 100_000
)

// window counts one key's failed and in-flight checks since start.
type window struct {
	key     string
	start   time.Time
	failed  int
	pending int
}

// lane is an address's turn at checking a password: held during each of
// its checks, so that it runs one at a time. users counts the attempts
// holding or waiting for it; the last one out removes it.
type lane struct {
	turn  chan struct{}
	users int
}

// signIns holds the sign-in budgets, the addresses' lanes and the
// server-wide check slots.
type signIns struct {
	mu      sync.Mutex
	windows map[string]*window
	lanes   map[string]*lane
	slots   chan struct{}
	wait    time.Duration

	checks    atomic.Uint64 // bcrypt comparisons run for sign-ins
	throttled atomic.Uint64 // attempts refused before their check
}

func newSignIns(slots int, wait time.Duration) *signIns {
	return &signIns{windows: map[string]*window{}, lanes: map[string]*lane{}, slots: make(chan struct{}, slots), wait: wait}
}

// SignInStats are counts since the server started, for monitoring.
type SignInStats struct {
	// PasswordChecks is the number of bcrypt comparisons run to check a
	// password at sign-in (HTTP Basic or login), including those against
	// a stand-in hash for unknown emails.
	PasswordChecks uint64
	// Throttled is the number of sign-ins refused before their password
	// was checked: a budget spent, or no free check slot.
	Throttled uint64
}

// SignInStats returns the sign-in counters.
func (s *Service) SignInStats() SignInStats {
	return SignInStats{PasswordChecks: s.signin.checks.Load(), Throttled: s.signin.throttled.Load()}
}

// throttleKey is the account an email names for the budgets: its
// normalised form, or for a string that is no valid address (it matches no
// user) the same trimmed and lowercased, so that its spellings share too.
func throttleKey(email string) string {
	if n, err := NormalizeEmail(email); err == nil {
		return n
	}
	return strings.ToLower(strings.TrimSpace(email))
}

// attempt is one reserved password check.
type attempt struct {
	windows []*window
	addr    string
	lane    *lane
	laned   bool
	slotted bool
}

// get returns key's window, a fresh one if it has none or it expired.
// Callers hold l.mu.
func (l *signIns) get(key string, now time.Time) *window {
	w := l.windows[key]
	if w == nil {
		w = &window{key: key, start: now}
		l.windows[key] = w
	} else if now.Sub(w.start) >= failureWindowLen {
		// The reservations in flight stay; they end in this window.
		w.start, w.failed = now, 0
	}
	return w
}

// prune keeps the windows under maxWindows. Callers hold l.mu.
func (l *signIns) prune(now time.Time) {
	if len(l.windows) < maxWindows {
		return
	}
	for k, w := range l.windows {
		if w.pending == 0 && now.Sub(w.start) >= failureWindowLen {
			delete(l.windows, k)
		}
	}
	if len(l.windows) >= maxWindows {
		l.windows = map[string]*window{}
	}
}

func retryIn(w *window, now time.Time) int {
	return int((failureWindowLen-now.Sub(w.start))/time.Second) + 1
}

// reserve counts an attempt to check a password for email from addr in
// every budget, or refuses it when the account's budget (from addr or
// from everywhere) is spent.
func (l *signIns) reserve(now time.Time, email, addr string) (*attempt, error) {
	addr = addressKey(addr)
	key := throttleKey(email)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	ew := l.get("e:"+key, now)
	pw := l.get("p:"+addr+"\x00"+key, now)
	shown := errs.Truncate(key, 120)
	if ew.failed+ew.pending >= maxFailuresPerEmail {
		l.release(ew, pw)
		return nil, errs.Errorf(errs.Throttled, "too many failed sign-ins for %s; try again in %d seconds (tokens and sessions still work)", shown, retryIn(ew, now))
	}
	if pw.failed+pw.pending >= maxFailuresPerPair {
		l.release(ew, pw)
		return nil, errs.Errorf(errs.Throttled, "too many failed sign-ins for %s from this address; try again in %d seconds", shown, retryIn(pw, now))
	}
	a := &attempt{windows: []*window{ew, pw}, addr: addr}
	for _, w := range a.windows {
		w.pending++
	}
	a.lane = l.lanes[addr]
	if a.lane == nil {
		a.lane = &lane{turn: make(chan struct{}, 1)}
		l.lanes[addr] = a.lane
	}
	a.lane.users++
	return a, nil
}

// release drops windows that count nothing, so that sign-ins that succeed
// leave no trace. Callers hold l.mu.
func (l *signIns) release(ws ...*window) {
	for _, w := range ws {
		if w.failed == 0 && w.pending == 0 && l.windows[w.key] == w {
			delete(l.windows, w.key)
		}
	}
}

// acquire waits for the attempt's turn in its address's lane, then for a
// server-wide slot, at most l.wait for both.
func (l *signIns) acquire(ctx context.Context, a *attempt) error {
	t := time.NewTimer(l.wait)
	defer t.Stop()
	busy := errs.E(errs.Throttled, "too many sign-ins at once: retry in a second")
	select {
	case a.lane.turn <- struct{}{}:
		a.laned = true
	case <-t.C:
		return busy
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case l.slots <- struct{}{}:
		a.slotted = true
	case <-t.C:
		return busy
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// finish ends an attempt: its reservations become failures if failed, or
// are dropped, and its slots are freed.
func (l *signIns) finish(a *attempt, failed bool) {
	if a.slotted {
		<-l.slots
	}
	if a.laned {
		<-a.lane.turn
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.lane.users--; a.lane.users == 0 && l.lanes[a.addr] == a.lane {
		delete(l.lanes, a.addr)
	}
	for _, w := range a.windows {
		w.pending--
		if failed {
			w.failed++
		}
	}
	l.release(a.windows...)
}

// checkPassword checks a sign-in's password within the budgets above
// (see "Sign-in throttling"): reserved first, refused with Throttled when
// a budget is spent or no check slot frees up in time.
func (s *Service) checkPassword(ctx context.Context, email, password, remote string) (*User, string, error) {
	a, err := s.signin.reserve(s.now(), email, remote)
	if err != nil {
		s.signin.throttled.Add(1)
		return nil, "", err
	}
	if err := s.signin.acquire(ctx, a); err != nil {
		s.signin.finish(a, false)
		if errs.Is(err, errs.Throttled) { // not a client that went away
			s.signin.throttled.Add(1)
		}
		return nil, "", err
	}
	u, hash, err := s.verifyPassword(ctx, email, password)
	s.signin.finish(a, errs.Is(err, errs.Unauthenticated))
	return u, hash, err
}

// defaultPasswordChecks is the server-wide number of concurrent password
// checks when Options.MaxPasswordChecks is 0: one per core, since bcrypt
// keeps a core busy and more at once only lengthen each, but at least 2 so
// that one slow check does not hold up every other sign-in.
func defaultPasswordChecks() int { return max(2, runtime.GOMAXPROCS(0)) }

// addressKey is the client an address stands for in the budgets and the
// lanes: an IPv6 address counts by its /64, which is what one host is
// usually given (as the connection cap counts it), so that a host cannot
// spread its guesses over addresses of its own prefix.
func addressKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	if a = a.Unmap(); a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
