package wire

import (
	"github.com/sextant/sextant/internal/workspace"
)

// Sextant's own API for the team model (/api/2.0/sextant/...; docs/auth.md):
// sign-in, users, tokens, groups, permissions, folders, comments and the
// audit log. Answers that were maps keep their keys in the order
// encoding/json sorted them.

// User is a user in answers.
type User struct {
	ID          int64  `json:"id"`
	Email       string `json:"email"`
	DisplayName string `json:"display_name,omitempty"`
	Admin       bool   `json:"admin"`
	Disabled    bool   `json:"disabled"`
	CreatedMs   int64  `json:"created_time"`
}

// ToUser returns u's wire shape.
func ToUser(u *workspace.User) User {
	return User{u.ID, u.Email, u.DisplayName, u.Admin, u.Disabled, u.CreatedMs}
}

// LoginRequest is the body of POST /auth/login.
type LoginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// LoginResponse answers a sign-in; the session is in the cookie.
type LoginResponse struct {
	CSRFToken   string `json:"csrf_token"`
	ExpiresTime int64  `json:"expires_time"`
	User        User   `json:"user"`
}

// WhoAmI answers GET /auth/whoami: who the credentials belong to, and
// whether the server requires authentication (in single-user mode the
// user is the stand-in "local").
type WhoAmI struct {
	MultiUser bool `json:"multi_user"`
	User      User `json:"user"`
}

// CreateUserRequest is the body of POST /users.
type CreateUserRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Admin    bool   `json:"admin"`
}

// UpdateUserRequest is the body of PATCH /users; nil fields stay as they
// are.
type UpdateUserRequest struct {
	Email       string  `json:"email"`
	Disabled    *bool   `json:"disabled,omitempty"`
	Admin       *bool   `json:"admin,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
}

// UserResponse answers the creation or change of a user.
type UserResponse struct {
	User User `json:"user"`
}

// UsersResponse answers GET /users.
type UsersResponse struct {
	Users []User `json:"users"`
}

// SetPasswordRequest is the body of POST /users/password.
type SetPasswordRequest struct {
	Email       string `json:"email"`
	OldPassword string `json:"old_password"`
	NewPassword string `json:"new_password"`
}

// Token is a personal access token in answers; Token, the secret, is set
// only in the answer to its creation.
type Token struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	CreatedMs  int64  `json:"created_time"`
	ExpiresMs  int64  `json:"expires_time,omitempty"`
	LastUsedMs int64  `json:"last_used_time,omitempty"`
	RevokedMs  int64  `json:"revoked_time,omitempty"`
	Token      string `json:"token,omitempty"`
	// Nodes are a node token's GPU nodes; absent for a user's token.
	Nodes []string `json:"nodes,omitempty"`
}

// ToToken returns t's wire shape, without the secret.
func ToToken(t *workspace.Token) Token {
	return Token{ID: t.ID, Name: t.Name, CreatedMs: t.CreatedMs, ExpiresMs: t.ExpiresMs, LastUsedMs: t.LastUsedMs, RevokedMs: t.RevokedMs, Nodes: t.Nodes}
}

// CreateTokenRequest is the body of POST /tokens; a lifetime of 0 lives
// until revoked. Nodes (administrators only) makes a node token: it may
// only post the GPU samples of those nodes.
type CreateTokenRequest struct {
	Name            string   `json:"name"`
	LifetimeSeconds Int      `json:"lifetime_seconds,omitzero"`
	Nodes           []string `json:"nodes,omitempty"`
}

// TokenResponse answers the creation of a token.
type TokenResponse struct {
	Token Token `json:"token"`
}

// TokensResponse answers GET /tokens.
type TokensResponse struct {
	Tokens []Token `json:"tokens"`
}

// RevokeTokenRequest is the body of DELETE /tokens.
type RevokeTokenRequest struct {
	ID Int `json:"id"`
}

// CreateGroupRequest is the body of POST /groups.
type CreateGroupRequest struct {
	Name string `json:"name"`
}

// Group is a group and its members' emails.
type Group struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// GroupsResponse answers GET /groups.
type GroupsResponse struct {
	Groups []Group `json:"groups"`
}

// GroupMemberRequest is the body of POST /groups/members: add (Member nil
// or true) or remove a user.
type GroupMemberRequest struct {
	Group  string `json:"group"`
	Email  string `json:"email"`
	Member *bool  `json:"member,omitempty"`
}

// Grant is a principal's level on a resource.
type Grant struct {
	Principal string `json:"principal"`
	Level     string `json:"level"`
}

// PermissionsResponse answers GET /permissions?resource=...
type PermissionsResponse struct {
	Grants   []Grant `json:"grants"`
	Resource string  `json:"resource"`
}

// SetPermissionRequest is the body of PUT /permissions; the level
// NO_PERMISSIONS removes the principal's grant.
type SetPermissionRequest struct {
	Resource  string `json:"resource"`
	Principal string `json:"principal"`
	Level     string `json:"level"`
}

// MkdirsRequest is the body of POST /workspace/mkdirs.
type MkdirsRequest struct {
	Path string `json:"path"`
}

// Folder is a workspace folder; the answer to mkdirs is one.
type Folder struct {
	Path string `json:"path"`
}

// FoldersResponse answers GET /workspace/list?path=...
type FoldersResponse struct {
	Folders []Folder `json:"folders"`
}

// Comment is a comment on a run or an experiment.
type Comment struct {
	ID         int64  `json:"id"`
	TargetKind string `json:"target_kind"`
	TargetID   string `json:"target_id"`
	Author     string `json:"author"`
	Body       string `json:"body"`
	CreatedMs  int64  `json:"created_time"`
	UpdatedMs  int64  `json:"updated_time"`
}

// ToComment returns c's wire shape.
func ToComment(c *workspace.Comment) Comment {
	return Comment{c.ID, c.Target.Kind, c.Target.ID, c.AuthorEmail, c.Body, c.CreatedMs, c.UpdatedMs}
}

// AddCommentRequest is the body of POST /comments.
type AddCommentRequest struct {
	TargetKind string `json:"target_kind"`
	TargetID   string `json:"target_id"`
	Body       string `json:"body"`
}

// EditCommentRequest is the body of PATCH /comments.
type EditCommentRequest struct {
	ID   Int    `json:"id"`
	Body string `json:"body"`
}

// DeleteCommentRequest is the body of DELETE /comments.
type DeleteCommentRequest struct {
	ID Int `json:"id"`
}

// CommentResponse answers the creation or edit of a comment.
type CommentResponse struct {
	Comment Comment `json:"comment"`
}

// CommentsResponse answers GET /comments?target_kind=...&target_id=...
type CommentsResponse struct {
	Comments []Comment `json:"comments"`
}

// AuditEvent is an entry of the audit log.
type AuditEvent struct {
	ID     int64  `json:"id"`
	TimeMs int64  `json:"time"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Target string `json:"target"`
	Detail string `json:"detail,omitempty"`
}

// AuditResponse answers GET /audit.
type AuditResponse struct {
	Events []AuditEvent `json:"events"`
}

// Health is GET /health with Accept: application/json: status OK or
// READ_ONLY, and the database's state.
type Health struct {
	Status   string         `json:"status"`
	Database DatabaseHealth `json:"database"`
}

// DatabaseHealth says whether the database takes writes, and since when
// and why not.
type DatabaseHealth struct {
	Writable bool   `json:"writable"`
	Reason   string `json:"reason,omitempty"`
	SinceMs  int64  `json:"since_ms,omitempty"`
}
