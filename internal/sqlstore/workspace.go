package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

var _ workspace.Store = (*WorkspaceStore)(nil)

func notFound(what string) error { return errs.Errorf(errs.NotFound, "%s not found", what) }

// CreateUser implements workspace.Store.
func (s *WorkspaceStore) CreateUser(ctx context.Context, u *workspace.User, passwordHash string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		return sqlError(tx.QueryRowContext(ctx, `INSERT INTO users (email, display_name, password_hash, is_admin, disabled, created_time) VALUES (?, ?, ?, ?, 0, ?) RETURNING user_id`,
			u.Email, u.DisplayName, passwordHash, u.Admin, u.CreatedMs).Scan(&u.ID), "user "+u.Email+" already exists")
	})
}

const userCols = `user_id, email, display_name, is_admin, disabled, created_time`

func scanUser(sc interface{ Scan(...any) error }, extra ...any) (*workspace.User, error) {
	u := &workspace.User{}
	err := sc.Scan(append([]any{&u.ID, &u.Email, &u.DisplayName, &u.Admin, &u.Disabled, &u.CreatedMs}, extra...)...)
	return u, err
}

// GetUser implements workspace.Store.
func (s *WorkspaceStore) GetUser(ctx context.Context, id int64) (*workspace.User, error) {
	u, err := scanUser(s.rdb.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE user_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("user " + strconv.FormatInt(id, 10))
	}
	return u, sqlError(err, "get user")
}

// GetUserByEmail implements workspace.Store.
func (s *WorkspaceStore) GetUserByEmail(ctx context.Context, email string) (*workspace.User, string, error) {
	var hash string
	u, err := scanUser(s.rdb.QueryRowContext(ctx, `SELECT `+userCols+`, password_hash FROM users WHERE email = ?`, email), &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", notFound("user " + email)
	}
	return u, hash, sqlError(err, "get user")
}

// ListUsers implements workspace.Store.
func (s *WorkspaceStore) ListUsers(ctx context.Context) ([]*workspace.User, error) {
	var out []*workspace.User
	err := s.queryEach(ctx, `SELECT `+userCols+` FROM users ORDER BY email`, nil, func(rows *sql.Rows) error {
		u, err := scanUser(rows)
		out = append(out, u)
		return err
	})
	return out, err
}

// CountUsers implements workspace.Store.
func (s *WorkspaceStore) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n)
	return n, sqlError(err, "count users")
}

