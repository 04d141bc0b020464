package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/sextant/sextant/internal/errs"
)

// Options configure a Service.
type Options struct {
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// SessionTTL is how long a browser session lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// BcryptCost is the password hashing cost; 0 means bcrypt.DefaultCost.
	// Tests lower it.
	BcryptCost int
	// CacheTTL bounds how long a replica trusts what it cached about a
	// credential (a password, a token, an account) or a permission:
	// changes made through this replica take effect at once, changes made
	// through another within CacheTTL; 0 means 10 seconds.
	CacheTTL time.Duration
	// Resources decides access to the catalogs, schemas and volumes that
	// permission requests name (internal/volumes); nil refuses them.
	Resources ResourceChecker
	// MaxPasswordChecks is how many sign-in password checks (bcrypt runs)
	// may run at once, server-wide; 0 means one per core (GOMAXPROCS), at
	// least 2.
	MaxPasswordChecks int
	// PasswordCheckWait is how long a sign-in waits for a free check slot
	// before it is refused with Throttled (429); 0 means 3 seconds.
	PasswordCheckWait time.Duration
}

// ResourceChecker finds the subject's level on resources kept outside the
// workspace: catalogs, schemas and volumes. ResourceLevel returns
// errs.NotFound when r does not exist (for administrators too); the
// policy (Authorize) decides with the level. It is safe for concurrent
// use.
type ResourceChecker interface {
	ResourceLevel(ctx context.Context, sub *Subject, r Resource) (Level, error)
}

// Service is the workspace: authentication, authorization, users, folders,
// permissions, comments and the audit log. It is safe for concurrent use.
type Service struct {
	store Store
	now   func() time.Time
	log   *slog.Logger
	opts  Options

	mu        sync.Mutex
	basic     map[[32]byte]basicEntry // credentials hash -> who they verified as
	tokens    map[[32]byte]cached[*Token]
	subjects  map[int64]cached[*Subject]
	perms     map[permKey]cached[Level]
	expPaths  map[string]cached[string]
	claims    nodeClaims // nodes.go
	dummyHash []byte
	signin    *signIns
	// compare is bcrypt.CompareHashAndPassword; tests replace it.
	compare func(hash, password []byte) error
	// verifying holds the password checks in progress, so that many
	// requests arriving at once with the same credentials (the mlflow client
	// sends them on every request) pay for one bcrypt, not one each.
	verifying map[[32]byte]*verification
}

type verification struct {
	done chan struct{}
	user *User
	hash string
	err  error
}

// basicEntry is a verified email/password pair. It is trusted until
// until; then the user's stored password hash and account are read again
// (one query, no bcrypt) and the entry is kept only if the hash is still
// the one the password was verified against and the account is enabled.
// So a password changed or an account disabled on another replica stops
// working here within CacheTTL, and bcrypt runs once per password, not
// once per CacheTTL.
type basicEntry struct {
	userID int64
	email  string
	hash   string
	until  time.Time
}

// maxBasicEntries bounds the verified-pair cache; past it the cache starts
// over (each pair then pays one bcrypt again).
const maxBasicEntries = 100_000

type cached[T any] struct {
	v     T
	until time.Time
}

type permKey struct {
	user int64
	exp  string
}

// NewService returns a Service over store.
func NewService(store Store, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.BcryptCost == 0 {
		opts.BcryptCost = bcrypt.DefaultCost
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 10 * time.Second
	}
	if opts.MaxPasswordChecks <= 0 {
		opts.MaxPasswordChecks = defaultPasswordChecks()
	}
	if opts.PasswordCheckWait <= 0 {
		opts.PasswordCheckWait = 3 * time.Second
	}
	s := &Service{store: store, now: opts.Now, log: opts.Logger, opts: opts, compare: bcrypt.CompareHashAndPassword}
	s.basic = map[[32]byte]basicEntry{}
	s.tokens = map[[32]byte]cached[*Token]{}
	s.subjects = map[int64]cached[*Subject]{}
	s.perms = map[permKey]cached[Level]{}
	s.expPaths = map[string]cached[string]{}
	s.signin = newSignIns(opts.MaxPasswordChecks, opts.PasswordCheckWait)
	s.verifying = map[[32]byte]*verification{}
	// A hash to compare against when the user does not exist, so that a
	// wrong email costs as much time as a wrong password.
	s.dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not a real password"), opts.BcryptCost)
	return s
}

