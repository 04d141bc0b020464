package workspace

import "context"

// Store is what the workspace needs from storage. Implementations live in
// internal/sqlstore. Missing users, tokens, folders or comments give
// errs.NotFound; duplicates errs.AlreadyExists. Every method is atomic and
// safe for concurrent use.
type Store interface {
	// Users.
	CreateUser(ctx context.Context, u *User, passwordHash string) error
	GetUser(ctx context.Context, id int64) (*User, error)
	GetUserByEmail(ctx context.Context, email string) (*User, string, error) // the user and the password hash
	ListUsers(ctx context.Context) ([]*User, error)
	UpdateUser(ctx context.Context, id int64, u UserUpdate) error
	CountUsers(ctx context.Context) (int, error)

	// Personal access tokens; hash is the SHA-256 of the secret.
	CreateToken(ctx context.Context, t *Token, hash []byte) error
	LookupToken(ctx context.Context, hash []byte) (*Token, error)
	ListTokens(ctx context.Context, userID int64) ([]*Token, error)
	RevokeToken(ctx context.Context, userID, tokenID int64, nowMs int64) error
	TouchToken(ctx context.Context, tokenID int64, nowMs int64) error
	// NodeTokenNodes returns the nodes named by the node tokens that are
	// live at nowMs (not revoked, not expired), each once.
	NodeTokenNodes(ctx context.Context, nowMs int64) ([]string, error)

	// Browser sessions; hash is the SHA-256 of the cookie value.
	CreateSession(ctx context.Context, s *Session, hash []byte) error
	LookupSession(ctx context.Context, hash []byte) (*Session, error)
	DeleteSession(ctx context.Context, hash []byte) error
	DeleteUserSessions(ctx context.Context, userID int64) error

	// Groups. Group AllUsersGroup is implicit and not stored.
	CreateGroup(ctx context.Context, name string) (int64, error)
	GetGroupByName(ctx context.Context, name string) (int64, error)
	ListGroups(ctx context.Context) ([]Group, error)
	AddGroupMember(ctx context.Context, groupID, userID int64) error
	RemoveGroupMember(ctx context.Context, groupID, userID int64) error
	GroupsOf(ctx context.Context, userID int64) ([]int64, error)

	// Folders, by canonical path.
	CreateFolder(ctx context.Context, f *Folder) error
	GetFolder(ctx context.Context, path string) (*Folder, error)
	ListFolders(ctx context.Context, parent string) ([]*Folder, error)

	// Grants. SetGrant with NoAccess removes the principal's grant.
	SetGrant(ctx context.Context, g Grant) error
	Grants(ctx context.Context, rs []Resource) (map[Resource][]Grant, error)

	// ExperimentPath returns an experiment's name, which is its workspace
	// path when it has one, and errs.NotFound when no experiment has that
	// id.
	ExperimentPath(ctx context.Context, id string) (string, error)
	// RunExperiment returns the id of the experiment a run is in, and
	// errs.NotFound when no run has that id.
	RunExperiment(ctx context.Context, runID string) (string, error)
	// ExperimentNames returns every experiment's id and name.
	ExperimentNames(ctx context.Context) (map[string]string, error)
	// GrantsTo returns every grant to one of the principals.
	GrantsTo(ctx context.Context, ps []Principal) ([]Grant, error)

	// Comments.
	AddComment(ctx context.Context, c *Comment) error
	GetComment(ctx context.Context, id int64) (*Comment, error)
	UpdateComment(ctx context.Context, id int64, body string, nowMs int64) error
	DeleteComment(ctx context.Context, id int64) error
	ListComments(ctx context.Context, target CommentTarget) ([]*Comment, error)

	// Audit log.
	Audit(ctx context.Context, e *AuditEvent) error
	ListAudit(ctx context.Context, afterID int64, limit int) ([]*AuditEvent, error)
}

// UserUpdate lists user fields to change; nil fields are left alone.
type UserUpdate struct {
	Disabled     *bool
	Admin        *bool
	PasswordHash *string
	DisplayName  *string
}

// Token is a personal access token. Its secret is shown once, at
// creation, and stored only as a hash.
type Token struct {
	ID          int64
	UserID      int64
	Name        string
	CreatedMs   int64
	ExpiresMs   int64 // 0: never
	LastUsedMs  int64
	RevokedMs   int64 // 0: live
	SecretShown string
	// Nodes, when not empty, makes this a node token: it may only report
	// the GPU samples of these nodes (see Subject.Nodes).
	Nodes []string
}

// Session is a browser session.
type Session struct {
	UserID    int64
	CreatedMs int64
	ExpiresMs int64
	// CSRF is the token the browser must echo in X-Sextant-CSRF on every
	// request that changes something.
	CSRF string
}

// Group is a named set of users.
type Group struct {
	ID      int64
	Name    string
	Members []string // emails
}

// Folder is a folder of the workspace tree.
type Folder struct {
	ID        int64
	Path      string
	OwnerID   int64
	CreatedMs int64
}

// CommentTarget names what a comment is on.
type CommentTarget struct {
	// Kind is "run" or "experiment".
	Kind string
	ID   string
}

// Comment is a markdown comment on a run or an experiment.
type Comment struct {
	ID          int64
	Target      CommentTarget
	AuthorID    int64
	AuthorEmail string
	Body        string
	CreatedMs   int64
	UpdatedMs   int64
}

// AuditEvent records a security-relevant change.
type AuditEvent struct {
	ID      int64
	TimeMs  int64
	ActorID int64
	Actor   string
	Action  string
	Target  string
	Detail  string
}