// UpdateUser implements workspace.Store.
func (s *WorkspaceStore) UpdateUser(ctx context.Context, id int64, u workspace.UserUpdate) error {
	return s.w.do(ctx, func(tx *wtx) error {
		var sets []string
		var args []any
		if u.Disabled != nil {
			sets, args = append(sets, "disabled = ?"), append(args, *u.Disabled)
		}
		if u.Admin != nil {
			sets, args = append(sets, "is_admin = ?"), append(args, *u.Admin)
		}
		if u.PasswordHash != nil {
			sets, args = append(sets, "password_hash = ?"), append(args, *u.PasswordHash)
		}
		if u.DisplayName != nil {
			sets, args = append(sets, "display_name = ?"), append(args, *u.DisplayName)
		}
		if len(sets) == 0 {
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE users SET `+strings.Join(sets, ", ")+` WHERE user_id = ?`, append(args, id)...)
		if err != nil {
			return sqlError(err, "update user")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("user " + strconv.FormatInt(id, 10))
		}
		return nil
	})
}

// CreateToken implements workspace.Store.
func (s *WorkspaceStore) CreateToken(ctx context.Context, t *workspace.Token, hash []byte) error {
	return s.w.do(ctx, func(tx *wtx) error {
		return sqlError(tx.QueryRowContext(ctx, `INSERT INTO tokens (user_id, name, hash, created_time, expires_time, last_used_time, revoked_time, nodes) VALUES (?, ?, ?, ?, ?, 0, 0, ?) RETURNING token_id`,
			t.UserID, t.Name, hash, t.CreatedMs, t.ExpiresMs, strings.Join(t.Nodes, "\n")).Scan(&t.ID), "create token")
	})
}

const tokenCols = `token_id, user_id, name, created_time, expires_time, last_used_time, revoked_time, nodes`

func scanToken(sc interface{ Scan(...any) error }) (*workspace.Token, error) {
	t := &workspace.Token{}
	var nodes string
	err := sc.Scan(&t.ID, &t.UserID, &t.Name, &t.CreatedMs, &t.ExpiresMs, &t.LastUsedMs, &t.RevokedMs, &nodes)
	if nodes != "" {
		t.Nodes = strings.Split(nodes, "\n")
	}
	return t, err
}

// NodeTokenNodes implements workspace.Store.
func (s *WorkspaceStore) NodeTokenNodes(ctx context.Context, nowMs int64) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	err := s.queryEach(ctx, `SELECT nodes FROM tokens WHERE nodes <> '' AND revoked_time = 0 AND (expires_time = 0 OR expires_time > ?)`, []any{nowMs}, func(rows *sql.Rows) error {
		var nodes string
		if err := rows.Scan(&nodes); err != nil {
			return err
		}
		for _, n := range strings.Split(nodes, "\n") {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		return nil
	})
	return out, err
}

// LookupToken implements workspace.Store.
func (s *WorkspaceStore) LookupToken(ctx context.Context, hash []byte) (*workspace.Token, error) {
	t, err := scanToken(s.rdb.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("token")
	}
	return t, sqlError(err, "look up token")
}

// ListTokens implements workspace.Store.
func (s *WorkspaceStore) ListTokens(ctx context.Context, userID int64) ([]*workspace.Token, error) {
	var out []*workspace.Token
	err := s.queryEach(ctx, `SELECT `+tokenCols+` FROM tokens WHERE user_id = ? ORDER BY token_id`, []any{userID}, func(rows *sql.Rows) error {
		t, err := scanToken(rows)
		out = append(out, t)
		return err
	})
	return out, err
}

// RevokeToken implements workspace.Store.
func (s *WorkspaceStore) RevokeToken(ctx context.Context, userID, tokenID, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_time = ? WHERE token_id = ? AND user_id = ? AND revoked_time = 0`, nowMs, tokenID, userID)
		if err != nil {
			return sqlError(err, "revoke token")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("live token " + strconv.FormatInt(tokenID, 10) + " of this user")
		}
		return nil
	})
}

// TouchToken implements workspace.Store.
func (s *WorkspaceStore) TouchToken(ctx context.Context, tokenID, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `UPDATE tokens SET last_used_time = ? WHERE token_id = ?`, nowMs, tokenID)
		return sqlError(err, "touch token")
	})
}

// CreateSession implements workspace.Store.
func (s *WorkspaceStore) CreateSession(ctx context.Context, sess *workspace.Session, hash []byte) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (hash, user_id, created_time, expires_time, csrf) VALUES (?, ?, ?, ?, ?)`,
			hash, sess.UserID, sess.CreatedMs, sess.ExpiresMs, sess.CSRF)
		return sqlError(err, "create session")
	})
}

// LookupSession implements workspace.Store.
func (s *WorkspaceStore) LookupSession(ctx context.Context, hash []byte) (*workspace.Session, error) {
	sess := &workspace.Session{}
	err := s.rdb.QueryRowContext(ctx, `SELECT user_id, created_time, expires_time, csrf FROM sessions WHERE hash = ?`, hash).
		Scan(&sess.UserID, &sess.CreatedMs, &sess.ExpiresMs, &sess.CSRF)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("session")
	}
	return sess, sqlError(err, "look up session")
}

// DeleteSession implements workspace.Store.
func (s *WorkspaceStore) DeleteSession(ctx context.Context, hash []byte) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
		return sqlError(err, "delete session")
	})
}

// DeleteUserSessions implements workspace.Store.
func (s *WorkspaceStore) DeleteUserSessions(ctx context.Context, userID int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID)
		return sqlError(err, "delete sessions")
	})
}

// CreateGroup implements workspace.Store.
func (s *WorkspaceStore) CreateGroup(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.w.do(ctx, func(tx *wtx) error {
		return sqlError(tx.QueryRowContext(ctx, `INSERT INTO user_groups (name) VALUES (?) RETURNING group_id`, name).Scan(&id), "group "+name+" already exists")
	})
	return id, err
}

// GetGroupByName implements workspace.Store.
func (s *WorkspaceStore) GetGroupByName(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.rdb.QueryRowContext(ctx, `SELECT group_id FROM user_groups WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("group " + name)
	}
	return id, sqlError(err, "get group")
}

