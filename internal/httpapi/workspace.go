package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
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
		return errs.E(errs.Invalid, "the server runs in single-user mode (authentication off): there are no users, sessions or tokens")
	}
	return nil
}

type wireUser struct {
	ID          int64  `json:"id"`
	Email       string `json:"email"`
	DisplayName string `json:"display_name,omitempty"`
	Admin       bool   `json:"admin"`
	Disabled    bool   `json:"disabled"`
	CreatedMs   int64  `json:"created_time"`
}

func toWireUser(u *workspace.User) wireUser {
	return wireUser{u.ID, u.Email, u.DisplayName, u.Admin, u.Disabled, u.CreatedMs}
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	cookie, sess, u, err := s.ws.Login(r.Context(), req.Email, req.Password, remoteIP(r))
	if err != nil {
		return err
	}
	http.SetCookie(w, cookieFor(r, cookie, time.UnixMilli(sess.ExpiresMs)))
	return writeJSON(w, map[string]any{"user": toWireUser(u), "csrf_token": sess.CSRF, "expires_time": sess.ExpiresMs})
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
	return writeJSON(w, map[string]any{"user": toWireUser(sub.User), "multi_user": s.multiUser()})
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Admin    bool   `json:"admin"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	u, err := s.ws.CreateUser(r.Context(), SubjectFromContext(r.Context()), req.Email, req.Password, req.Admin)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"user": toWireUser(u)})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) error {
	users, err := s.ws.ListUsers(r.Context(), SubjectFromContext(r.Context()))
	if err != nil {
		return err
	}
	out := make([]wireUser, 0, len(users))
	for _, u := range users {
		out = append(out, toWireUser(u))
	}
	return writeJSON(w, map[string]any{"users": out})
}

func (s *Server) updateUser(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Email       string  `json:"email"`
		Disabled    *bool   `json:"disabled"`
		Admin       *bool   `json:"admin"`
		DisplayName *string `json:"display_name"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	u, err := s.ws.UpdateUser(r.Context(), SubjectFromContext(r.Context()), req.Email, workspace.UserUpdate{Disabled: req.Disabled, Admin: req.Admin, DisplayName: req.DisplayName})
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"user": toWireUser(u)})
}