func (s *Service) nowMs() int64 { return s.now().UnixMilli() }

// Changes made through this replica drop only what they make stale, and
// only for the users they touch: a change anyone may make (a grant on
// their own folder) must not send every other client's Basic credentials
// back to bcrypt. Changes made through other replicas take effect within
// CacheTTL.

// forgetUser drops what this replica cached about one user: their
// verified Basic credentials (a new password, a disabled account), their
// account and groups, and their permission levels.
func (s *Service) forgetUser(userID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.basic {
		if e.userID == userID {
			delete(s.basic, k)
		}
	}
	s.forgetAccessLocked(userID)
}

// forgetAccess drops one user's account, groups and permission levels,
// keeping their verified credentials. Callers of the Locked form hold s.mu.
func (s *Service) forgetAccess(userID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetAccessLocked(userID)
}

func (s *Service) forgetAccessLocked(userID int64) {
	delete(s.subjects, userID)
	for k := range s.perms {
		if k.user == userID {
			delete(s.perms, k)
		}
	}
}

// forgetGrantsOf drops the permission levels a grant to p may change: the
// user's, or for a group every user's (levels are cached per user, and
// recomputing one costs a query, not a bcrypt).
func (s *Service) forgetGrantsOf(p Principal) {
	if p.Kind == PrincipalUser {
		s.forgetAccess(p.ID)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perms = map[permKey]cached[Level]{}
}

// forgetToken drops a revoked token from the cache.
func (s *Service) forgetToken(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, c := range s.tokens {
		if c.v != nil && c.v.ID == id {
			delete(s.tokens, h)
		}
	}
}

// LocalAdmin returns the subject of single-user mode (authentication off),
// a new value on each call: callers may not change each other's.
func LocalAdmin() *Subject {
	return &Subject{User: &User{ID: -1, Email: "local", Admin: true}}
}

// ---- setup ----

// Init creates the /Users and /Shared folders if missing, with the grants
// a new workspace starts with: /Shared is managed by every user, and every
// user may use the Default experiment (CAN_EDIT), where clients that name
// no experiment log. Those grants are made once, when the workspace is new:
// an administrator may change them, and a restart must not undo that. Each
// grant is written before the folder whose absence marks the workspace as
// new, so a start cut short between the two grants again on the next start
// instead of leaving the workspace without them.
func (s *Service) Init(ctx context.Context) error {
	initial := map[string]Grant{
		UsersRoot:  {Resource: Resource{ResourceExperiment, DefaultExperimentID}, Principal: Principal{PrincipalGroup, AllUsersGroup}, Level: CanEdit},
		SharedRoot: {Resource: Resource{ResourceFolder, SharedRoot}, Principal: Principal{PrincipalGroup, AllUsersGroup}, Level: CanManage},
	}
	for _, p := range []string{UsersRoot, SharedRoot} {
		if _, err := s.store.GetFolder(ctx, p); err == nil {
			continue
		} else if !errs.Is(err, errs.NotFound) {
			return err
		}
		if err := s.store.SetGrant(ctx, initial[p]); err != nil {
			return err
		}
		if err := s.store.CreateFolder(ctx, &Folder{Path: p, CreatedMs: s.nowMs()}); err != nil && !errs.Is(err, errs.AlreadyExists) {
			return err
		}
	}
	return nil
}

// UserCount returns the number of users.
func (s *Service) UserCount(ctx context.Context) (int, error) { return s.store.CountUsers(ctx) }

// ---- users ----

// NormalizeEmail validates an email address and lowercases it.
func NormalizeEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || strings.ContainsAny(email, "/\\ ") || len(email) > 254 {
		return "", errs.Errorf(errs.Invalid, "%q is not a valid email address", errs.Truncate(email, 120))
	}
	return strings.ToLower(email), nil
}