// ListGroups implements workspace.Store.
func (s *WorkspaceStore) ListGroups(ctx context.Context) ([]workspace.Group, error) {
	var out []workspace.Group
	idx := map[int64]int{}
	err := s.queryEach(ctx, `SELECT g.group_id, g.name, COALESCE(u.email, '') FROM user_groups g
		LEFT JOIN group_members m ON m.group_id = g.group_id LEFT JOIN users u ON u.user_id = m.user_id ORDER BY g.name, u.email`, nil, func(rows *sql.Rows) error {
		var id int64
		var name, email string
		if err := rows.Scan(&id, &name, &email); err != nil {
			return err
		}
		i, ok := idx[id]
		if !ok {
			i = len(out)
			idx[id] = i
			out = append(out, workspace.Group{ID: id, Name: name})
		}
		if email != "" {
			out[i].Members = append(out[i].Members, email)
		}
		return nil
	})
	return out, err
}

// AddGroupMember implements workspace.Store.
func (s *WorkspaceStore) AddGroupMember(ctx context.Context, groupID, userID int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO group_members (group_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, groupID, userID)
		return sqlError(err, "add group member")
	})
}

// RemoveGroupMember implements workspace.Store.
func (s *WorkspaceStore) RemoveGroupMember(ctx context.Context, groupID, userID int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM group_members WHERE group_id = ? AND user_id = ?`, groupID, userID)
		return sqlError(err, "remove group member")
	})
}

// GroupsOf implements workspace.Store.
func (s *WorkspaceStore) GroupsOf(ctx context.Context, userID int64) ([]int64, error) {
	var out []int64
	err := s.queryEach(ctx, `SELECT group_id FROM group_members WHERE user_id = ?`, []any{userID}, func(rows *sql.Rows) error {
		var id int64
		err := rows.Scan(&id)
		out = append(out, id)
		return err
	})
	return out, err
}

// CreateFolder implements workspace.Store.
func (s *WorkspaceStore) CreateFolder(ctx context.Context, f *workspace.Folder) error {
	return s.w.do(ctx, func(tx *wtx) error {
		return sqlError(tx.QueryRowContext(ctx, `INSERT INTO folders (path, parent, owner_id, created_time) VALUES (?, ?, ?, ?) RETURNING folder_id`,
			f.Path, workspace.Parent(f.Path), f.OwnerID, f.CreatedMs).Scan(&f.ID), "folder "+f.Path+" already exists")
	})
}

// GetFolder implements workspace.Store.
func (s *WorkspaceStore) GetFolder(ctx context.Context, path string) (*workspace.Folder, error) {
	f := &workspace.Folder{}
	err := s.rdb.QueryRowContext(ctx, `SELECT folder_id, path, owner_id, created_time FROM folders WHERE path = ?`, path).
		Scan(&f.ID, &f.Path, &f.OwnerID, &f.CreatedMs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, workspace.FolderNotFound(path)
	}
	return f, sqlError(err, "get folder")
}

// ListFolders implements workspace.Store.
func (s *WorkspaceStore) ListFolders(ctx context.Context, parent string) ([]*workspace.Folder, error) {
	var out []*workspace.Folder
	err := s.queryEach(ctx, `SELECT folder_id, path, owner_id, created_time FROM folders WHERE parent = ? AND path != '/' ORDER BY path`, []any{parent}, func(rows *sql.Rows) error {
		f := &workspace.Folder{}
		err := rows.Scan(&f.ID, &f.Path, &f.OwnerID, &f.CreatedMs)
		out = append(out, f)
		return err
	})
	return out, err
}

// SetGrant implements workspace.Store.
func (s *WorkspaceStore) SetGrant(ctx context.Context, g workspace.Grant) error {
	return s.w.do(ctx, func(tx *wtx) error {
		if g.Level == workspace.NoAccess {
			_, err := tx.ExecContext(ctx, `DELETE FROM grants WHERE resource_kind = ? AND resource_key = ? AND principal_kind = ? AND principal_id = ?`,
				int(g.Resource.Kind), g.Resource.Key, int(g.Principal.Kind), g.Principal.ID)
			return sqlError(err, "remove grant")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO grants (resource_kind, resource_key, principal_kind, principal_id, level) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (resource_kind, resource_key, principal_kind, principal_id) DO UPDATE SET level = excluded.level`,
			int(g.Resource.Kind), g.Resource.Key, int(g.Principal.Kind), g.Principal.ID, int(g.Level))
		return sqlError(err, "set grant")
	})
}