func (s *Server) setPassword(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Email       string `json:"email"`
		OldPassword string `json:"old_password"`
		NewPassword string `json:"new_password"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.ws.SetPassword(r.Context(), SubjectFromContext(r.Context()), req.Email, req.OldPassword, req.NewPassword); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

type wireToken struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	CreatedMs  int64  `json:"created_time"`
	ExpiresMs  int64  `json:"expires_time,omitempty"`
	LastUsedMs int64  `json:"last_used_time,omitempty"`
	RevokedMs  int64  `json:"revoked_time,omitempty"`
	Token      string `json:"token,omitempty"`
}

func toWireToken(t *workspace.Token) wireToken {
	return wireToken{ID: t.ID, Name: t.Name, CreatedMs: t.CreatedMs, ExpiresMs: t.ExpiresMs, LastUsedMs: t.LastUsedMs, RevokedMs: t.RevokedMs}
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req struct {
		Name            string  `json:"name"`
		LifetimeSeconds flexInt `json:"lifetime_seconds"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	secret, t, err := s.ws.CreateToken(r.Context(), SubjectFromContext(r.Context()), req.Name, time.Duration(req.LifetimeSeconds.V)*time.Second)
	if err != nil {
		return err
	}
	wt := toWireToken(t)
	wt.Token = secret // shown this once
	return writeJSON(w, map[string]any{"token": wt})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	tokens, err := s.ws.ListTokens(r.Context(), SubjectFromContext(r.Context()))
	if err != nil {
		return err
	}
	out := make([]wireToken, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, toWireToken(t))
	}
	return writeJSON(w, map[string]any{"tokens": out})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireMultiUser(); err != nil {
		return err
	}
	var req struct {
		ID flexInt `json:"id"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.ws.RevokeToken(r.Context(), SubjectFromContext(r.Context()), req.ID.V); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) createGroup(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name string `json:"name"`
	}
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
	type wg struct {
		Name    string   `json:"name"`
		Members []string `json:"members"`
	}
	out := []wg{}
	for _, g := range groups {
		out = append(out, wg{g.Name, append([]string{}, g.Members...)})
	}
	return writeJSON(w, map[string]any{"groups": out})
}

func (s *Server) setGroupMember(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Group  string `json:"group"`
		Email  string `json:"email"`
		Member *bool  `json:"member"`
	}
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
	type wg struct {
		Principal string `json:"principal"`
		Level     string `json:"level"`
	}
	out := []wg{}
	for _, g := range grants {
		out = append(out, wg{g.PrincipalName, g.Level.String()})
	}
	return writeJSON(w, map[string]any{"resource": q.str("resource"), "grants": out})
}

func (s *Server) setPermission(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Resource  string `json:"resource"`
		Principal string `json:"principal"`
		Level     string `json:"level"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	res, err := workspace.ParseResource(req.Resource)
	if err != nil {
		return err
	}
	lvl, ok := workspace.ParseLevel(req.Level)
	if !ok {
		return invalid("Invalid value '%s' for parameter 'level': expected CAN_READ, CAN_EDIT, CAN_MANAGE or NO_PERMISSIONS", truncate(req.Level, 40))
	}
	if err := s.ws.SetPermission(r.Context(), SubjectFromContext(r.Context()), res, req.Principal, lvl); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) mkdirs(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path string `json:"path"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	f, err := s.ws.Mkdirs(r.Context(), SubjectFromContext(r.Context()), req.Path)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"path": f.Path})
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
	type wf struct {
		Path string `json:"path"`
	}
	out := []wf{}
	for _, f := range folders {
		out = append(out, wf{f.Path})
	}
	return writeJSON(w, map[string]any{"folders": out})
}

// ---- comments ----

// commentTarget checks that a comment's target exists, whoever asks (an
// administrator's or the local user's access checks look nothing up), and
// the subject's access to it: level l on the experiment of a run or of an
// experiment. Errors name the request's field: target_kind or target_id.
func (s *Server) commentTarget(r *http.Request, kind, id string, l workspace.Level) (workspace.CommentTarget, error) {
	t := workspace.CommentTarget{Kind: kind, ID: id}
	if kind == "" {
		return t, invalid("Missing value for required parameter 'target_kind' (run or experiment)")
	}
	if kind != "run" && kind != "experiment" {
		return t, invalid("Invalid value %q for parameter 'target_kind': must be run or experiment", truncate(kind, 40))
	}
	if id == "" {
		return t, invalid("Missing value for required parameter 'target_id' (the id of the %s)", kind)
	}
	var exp string
	switch kind {
	case "run":
		if tracking.ValidateRunID(id) != nil {
			return t, invalid("Invalid value %q for parameter 'target_id': not a run id", truncate(id, 80))
		}
		e, err := s.runExperiment(r.Context(), id)
		if errs.Is(err, errs.NotFound) {
			return t, errs.Errorf(errs.NotFound, "No run with id %q (parameter 'target_id') exists", truncate(id, 80))
		} else if err != nil {
			return t, err
		}
		exp = e
	case "experiment":
		if tracking.ValidateExperimentID(id) != nil {
			return t, invalid("Invalid value %q for parameter 'target_id': not an experiment id", truncate(id, 80))
		}
		if _, err := s.tr.GetExperiment(r.Context(), id); errs.Is(err, errs.NotFound) {
			return t, errs.Errorf(errs.NotFound, "No experiment with id %q (parameter 'target_id') exists", truncate(id, 80))
		} else if err != nil {
			return t, err
		}
		exp = id
	}
	if err := s.allowExperimentLevel(r, exp, l); err != nil {
		return t, err
	}
	checked(r)
	return t, nil
}

// commentByID returns the comment a PATCH or DELETE names in its id
// field, after checking that the subject can read what it is on.
func (s *Server) commentByID(r *http.Request, id flexInt) (*workspace.Comment, error) {
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

type wireComment struct {
	ID         int64  `json:"id"`
	TargetKind string `json:"target_kind"`
	TargetID   string `json:"target_id"`
	Author     string `json:"author"`
	Body       string `json:"body"`
	CreatedMs  int64  `json:"created_time"`
	UpdatedMs  int64  `json:"updated_time"`
}

func toWireComment(c *workspace.Comment) wireComment {
	return wireComment{c.ID, c.Target.Kind, c.Target.ID, c.AuthorEmail, c.Body, c.CreatedMs, c.UpdatedMs}
}

func (s *Server) addComment(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		TargetKind string `json:"target_kind"`
		TargetID   string `json:"target_id"`
		Body       string `json:"body"`
	}
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
	return writeJSON(w, map[string]any{"comment": toWireComment(c)})
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
	out := make([]wireComment, 0, len(cs))
	for _, c := range cs {
		out = append(out, toWireComment(c))
	}
	return writeJSON(w, map[string]any{"comments": out})
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID   flexInt `json:"id"`
		Body string  `json:"body"`
	}
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
	return writeJSON(w, map[string]any{"comment": toWireComment(c)})
}

func (s *Server) deleteComment(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID flexInt `json:"id"`
	}
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
		managerOK = s.allowExperimentLevel(r, exp, workspace.CanManage) == nil
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
	type we struct {
		ID     int64  `json:"id"`
		TimeMs int64  `json:"time"`
		Actor  string `json:"actor"`
		Action string `json:"action"`
		Target string `json:"target"`
		Detail string `json:"detail,omitempty"`
	}
	out := []we{}
	for _, e := range events {
		out = append(out, we{e.ID, e.TimeMs, e.Actor, e.Action, e.Target, e.Detail})
	}
	return writeJSON(w, map[string]any{"events": out})
}

// ---- workspace files (the Files API under /Workspace) ----

// workspaceFilePath returns the canonical workspace path of a Files API
// request and its blob key.
func workspaceFilePath(r *http.Request) (string, string, error) {
	p, err := workspace.NormalizePath("/" + r.PathValue("path"))
	if err != nil {
		return "", "", err
	}
	if p == "/" {
		return "", "", invalid("a file path is required")
	}
	key := strings.TrimPrefix(p, "/")
	if err := blob.ValidateKey(key); err != nil {
		return "", "", err
	}
	return p, key, nil
}

// workspaceFolderOf returns the nearest folder above p that exists, for
// the permission check of a file.
func (s *Server) checkWorkspaceFile(r *http.Request, p string, l workspace.Level) error {
	folder := workspace.Parent(p)
	return s.allowFolder(r, folder, l)
}

func (s *Server) putWorkspaceFile(w http.ResponseWriter, r *http.Request) error {
	p, key, err := workspaceFilePath(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "overwrite")
	if err != nil {
		return err
	}
	if err := s.checkWorkspaceFile(r, p, workspace.CanEdit); err != nil {
		return err
	}
	if q.str("overwrite") == "false" {
		if _, err := s.opts.Files.Stat(r.Context(), key); err == nil {
			return errs.Errorf(errs.AlreadyExists, "file %s already exists", p)
		}
	}
	if _, err := s.opts.Files.Put(r.Context(), key, r.Body, r.ContentLength); err != nil {
		return bodyError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getWorkspaceFile(w http.ResponseWriter, r *http.Request) error {
	p, key, err := workspaceFilePath(r)
	if err != nil {
		return err
	}
	if err := s.checkWorkspaceFile(r, p, workspace.CanRead); err != nil {
		return err
	}
	info, err := s.opts.Files.Stat(r.Context(), key)
	if err != nil {
		return err
	}
	offset, length, partial, err := parseRange(r.Header.Get("Range"), info.Size)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
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
	rc, _, err := s.opts.Files.Open(r.Context(), key, offset, length)
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
	p, key, err := workspaceFilePath(r)
	if err != nil {
		return err
	}
	if err := s.checkWorkspaceFile(r, p, workspace.CanEdit); err != nil {
		return err
	}
	if _, err := s.opts.Files.Stat(r.Context(), key); err != nil {
		return err
	}
	if err := s.opts.Files.Delete(r.Context(), key); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listWorkspaceDirectory(w http.ResponseWriter, r *http.Request) error {
	p, err := workspace.NormalizePath("/" + r.PathValue("path"))
	if err != nil {
		return err
	}
	if _, err := parseQuery(r, "page_token", "page_size"); err != nil {
		return err
	}
	if err := s.allowFolder(r, p, workspace.CanRead); err != nil {
		return err
	}
	prefix := strings.TrimPrefix(p, "/") + "/"
	entries, err := s.opts.Files.List(r.Context(), prefix, "", 0)
	if err != nil {
		return err
	}
	type we struct {
		Path         string `json:"path"`
		IsDirectory  bool   `json:"is_directory"`
		FileSize     int64  `json:"file_size,omitempty"`
		LastModified int64  `json:"last_modified,omitempty"`
		Name         string `json:"name"`
	}
	out := []we{}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name, "/")
		item := we{Path: "/Workspace" + p + "/" + name, IsDirectory: e.IsDir, Name: name}
		if !e.IsDir {
			item.FileSize = e.Size
			item.LastModified = e.ModTime.UnixMilli()
		}
		out = append(out, item)
	}
	return writeJSON(w, map[string]any{"contents": out})
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