func validatePassword(pw string) error {
	if utf8.RuneCountInString(pw) < 8 {
		return errs.E(errs.Invalid, "passwords must be at least 8 characters")
	}
	if len(pw) > 72 {
		return errs.E(errs.Invalid, "passwords must be at most 72 bytes (a bcrypt limit)")
	}
	return nil
}

// requireAdmin asks the policy for one of the administrators' operations.
func requireAdmin(actor *Subject, op Operation) error {
	return Permit(context.Background(), actor, op, Resource{}, NoAccess)
}

// CreateUser creates a user with a home folder they manage. actor must be
// an admin; nil means a bootstrap from the command line.
func (s *Service) CreateUser(ctx context.Context, actor *Subject, email, password string, admin bool) (*User, error) {
	if actor != nil {
		if err := requireAdmin(actor, OpCreateUser); err != nil {
			return nil, err
		}
	}
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if err := validatePassword(password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.opts.BcryptCost)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "hash password")
	}
	u := &User{Email: email, Admin: admin, CreatedMs: s.nowMs()}
	if err := s.store.CreateUser(ctx, u, string(hash)); err != nil {
		if errs.Is(err, errs.AlreadyExists) {
			return nil, errs.Errorf(errs.AlreadyExists, "user %s already exists", email)
		}
		return nil, err
	}
	home := HomeOf(email)
	if err := s.store.CreateFolder(ctx, &Folder{Path: home, OwnerID: u.ID, CreatedMs: s.nowMs()}); err != nil && !errs.Is(err, errs.AlreadyExists) {
		return nil, err
	}
	if err := s.store.SetGrant(ctx, Grant{Resource: Resource{ResourceFolder, home}, Principal: Principal{PrincipalUser, u.ID}, Level: CanManage}); err != nil {
		return nil, err
	}
	s.audit(ctx, actor, "user.create", email, "admin="+strconv.FormatBool(admin))
	return u, nil
}

// ListUsers lists users (admins only).
func (s *Service) ListUsers(ctx context.Context, actor *Subject) ([]*User, error) {
	if err := requireAdmin(actor, OpListUsers); err != nil {
		return nil, err
	}
	return s.store.ListUsers(ctx)
}

// UpdateUser disables or enables a user, or grants or removes admin
// (admins only). Disabling ends the user's sessions.
func (s *Service) UpdateUser(ctx context.Context, actor *Subject, email string, u UserUpdate) (*User, error) {
	if err := requireAdmin(actor, OpChangeUser); err != nil {
		return nil, err
	}
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	target, _, err := s.store.GetUserByEmail(ctx, email)
	if err != nil {
		return nil, err
	}
	if target.ID == actor.User.ID && ((u.Disabled != nil && *u.Disabled) || (u.Admin != nil && !*u.Admin)) {
		return nil, errs.E(errs.Invalid, "administrators cannot disable themselves or remove their own admin rights")
	}
	if err := s.store.UpdateUser(ctx, target.ID, UserUpdate{Disabled: u.Disabled, Admin: u.Admin, DisplayName: u.DisplayName}); err != nil {
		return nil, err
	}
	if u.Disabled != nil && *u.Disabled {
		if err := s.store.DeleteUserSessions(ctx, target.ID); err != nil {
			return nil, err
		}
	}
	s.forgetUser(target.ID)
	s.audit(ctx, actor, "user.update", email, describeUpdate(u))
	return s.store.GetUser(ctx, target.ID)
}

func describeUpdate(u UserUpdate) string {
	var parts []string
	if u.Disabled != nil {
		parts = append(parts, "disabled="+strconv.FormatBool(*u.Disabled))
	}
	if u.Admin != nil {
		parts = append(parts, "admin="+strconv.FormatBool(*u.Admin))
	}
	return strings.Join(parts, " ")
}