// Grants implements workspace.Store.
func (s *WorkspaceStore) Grants(ctx context.Context, rs []workspace.Resource) (map[workspace.Resource][]workspace.Grant, error) {
	out := make(map[workspace.Resource][]workspace.Grant, len(rs))
	if len(rs) == 0 {
		return out, nil
	}
	var ors []string
	var args []any
	for _, r := range rs {
		ors = append(ors, "(g.resource_kind = ? AND g.resource_key = ?)")
		args = append(args, int(r.Kind), r.Key)
	}
	err := s.queryEach(ctx, `SELECT g.resource_kind, g.resource_key, g.principal_kind, g.principal_id, g.level,
			COALESCE(u.email, gr.name, CASE WHEN g.principal_kind = 2 AND g.principal_id = 0 THEN 'group:users' END, '')
		FROM grants g
		LEFT JOIN users u ON g.principal_kind = 1 AND u.user_id = g.principal_id
		LEFT JOIN user_groups gr ON g.principal_kind = 2 AND gr.group_id = g.principal_id
		WHERE `+strings.Join(ors, " OR ")+` ORDER BY g.principal_kind, g.principal_id`, args, func(rows *sql.Rows) error {
		var g workspace.Grant
		var rk, pk, lvl int
		if err := rows.Scan(&rk, &g.Resource.Key, &pk, &g.Principal.ID, &lvl, &g.PrincipalName); err != nil {
			return err
		}
		g.Resource.Kind, g.Principal.Kind, g.Level = workspace.ResourceKind(rk), workspace.PrincipalKind(pk), workspace.Level(lvl)
		if g.Principal.Kind == workspace.PrincipalGroup && g.Principal.ID != workspace.AllUsersGroup {
			g.PrincipalName = "group:" + g.PrincipalName
		}
		out[g.Resource] = append(out[g.Resource], g)
		return nil
	})
	return out, err
}

// ExperimentPath implements workspace.Store.
func (s *WorkspaceStore) ExperimentPath(ctx context.Context, id string) (string, error) {
	n, err := parseExperimentID(id)
	if err != nil {
		return "", err
	}
	var name string
	err = s.rdb.QueryRowContext(ctx, `SELECT name FROM experiments WHERE experiment_id = ?`, n).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", tracking.ExperimentNotFound(id)
	}
	return name, sqlError(err, "get experiment")
}

// RunExperiment implements workspace.Store.
func (s *WorkspaceStore) RunExperiment(ctx context.Context, runID string) (string, error) {
	var exp int64
	err := s.rdb.QueryRowContext(ctx, `SELECT experiment_id FROM runs WHERE run_id = ?`, runID).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return "", tracking.RunNotFound(runID)
	}
	if err != nil {
		return "", sqlError(err, "get run")
	}
	return strconv.FormatInt(exp, 10), nil
}

// ExperimentNames implements workspace.Store.
func (s *WorkspaceStore) ExperimentNames(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	err := s.queryEach(ctx, `SELECT experiment_id, name FROM experiments`, nil, func(rows *sql.Rows) error {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return err
		}
		out[strconv.FormatInt(id, 10)] = name
		return nil
	})
	return out, err
}

// GrantsTo implements workspace.Store.
func (s *WorkspaceStore) GrantsTo(ctx context.Context, ps []workspace.Principal) ([]workspace.Grant, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	var ors []string
	var args []any
	for _, p := range ps {
		ors = append(ors, "(principal_kind = ? AND principal_id = ?)")
		args = append(args, int(p.Kind), p.ID)
	}
	var out []workspace.Grant
	err := s.queryEach(ctx, `SELECT resource_kind, resource_key, principal_kind, principal_id, level FROM grants WHERE `+strings.Join(ors, " OR "), args, func(rows *sql.Rows) error {
		var g workspace.Grant
		var rk, pk, lvl int
		if err := rows.Scan(&rk, &g.Resource.Key, &pk, &g.Principal.ID, &lvl); err != nil {
			return err
		}
		g.Resource.Kind, g.Principal.Kind, g.Level = workspace.ResourceKind(rk), workspace.PrincipalKind(pk), workspace.Level(lvl)
		out = append(out, g)
		return nil
	})
	return out, err
}

