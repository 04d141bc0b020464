package httpapi

import (
	"context"
	"io"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
	"github.com/sextant/sextant/internal/workspace"
)

// Sextant's own API for the team model: sign-in, users, tokens, groups,
// permissions, folders, comments, the audit log and workspace files.

const sx = "/api/2.0/sextant"

func (s *Server) registerWorkspaceRoutes() {
	s.handle("POST", sx+"/auth/login", Public, s.login)
	s.handle("POST", sx+"/auth/logout", Authenticated, s.logout)
	s.handle("GET", sx+"/auth/whoami", Authenticated, s.whoami)
	s.handle("POST", sx+"/users", Authenticated, s.createUser)
	s.handle("GET", sx+"/users", Authenticated, s.listUsers)
	s.handle("PATCH", sx+"/users", Authenticated, s.updateUser)
	s.handle("POST", sx+"/users/password", Authenticated, s.setPassword)
	s.handle("POST", sx+"/tokens", Authenticated, s.createToken)
	s.handle("GET", sx+"/tokens", Authenticated, s.listTokens)
	s.handle("DELETE", sx+"/tokens", Authenticated, s.revokeToken)
	s.handle("POST", sx+"/groups", Authenticated, s.createGroup)
	s.handle("GET", sx+"/groups", Authenticated, s.listGroups)
	s.handle("POST", sx+"/groups/members", Authenticated, s.setGroupMember)
	s.handle("GET", sx+"/permissions", Authenticated, s.getPermissions)
	s.handle("PUT", sx+"/permissions", Authenticated, s.setPermission)
	s.handle("POST", sx+"/workspace/mkdirs", Authenticated, s.mkdirs)
	s.handle("GET", sx+"/workspace/list", Authenticated, s.listWorkspace)
	s.handle("POST", sx+"/comments", ReadExperiment, s.addComment)
	s.handle("GET", sx+"/comments", ReadExperiment, s.listComments)
	s.handle("PATCH", sx+"/comments", ReadExperiment, s.editComment)
	s.handle("DELETE", sx+"/comments", ReadExperiment, s.deleteComment)
	s.handle("GET", sx+"/audit", Authenticated, s.auditLog)
	s.handle("PUT", "/api/2.0/fs/files/Workspace/{path...}", EditExperiment, s.putWorkspaceFile)
	s.handle("GET", "/api/2.0/fs/files/Workspace/{path...}", ReadExperiment, s.getWorkspaceFile)
	s.handle("DELETE", "/api/2.0/fs/files/Workspace/{path...}", EditExperiment, s.deleteWorkspaceFile)
	s.handle("GET", "/api/2.0/fs/directories/Workspace/{path...}", ReadExperiment, s.listWorkspaceDirectory)
	s.handle("PUT", "/api/2.0/fs/directories/Workspace/{path...}", EditExperiment, s.mkdirWorkspaceDirectory)
}

func (s *Server) requireMultiUser() error {
	if !s.multiUser() {
		return errs.E(errs.Invalid, "the server runs in single-user mode (authentication off): there are no users, sessions or tokens. "+
			"To turn sign-in on, create the first administrator in its data directory (sextant users add EMAIL --admin --data-dir DIR) "+
			"and restart the server (docs/auth.md)")
	}
	return nil
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req wire.LoginRequest
	if err := s.decodeLimited(w, r, &req, LoginMaxBodyBytes); err != nil {
		return err
	}
	cookie, sess, u, err := s.ws.Login(r.Context(), req.Email, req.Password, s.clientIP(r))
	if err != nil {
		return err
	}
	http.SetCookie(w, cookieFor(r, cookie, time.UnixMilli(sess.ExpiresMs)))
	return writeJSON(w, wire.LoginResponse{User: wire.ToUser(u), CSRFToken: sess.CSRF, ExpiresTime: sess.ExpiresMs})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if err := s.ws.Logout(r.Context(), c.Value); err != nil {
			return err
		}
	}
	http.SetCookie(w, cookieFor(r, "", time.Unix(0, 0)))
	return writeRaw(w, emptyObject)
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	sub := SubjectFromContext(r.Context())
	return writeJSON(w, wire.WhoAmI{User: wire.ToUser(sub.User), MultiUser: s.multiUser()})
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req wire.CreateUserRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	u, err := s.ws.CreateUser(r.Context(), SubjectFromContext(r.Context()), req.Email, req.Password, req.Admin)
	if err != nil {
		return err
	}
	return writeJSON(w, wire.UserResponse{User: wire.ToUser(u)})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) error {
	users, err := s.ws.ListUsers(r.Context(), SubjectFromContext(r.Context()))
	if err != nil {
		return err
	}
	out := wire.UsersResponse{Users: make([]wire.User, 0, len(users))}
	for _, u := range users {
		out.Users = append(out.Users, wire.ToUser(u))
	}
	return writeJSON(w, out)
}