// SetPassword changes a password: a user's own (with the old one) or any
// (admins).
func (s *Service) SetPassword(ctx context.Context, actor *Subject, email, oldPassword, newPassword string) error {
	email, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	target, hash, err := s.store.GetUserByEmail(ctx, email)
	if err != nil {
		return err
	}
	self := actor != nil && actor.User.ID == target.ID
	if !self {
		if err := requireAdmin(actor, OpSetOthersPassword); err != nil {
			return err
		}
	} else if bcrypt.CompareHashAndPassword([]byte(hash), []byte(oldPassword)) != nil {
		return errs.E(errs.PermissionDenied, "the current password is wrong")
	}
	if err := validatePassword(newPassword); err != nil {
		return err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(newPassword), s.opts.BcryptCost)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "hash password")
	}
	hs := string(h)
	if err := s.store.UpdateUser(ctx, target.ID, UserUpdate{PasswordHash: &hs}); err != nil {
		return err
	}
	if err := s.store.DeleteUserSessions(ctx, target.ID); err != nil {
		return err
	}
	s.forgetUser(target.ID)
	s.audit(ctx, actor, "user.password", email, "")
	return nil
}

// ---- subjects ----

// subject loads a user and their groups, cached for CacheTTL.
func (s *Service) subject(ctx context.Context, userID int64) (*Subject, error) {
	now := s.now()
	s.mu.Lock()
	c, ok := s.subjects[userID]
	s.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.v, nil
	}
	u, err := s.store.GetUser(ctx, userID)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil, errs.E(errs.Unauthenticated, "the user of these credentials no longer exists")
		}
		return nil, err
	}
	groups, err := s.store.GroupsOf(ctx, userID)
	if err != nil {
		return nil, err
	}
	sub := &Subject{User: u, Groups: groups}
	s.mu.Lock()
	s.subjects[userID] = cached[*Subject]{sub, now.Add(s.opts.CacheTTL)}
	s.mu.Unlock()
	return sub, nil
}

// ActiveSubject returns the subject of the user userID for a capability
// that names its user (a multipart upload's part token), checked at each
// use: a user that no longer exists or is disabled is
// errs.Unauthenticated. The local administrator of single-user mode (id
// -1) is not a stored user: the caller decides about it.
func (s *Service) ActiveSubject(ctx context.Context, userID int64) (*Subject, error) {
	if userID <= 0 {
		return nil, errs.E(errs.Unauthenticated, "the credentials name no user")
	}
	sub, err := s.subject(ctx, userID)
	if err != nil {
		return nil, err
	}
	return active(sub)
}

func active(sub *Subject) (*Subject, error) {
	if sub.User.Disabled {
		return nil, errs.Errorf(errs.Unauthenticated, "user %s is disabled", sub.User.Email)
	}
	return sub, nil
}

// ---- tokens ----

// TokenPrefix starts every personal access token, so that they are easy
// to recognise (and to find in leaked logs).
const TokenPrefix = "sxt_"

func hashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateToken creates a personal access token for the subject and
// returns its secret, which is shown only this once. ttl 0 means no expiry.
func (s *Service) CreateToken(ctx context.Context, sub *Subject, name string, ttl time.Duration) (string, *Token, error) {
	if sub == nil || sub.User == nil || sub.User.ID <= 0 {
		return "", nil, errs.E(errs.Invalid, "tokens belong to users: sign in as a user to create one")
	}
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return "", nil, errs.E(errs.Invalid, "a token needs a name of 1 to 100 characters")
	}
	if ttl < 0 {
		return "", nil, errs.E(errs.Invalid, "a token's lifetime must not be negative")
	}
	secret := TokenPrefix + randomHex(32)
	h := hashSecret(secret)
	t := &Token{UserID: sub.User.ID, Name: name, CreatedMs: s.nowMs()}
	if ttl > 0 {
		t.ExpiresMs = s.now().Add(ttl).UnixMilli()
	}
	if err := s.store.CreateToken(ctx, t, h[:]); err != nil {
		return "", nil, err
	}
	s.audit(ctx, sub, "token.create", sub.User.Email, "token "+strconv.FormatInt(t.ID, 10)+" "+name)
	return secret, t, nil
}

// ListTokens lists the subject's tokens (without secrets).
func (s *Service) ListTokens(ctx context.Context, sub *Subject) ([]*Token, error) {
	return s.store.ListTokens(ctx, sub.User.ID)
}

// RevokeToken revokes one of the subject's tokens. It stops working at
// once on this replica, and within CacheTTL on others.
func (s *Service) RevokeToken(ctx context.Context, sub *Subject, id int64) error {
	if err := s.store.RevokeToken(ctx, sub.User.ID, id, s.nowMs()); err != nil {
		return err
	}
	s.forgetToken(id)
	s.audit(ctx, sub, "token.revoke", sub.User.Email, "token "+strconv.FormatInt(id, 10))
	return nil
}

