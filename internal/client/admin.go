package client

import (
	"context"
	"net/url"
	"time"

	"github.com/sextant/sextant/internal/wire"
)

// The calls of the admin commands (users, tokens, groups, perms, mkdirs):
// Sextant's own API for the team model, /api/2.0/sextant/...; docs/auth.md.

const sxAPI = "/api/2.0/sextant"

// CreateUser creates a user (an administrator's call).
func (c *Client) CreateUser(ctx context.Context, email, password string, admin bool) (wire.User, error) {
	var out wire.UserResponse
	err := c.jsonCall(ctx, "POST", sxAPI+"/users", nil, wire.CreateUserRequest{Email: email, Password: password, Admin: admin}, &out)
	return out.User, err
}

// ListUsers returns the users.
func (c *Client) ListUsers(ctx context.Context) ([]wire.User, error) {
	var out wire.UsersResponse
	err := c.jsonCall(ctx, "GET", sxAPI+"/users", nil, nil, &out)
	return out.Users, err
}

// UpdateUser changes the fields of u that are set.
func (c *Client) UpdateUser(ctx context.Context, u wire.UpdateUserRequest) (wire.User, error) {
	var out wire.UserResponse
	err := c.jsonCall(ctx, "PATCH", sxAPI+"/users", nil, u, &out)
	return out.User, err
}

// SetPassword changes a password: one's own needs the old one.
func (c *Client) SetPassword(ctx context.Context, email, oldPassword, newPassword string) error {
	return c.jsonCall(ctx, "POST", sxAPI+"/users/password", nil, wire.SetPasswordRequest{Email: email, OldPassword: oldPassword, NewPassword: newPassword}, nil)
}

// CreateToken creates a token for the signed-in user, with its secret
// (shown this once); a lifetime of 0 lives until revoked.
func (c *Client) CreateToken(ctx context.Context, name string, lifetime time.Duration) (wire.Token, error) {
	var out wire.TokenResponse
	err := c.jsonCall(ctx, "POST", sxAPI+"/tokens", nil, wire.CreateTokenRequest{Name: name, LifetimeSeconds: wire.NewInt(int64(lifetime.Seconds()))}, &out)
	return out.Token, err
}

// CreateNodeToken creates a node token (administrators only): it may only
// post the GPU samples of nodes.
func (c *Client) CreateNodeToken(ctx context.Context, name string, lifetime time.Duration, nodes []string) (wire.Token, error) {
	var out wire.TokenResponse
	err := c.jsonCall(ctx, "POST", sxAPI+"/tokens", nil, wire.CreateTokenRequest{Name: name, LifetimeSeconds: wire.NewInt(int64(lifetime.Seconds())), Nodes: nodes}, &out)
	return out.Token, err
}

// ListTokens returns the signed-in user's tokens, without secrets.
func (c *Client) ListTokens(ctx context.Context) ([]wire.Token, error) {
	var out wire.TokensResponse
	err := c.jsonCall(ctx, "GET", sxAPI+"/tokens", nil, nil, &out)
	return out.Tokens, err
}

// RevokeToken revokes a token by id.
func (c *Client) RevokeToken(ctx context.Context, id int64) error {
	return c.jsonCall(ctx, "DELETE", sxAPI+"/tokens", nil, wire.RevokeTokenRequest{ID: wire.NewInt(id)}, nil)
}

// CreateGroup creates a group.
func (c *Client) CreateGroup(ctx context.Context, name string) error {
	return c.jsonCall(ctx, "POST", sxAPI+"/groups", nil, wire.CreateGroupRequest{Name: name}, nil)
}

// SetGroupMember adds a user to a group (member true) or removes them.
func (c *Client) SetGroupMember(ctx context.Context, group, email string, member bool) error {
	return c.jsonCall(ctx, "POST", sxAPI+"/groups/members", nil, wire.GroupMemberRequest{Group: group, Email: email, Member: &member}, nil)
}

// ListGroups returns the groups and their members.
func (c *Client) ListGroups(ctx context.Context) ([]wire.Group, error) {
	var out wire.GroupsResponse
	err := c.jsonCall(ctx, "GET", sxAPI+"/groups", nil, nil, &out)
	return out.Groups, err
}

// Permissions returns the grants on a resource (experiment:<id>,
// folder:<path>, catalog:..., schema:..., volume:...).
func (c *Client) Permissions(ctx context.Context, resource string) ([]wire.Grant, error) {
	var out wire.PermissionsResponse
	err := c.jsonCall(ctx, "GET", sxAPI+"/permissions", url.Values{"resource": {resource}}, nil, &out)
	return out.Grants, err
}

// SetPermission grants a level on a resource; NO_PERMISSIONS removes the
// principal's grant.
func (c *Client) SetPermission(ctx context.Context, resource, principal, level string) error {
	return c.jsonCall(ctx, "PUT", sxAPI+"/permissions", nil, wire.SetPermissionRequest{Resource: resource, Principal: principal, Level: level}, nil)
}

// Mkdirs creates a workspace folder and its parents, and returns its
// canonical path.
func (c *Client) Mkdirs(ctx context.Context, path string) (string, error) {
	var out wire.Folder
	err := c.jsonCall(ctx, "POST", sxAPI+"/workspace/mkdirs", nil, wire.MkdirsRequest{Path: path}, &out)
	return out.Path, err
}

// ListFolder returns the folders in a workspace folder.
func (c *Client) ListFolder(ctx context.Context, path string) ([]wire.Folder, error) {
	var out wire.FoldersResponse
	err := c.jsonCall(ctx, "GET", sxAPI+"/workspace/list", url.Values{"path": {path}}, nil, &out)
	return out.Folders, err
}