// AddComment implements workspace.Store.
func (s *WorkspaceStore) AddComment(ctx context.Context, c *workspace.Comment) error {
	return s.w.do(ctx, func(tx *wtx) error {
		return sqlError(tx.QueryRowContext(ctx, `INSERT INTO comments (target_kind, target_id, author_id, body, created_time, updated_time) VALUES (?, ?, ?, ?, ?, ?) RETURNING comment_id`,
			c.Target.Kind, c.Target.ID, c.AuthorID, c.Body, c.CreatedMs, c.UpdatedMs).Scan(&c.ID), "add comment")
	})
}

const commentCols = `c.comment_id, c.target_kind, c.target_id, c.author_id, COALESCE(u.email, ''), c.body, c.created_time, c.updated_time`

func scanComment(sc interface{ Scan(...any) error }) (*workspace.Comment, error) {
	c := &workspace.Comment{}
	err := sc.Scan(&c.ID, &c.Target.Kind, &c.Target.ID, &c.AuthorID, &c.AuthorEmail, &c.Body, &c.CreatedMs, &c.UpdatedMs)
	return c, err
}

// GetComment implements workspace.Store.
func (s *WorkspaceStore) GetComment(ctx context.Context, id int64) (*workspace.Comment, error) {
	c, err := scanComment(s.rdb.QueryRowContext(ctx, `SELECT `+commentCols+` FROM comments c LEFT JOIN users u ON u.user_id = c.author_id WHERE c.comment_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("comment " + strconv.FormatInt(id, 10))
	}
	return c, sqlError(err, "get comment")
}

// UpdateComment implements workspace.Store.
func (s *WorkspaceStore) UpdateComment(ctx context.Context, id int64, body string, nowMs int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE comments SET body = ?, updated_time = ? WHERE comment_id = ?`, body, nowMs, id)
		if err != nil {
			return sqlError(err, "update comment")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("comment " + strconv.FormatInt(id, 10))
		}
		return nil
	})
}

// DeleteComment implements workspace.Store.
func (s *WorkspaceStore) DeleteComment(ctx context.Context, id int64) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM comments WHERE comment_id = ?`, id)
		return sqlError(err, "delete comment")
	})
}

// ListComments implements workspace.Store.
func (s *WorkspaceStore) ListComments(ctx context.Context, target workspace.CommentTarget) ([]*workspace.Comment, error) {
	var out []*workspace.Comment
	err := s.queryEach(ctx, `SELECT `+commentCols+` FROM comments c LEFT JOIN users u ON u.user_id = c.author_id
		WHERE c.target_kind = ? AND c.target_id = ? ORDER BY c.created_time, c.comment_id`, []any{target.Kind, target.ID}, func(rows *sql.Rows) error {
		c, err := scanComment(rows)
		out = append(out, c)
		return err
	})
	return out, err
}

// Audit implements workspace.Store.
func (s *WorkspaceStore) Audit(ctx context.Context, e *workspace.AuditEvent) error {
	return s.w.do(ctx, func(tx *wtx) error {
		return sqlError(tx.QueryRowContext(ctx, `INSERT INTO audit_log (time, actor_id, actor, action, target, detail) VALUES (?, ?, ?, ?, ?, ?) RETURNING event_id`,
			e.TimeMs, e.ActorID, e.Actor, e.Action, e.Target, e.Detail).Scan(&e.ID), "write audit log")
	})
}

// ListAudit implements workspace.Store.
func (s *WorkspaceStore) ListAudit(ctx context.Context, afterID int64, limit int) ([]*workspace.AuditEvent, error) {
	var out []*workspace.AuditEvent
	err := s.queryEach(ctx, `SELECT event_id, time, actor_id, actor, action, target, detail FROM audit_log WHERE event_id > ? ORDER BY event_id LIMIT ?`,
		[]any{afterID, limit}, func(rows *sql.Rows) error {
			e := &workspace.AuditEvent{}
			err := rows.Scan(&e.ID, &e.TimeMs, &e.ActorID, &e.Actor, &e.Action, &e.Target, &e.Detail)
			out = append(out, e)
			return err
		})
	return out, err
}