// AuthenticateToken returns the subject of a bearer token.
func (s *Service) AuthenticateToken(ctx context.Context, secret string) (*Subject, error) {
	bad := errs.E(errs.Unauthenticated, "invalid, expired or revoked token")
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) != len(TokenPrefix)+64 {
		return nil, bad
	}
	h := hashSecret(secret)
	now := s.now()
	s.mu.Lock()
	c, ok := s.tokens[h]
	s.mu.Unlock()
	t := c.v
	if !ok || now.After(c.until) {
		var err error
		t, err = s.store.LookupToken(ctx, h[:])
		if errs.Is(err, errs.NotFound) {
			return nil, bad
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.tokens[h] = cached[*Token]{t, now.Add(s.opts.CacheTTL)}
		s.mu.Unlock()
		// Last use is recorded at most once per cache period.
		_ = s.store.TouchToken(ctx, t.ID, now.UnixMilli())
	}
	if t.RevokedMs != 0 || (t.ExpiresMs != 0 && now.UnixMilli() >= t.ExpiresMs) {
		return nil, bad
	}
	sub, err := s.subject(ctx, t.UserID)
	if err != nil {
		return nil, err
	}
	return active(scoped(sub, t))
}

// ---- passwords and sessions ----

// AuthenticateBasic checks an email and password (HTTP Basic, as the
// mlflow client sends them on every request). A verified pair is kept
// under a hash (see basicEntry), so that bcrypt's deliberate slowness is
// paid once, not per request, and is checked against the stored password
// and account every CacheTTL. A pair not in the cache is checked within
// the sign-in budgets of the email and the remote address (see
// "Sign-in throttling" in signin.go).
func (s *Service) AuthenticateBasic(ctx context.Context, email, password, remote string) (*Subject, error) {
	key := sha256.Sum256([]byte(strings.ToLower(email) + "\x00" + password))
	now := s.now()
	s.mu.Lock()
	c, ok := s.basic[key]
	s.mu.Unlock()
	if ok && !now.Before(c.until) {
		u, hash, err := s.store.GetUserByEmail(ctx, c.email)
		if err != nil && !errs.Is(err, errs.NotFound) {
			return nil, err
		}
		ok = err == nil && hash == c.hash && !u.Disabled && u.ID == c.userID
		s.mu.Lock()
		if ok {
			c.until = now.Add(s.opts.CacheTTL)
			s.basic[key] = c
		} else {
			delete(s.basic, key)
		}
		s.mu.Unlock()
	}
	if ok {
		sub, err := s.subject(ctx, c.userID)
		if err != nil {
			return nil, err
		}
		return active(sub)
	}
	u, hash, err := s.verifyOnce(ctx, key, email, password, remote)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.basic) >= maxBasicEntries {
		s.basic = map[[32]byte]basicEntry{}
	}
	s.basic[key] = basicEntry{userID: u.ID, email: u.Email, hash: hash, until: now.Add(s.opts.CacheTTL)}
	s.mu.Unlock()
	sub, err := s.subject(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	return active(sub)
}