func (s *Server) updateUser(w http.ResponseWriter, r *http.Request) error {
	var req wire.UpdateUserRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	u, err := s.ws.UpdateUser(r.Context(), SubjectFromContext(r.Context()), req.Email, workspace.UserUpdate{Disabled: req.Disabled, Admin: req.Admin, DisplayName: req.DisplayName})
	if err != nil {
		return err
	}
	return writeJSON(w, wire.UserResponse{User: wire.ToUser(u)})
}

func (s *Server) setPassword(w http.ResponseWriter, r *http.Request) error {
	var req wire.SetPasswordRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.ws.SetPassword(r.Context(), SubjectFromContext(r.Context()), req.Email, req.OldPassword, req.NewPassword); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req wire.CreateTokenRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	create := s.ws.CreateToken
	if req.Nodes != nil {
		create = func(ctx context.Context, sub *workspace.Subject, name string, ttl time.Duration) (string, *workspace.Token, error) {
			return s.ws.CreateNodeToken(ctx, sub, name, ttl, req.Nodes)
		}
	}
	secret, t, err := create(r.Context(), SubjectFromContext(r.Context()), req.Name, time.Duration(req.LifetimeSeconds.V)*time.Second)
	if err != nil {
		return err
	}
	wt := wire.ToToken(t)
	wt.Token = secret // shown this once
	return writeJSON(w, wire.TokenResponse{Token: wt})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	tokens, err := s.ws.ListTokens(r.Context(), SubjectFromContext(r.Context()))
	if err != nil {
		return err
	}
	out := wire.TokensResponse{Tokens: make([]wire.Token, 0, len(tokens))}
	for _, t := range tokens {
		out.Tokens = append(out.Tokens, wire.ToToken(t))
	}
	return writeJSON(w, out)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req wire.RevokeTokenRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.ws.RevokeToken(r.Context(), SubjectFromContext(r.Context()), req.ID.V); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) createGroup(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateGroupRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.ws.CreateGroup(r.Context(), SubjectFromContext(r.Context()), req.Name); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	groups, err := s.ws.ListGroups(r.Context(), SubjectFromContext(r.Context()))
	if err != nil {
		return err
	}
	out := wire.GroupsResponse{Groups: []wire.Group{}}
	for _, g := range groups {
		out.Groups = append(out.Groups, wire.Group{Name: g.Name, Members: append([]string{}, g.Members...)})
	}
	return writeJSON(w, out)
}

func (s *Server) setGroupMember(w http.ResponseWriter, r *http.Request) error {
	var req wire.GroupMemberRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	member := req.Member == nil || *req.Member
	if err := s.ws.SetGroupMember(r.Context(), SubjectFromContext(r.Context()), req.Group, req.Email, member); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) getPermissions(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "resource")
	if err != nil {
		return err
	}
	res, err := workspace.ParseResource(q.str("resource"))
	if err != nil {
		return err
	}
	grants, err := s.ws.Permissions(r.Context(), SubjectFromContext(r.Context()), res)
	if err != nil {
		return err
	}
	out := wire.PermissionsResponse{Resource: q.str("resource"), Grants: []wire.Grant{}}
	for _, g := range grants {
		out.Grants = append(out.Grants, wire.Grant{Principal: g.PrincipalName, Level: g.Level.String()})
	}
	return writeJSON(w, out)
}

func (s *Server) setPermission(w http.ResponseWriter, r *http.Request) error {
	var req wire.SetPermissionRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	res, err := workspace.ParseResource(req.Resource)
	if err != nil {
		return err
	}
	lvl, ok := workspace.ParseLevel(req.Level)
	if !ok {
		return invalid("Invalid value '%s' for parameter 'level': expected CAN_READ, CAN_EDIT, CAN_MANAGE or NO_PERMISSIONS", errs.Truncate(req.Level, 40))
	}
	if err := s.ws.SetPermission(r.Context(), SubjectFromContext(r.Context()), res, req.Principal, lvl); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) mkdirs(w http.ResponseWriter, r *http.Request) error {
	var req wire.MkdirsRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	f, err := s.ws.Mkdirs(r.Context(), SubjectFromContext(r.Context()), req.Path)
	if err != nil {
		return err
	}
	return writeJSON(w, wire.Folder{Path: f.Path})
}