// verifyOnce runs checkPassword for credentials once, however many
// requests carry them at the same time: those that join a check in
// progress share its answer and spend none of the budgets.
func (s *Service) verifyOnce(ctx context.Context, key [32]byte, email, password, remote string) (*User, string, error) {
	s.mu.Lock()
	if v, ok := s.verifying[key]; ok {
		s.mu.Unlock()
		select {
		case <-v.done:
			return v.user, v.hash, v.err
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	v := &verification{done: make(chan struct{})}
	s.verifying[key] = v
	s.mu.Unlock()
	v.user, v.hash, v.err = s.checkPassword(context.WithoutCancel(ctx), email, password, remote)
	s.mu.Lock()
	delete(s.verifying, key)
	s.mu.Unlock()
	close(v.done)
	return v.user, v.hash, v.err
}

// verifyPassword checks a password and returns the user and the stored
// hash it matched. Callers go through checkPassword, which bounds how
// many run.
func (s *Service) verifyPassword(ctx context.Context, email, password string) (*User, string, error) {
	bad := errs.E(errs.Unauthenticated, "wrong email or password")
	norm, err := NormalizeEmail(email)
	if err != nil {
		s.signin.checks.Add(1)
		_ = s.compare(s.dummyHash, []byte(password))
		return nil, "", bad
	}
	u, hash, err := s.store.GetUserByEmail(ctx, norm)
	if errs.Is(err, errs.NotFound) {
		s.signin.checks.Add(1)
		_ = s.compare(s.dummyHash, []byte(password))
		return nil, "", bad
	}
	if err != nil {
		return nil, "", err
	}
	s.signin.checks.Add(1)
	if s.compare([]byte(hash), []byte(password)) != nil {
		return nil, "", bad
	}
	if u.Disabled {
		return nil, "", errs.Errorf(errs.Unauthenticated, "user %s is disabled", u.Email)
	}
	return u, hash, nil
}

// Login checks a password and opens a browser session. It always issues a
// new session id (so a session id planted before login is worthless) and
// returns the cookie value and the session.
func (s *Service) Login(ctx context.Context, email, password, remote string) (string, *Session, *User, error) {
	u, _, err := s.checkPassword(ctx, email, password, remote)
	if err != nil {
		return "", nil, nil, err
	}
	cookie := randomHex(32)
	h := hashSecret(cookie)
	sess := &Session{UserID: u.ID, CreatedMs: s.nowMs(), ExpiresMs: s.now().Add(s.opts.SessionTTL).UnixMilli(), CSRF: randomHex(16)}
	if err := s.store.CreateSession(ctx, sess, h[:]); err != nil {
		return "", nil, nil, err
	}
	s.audit(ctx, &Subject{User: u}, "session.login", u.Email, "from "+remote)
	return cookie, sess, u, nil
}

// AuthenticateSession returns the subject and session of a session cookie.
func (s *Service) AuthenticateSession(ctx context.Context, cookie string) (*Subject, *Session, error) {
	bad := errs.E(errs.Unauthenticated, "the session has expired or ended: sign in again")
	if len(cookie) != 64 {
		return nil, nil, bad
	}
	h := hashSecret(cookie)
	sess, err := s.store.LookupSession(ctx, h[:])
	if errs.Is(err, errs.NotFound) {
		return nil, nil, bad
	}
	if err != nil {
		return nil, nil, err
	}
	if s.nowMs() >= sess.ExpiresMs {
		_ = s.store.DeleteSession(ctx, h[:])
		return nil, nil, bad
	}
	sub, err := s.subject(ctx, sess.UserID)
	if err != nil {
		return nil, nil, err
	}
	sub, err = active(sub)
	return sub, sess, err
}

// CheckCSRF compares the token a browser sent with its session's.
func CheckCSRF(sess *Session, token string) error {
	if sess == nil || token == "" || subtle.ConstantTimeCompare([]byte(sess.CSRF), []byte(token)) != 1 {
		return errs.E(errs.PermissionDenied, "missing or wrong X-Sextant-CSRF header for a request made with a session cookie")
	}
	return nil
}

// Logout ends a session.
func (s *Service) Logout(ctx context.Context, cookie string) error {
	h := hashSecret(cookie)
	return s.store.DeleteSession(ctx, h[:])
}

// ---- audit ----

func (s *Service) audit(ctx context.Context, actor *Subject, action, target, detail string) {
	e := &AuditEvent{TimeMs: s.nowMs(), Action: action, Target: target, Detail: detail, Actor: "command line"}
	if actor != nil && actor.User != nil {
		e.ActorID, e.Actor = actor.User.ID, actor.User.Email
	}
	if err := s.store.Audit(ctx, e); err != nil {
		s.log.Error("audit log write failed", "action", action, "target", target, "err", err)
	}
}

// AuditLog returns audit events after afterID (admins only).
func (s *Service) AuditLog(ctx context.Context, actor *Subject, afterID int64, limit int) ([]*AuditEvent, error) {
	if err := requireAdmin(actor, OpReadAudit); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return s.store.ListAudit(ctx, afterID, limit)
}