func (s *Server) listWorkspace(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "path")
	if err != nil {
		return err
	}
	p := q.str("path")
	if p == "" {
		p = "/"
	}
	folders, err := s.ws.ListFolder(r.Context(), SubjectFromContext(r.Context()), p)
	if err != nil {
		return err
	}
	out := wire.FoldersResponse{Folders: []wire.Folder{}}
	for _, f := range folders {
		out.Folders = append(out.Folders, wire.Folder{Path: f.Path})
	}
	return writeJSON(w, out)
}

// ---- comments ----

// commentTarget checks that a comment's target exists
// (workspace.CommentTargetExperiment, whoever asks) and the subject's
// access to it: level l on the experiment of a run or of an experiment.
// Errors name the request's field: target_kind or target_id.
func (s *Server) commentTarget(r *http.Request, kind, id string, l workspace.Level) (workspace.CommentTarget, error) {
	t := workspace.CommentTarget{Kind: kind, ID: id}
	exp, err := s.ws.CommentTargetExperiment(r.Context(), t)
	if err != nil {
		return t, err
	}
	if err := s.allowExperimentOp(r, exp, workspace.OperationFor(l)); err != nil {
		return t, workspace.AsMissing(err, workspace.CommentTargetNotFound(t))
	}
	checked(r)
	return t, nil
}

// commentByID returns the comment a PATCH or DELETE names in its id
// field, after checking that the subject can read what it is on.
func (s *Server) commentByID(r *http.Request, id wire.Int) (*workspace.Comment, error) {
	if !id.Set {
		return nil, invalid("Missing value for required parameter 'id' (the comment's id)")
	}
	if id.V <= 0 {
		return nil, invalid("Invalid value %d for parameter 'id': comment ids are positive", id.V)
	}
	c, err := s.ws.GetComment(r.Context(), id.V)
	if errs.Is(err, errs.NotFound) {
		return nil, errs.Errorf(errs.NotFound, "No comment with id %d (parameter 'id') exists", id.V)
	} else if err != nil {
		return nil, err
	}
	if _, err := s.commentTarget(r, c.Target.Kind, c.Target.ID, workspace.CanRead); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Server) addComment(w http.ResponseWriter, r *http.Request) error {
	var req wire.AddCommentRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	t, err := s.commentTarget(r, req.TargetKind, req.TargetID, workspace.CanRead)
	if err != nil {
		return err
	}
	c, err := s.ws.AddComment(r.Context(), SubjectFromContext(r.Context()), t, req.Body)
	if err != nil {
		return err
	}
	c.AuthorEmail = SubjectFromContext(r.Context()).User.Email
	return writeJSON(w, wire.CommentResponse{Comment: wire.ToComment(c)})
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "target_kind", "target_id")
	if err != nil {
		return err
	}
	t, err := s.commentTarget(r, q.str("target_kind"), q.str("target_id"), workspace.CanRead)
	if err != nil {
		return err
	}
	cs, err := s.ws.Comments(r.Context(), t)
	if err != nil {
		return err
	}
	out := wire.CommentsResponse{Comments: make([]wire.Comment, 0, len(cs))}
	for _, c := range cs {
		out.Comments = append(out.Comments, wire.ToComment(c))
	}
	return writeJSON(w, out)
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request) error {
	var req wire.EditCommentRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if _, err := s.commentByID(r, req.ID); err != nil {
		return err
	}
	c, err := s.ws.EditComment(r.Context(), SubjectFromContext(r.Context()), req.ID.V, req.Body)
	if err != nil {
		return err
	}
	return writeJSON(w, wire.CommentResponse{Comment: wire.ToComment(c)})
}

func (s *Server) deleteComment(w http.ResponseWriter, r *http.Request) error {
	var req wire.DeleteCommentRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	c, err := s.commentByID(r, req.ID)
	if err != nil {
		return err
	}
	// Managers of what the comment is on may delete it too.
	managerOK := false
	if exp, err := s.commentExperiment(r, c.Target); err == nil {
		managerOK = s.allowExperimentOp(r, exp, workspace.OpManageExperiment) == nil
	}
	if err := s.ws.DeleteComment(r.Context(), SubjectFromContext(r.Context()), req.ID.V, managerOK); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) commentExperiment(r *http.Request, t workspace.CommentTarget) (string, error) {
	if t.Kind == "run" {
		return s.runExperiment(r.Context(), t.ID)
	}
	return t.ID, nil
}

func (s *Server) auditLog(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "after_id", "limit")
	if err != nil {
		return err
	}
	after, _, err := q.int("after_id")
	if err != nil {
		return err
	}
	limit, _, err := q.int("limit")
	if err != nil {
		return err
	}
	events, err := s.ws.AuditLog(r.Context(), SubjectFromContext(r.Context()), after, clampInt(limit))
	if err != nil {
		return err
	}
	out := wire.AuditResponse{Events: []wire.AuditEvent{}}
	for _, e := range events {
		out.Events = append(out.Events, wire.AuditEvent{ID: e.ID, TimeMs: e.TimeMs, Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail})
	}
	return writeJSON(w, out)
}

// ---- workspace files (the Files API under /Workspace) ----

// workspaceFile is the workspace path of a Files API request.
func workspaceFile(r *http.Request) string { return "/" + r.PathValue("path") }

func (s *Server) putWorkspaceFile(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "overwrite")
	if err != nil {
		return err
	}
	overwrite := q.str("overwrite") != "false"
	if err := s.files.Put(r.Context(), SubjectFromContext(r.Context()), workspaceFile(r), r.Body, r.ContentLength, overwrite); err != nil {
		return bodyError(err)
	}
	checked(r) // Put checked CAN_EDIT on the file's folder
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getWorkspaceFile(w http.ResponseWriter, r *http.Request) error {
	ctx, sub := r.Context(), SubjectFromContext(r.Context())
	info, err := s.files.Stat(ctx, sub, workspaceFile(r))
	if err != nil {
		return err
	}
	checked(r) // Stat checked CAN_READ on the file's folder
	offset, length, partial, err := parseRange(r.Header.Get("Range"), info.Size)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	downloadHeaders(h, path.Base(workspaceFile(r)))
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	h.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", "bytes "+strconv.FormatInt(offset, 10)+"-"+strconv.FormatInt(offset+length-1, 10)+"/"+strconv.FormatInt(info.Size, 10))
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return nil
	}
	rc, _, err := s.files.Open(ctx, sub, workspaceFile(r), offset, length)
	if err != nil {
		h.Del("Content-Length")
		return err
	}
	defer rc.Close()
	w.WriteHeader(status)
	if n, err := io.Copy(w, rc); err != nil || n != length {
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (s *Server) deleteWorkspaceFile(w http.ResponseWriter, r *http.Request) error {
	if err := s.files.Delete(r.Context(), SubjectFromContext(r.Context()), workspaceFile(r)); err != nil {
		return err
	}
	checked(r) // Delete checked CAN_EDIT on the file's folder
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listWorkspaceDirectory(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, "page_token", "page_size"); err != nil {
		return err
	}
	entries, p, err := s.files.List(r.Context(), SubjectFromContext(r.Context()), workspaceFile(r))
	if err != nil {
		return err
	}
	checked(r) // List checked CAN_READ on the folder
	out := wire.DirListing{Contents: []wire.DirEntry{}}
	for _, e := range entries {
		item := wire.DirEntry{Path: "/Workspace" + p + "/" + e.Name, IsDirectory: e.IsDir, Name: e.Name}
		if !e.IsDir {
			size := e.Size
			item.FileSize = &size
			item.LastModified = e.ModTime.UnixMilli()
		}
		out.Contents = append(out.Contents, item)
	}
	return writeJSON(w, out)
}

func (s *Server) mkdirWorkspaceDirectory(w http.ResponseWriter, r *http.Request) error {
	p, err := workspace.NormalizePath("/" + r.PathValue("path"))
	if err != nil {
		return err
	}
	if _, err := s.ws.Mkdirs(r.Context(), SubjectFromContext(r.Context()), p); err != nil {
		return err
	}
	checked(r) // Mkdirs checked CAN_EDIT on the nearest existing folder
	w.WriteHeader(http.StatusNoContent)
	return nil
}
