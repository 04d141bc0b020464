package workspace

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// chainFor returns the grants on r and on every folder above it, nearest
// first. An experiment's folders are those of its name when the name is a
// workspace path; other names (the Default experiment, names from before
// workspaces) have only their own grants.
func (s *Service) chainFor(ctx context.Context, r Resource) ([][]Grant, error) {
	rs := []Resource{r}
	var p string
	switch r.Kind {
	case ResourceFolder:
		p = r.Key
	case ResourceExperiment:
		name, err := s.experimentPath(ctx, r.Key)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(name, "/") {
			if n, err := NormalizePath(name); err == nil {
				p = n
			}
		}
	}
	if p != "" {
		for _, a := range Ancestors(p) {
			rs = append(rs, Resource{ResourceFolder, a})
		}
	}
	grants, err := s.store.Grants(ctx, rs)
	if err != nil {
		return nil, err
	}
	chain := make([][]Grant, len(rs))
	for i, res := range rs {
		chain[i] = grants[res]
	}
	return chain, nil
}

func (s *Service) experimentPath(ctx context.Context, id string) (string, error) {
	now := s.now()
	s.mu.Lock()
	c, ok := s.expPaths[id]
	s.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.v, nil
	}
	name, err := s.store.ExperimentPath(ctx, id)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.expPaths[id] = cached[string]{name, now.Add(s.opts.CacheTTL)}
	s.mu.Unlock()
	return name, nil
}

// ExperimentLevel returns the subject's level on an experiment, cached for
// CacheTTL. This is on the path of every logging request.
func (s *Service) ExperimentLevel(ctx context.Context, sub *Subject, id string) (Level, error) {
	if sub == nil || sub.User == nil {
		return NoAccess, nil
	}
	if sub.IsActiveAdmin() {
		return CanManage, nil
	}
	key := permKey{sub.User.ID, id}
	now := s.now()
	s.mu.Lock()
	c, ok := s.perms[key]
	s.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.v, nil
	}
	chain, err := s.chainFor(ctx, Resource{ResourceExperiment, id})
	if err != nil {
		return NoAccess, err
	}
	l := Effective(sub, chain)
	s.mu.Lock()
	s.perms[key] = cached[Level]{l, now.Add(s.opts.CacheTTL)}
	s.mu.Unlock()
	return l, nil
}

// ReadableExperimentIDs returns the experiments the subject can read, or
// all=true when that is every experiment (administrators). It computes the
// answer from the subject's grants in one pass, for searches over many
// experiments.
func (s *Service) ReadableExperimentIDs(ctx context.Context, sub *Subject) (ids []string, all bool, err error) {
	if sub.IsActiveAdmin() {
		return nil, true, nil
	}
	if sub == nil || sub.User == nil || sub.User.Disabled {
		return nil, false, nil
	}
	ps := []Principal{{PrincipalUser, sub.User.ID}, {PrincipalGroup, AllUsersGroup}}
	for _, g := range sub.Groups {
		ps = append(ps, Principal{PrincipalGroup, g})
	}
	grants, err := s.store.GrantsTo(ctx, ps)
	if err != nil {
		return nil, false, err
	}
	readableFolders := map[string]bool{}
	readableExps := map[string]bool{}
	for _, g := range grants {
		if g.Level < OpReadExperiment.Level() {
			continue
		}
		if g.Resource.Kind == ResourceFolder {
			readableFolders[g.Resource.Key] = true
		} else {
			readableExps[g.Resource.Key] = true
		}
	}
	names, err := s.store.ExperimentNames(ctx)
	if err != nil {
		return nil, false, err
	}
	for id, name := range names {
		ok := readableExps[id]
		if !ok && strings.HasPrefix(name, "/") {
			if p, err := NormalizePath(name); err == nil {
				for _, a := range Ancestors(p) {
					if readableFolders[a] {
						ok = true
						break
					}
				}
			}
		}
		if ok {
			ids = append(ids, id)
		}
	}
	return ids, false, nil
}

// CheckExperiment returns nil when the subject has need on the
// experiment: the policy's OpReadExperiment, OpEditExperiment or
// OpManageExperiment (see Authorize).
func (s *Service) CheckExperiment(ctx context.Context, sub *Subject, id string, need Level) error {
	return s.Authorize(ctx, sub, OperationFor(need), Resource{ResourceExperiment, id})
}

// CheckFolder returns nil when the subject has need on the folder: the
// policy's OpReadFolder or OpCreateInFolder (see Authorize).
func (s *Service) CheckFolder(ctx context.Context, sub *Subject, path string, need Level) error {
	op := OpCreateInFolder
	if need <= CanRead {
		op = OpReadFolder
	}
	return s.Authorize(ctx, sub, op, Resource{ResourceFolder, path})
}

// ---- folders ----

// Mkdirs creates a folder and any missing parents, as `mkdir -p`. The
// subject needs CAN_EDIT on the nearest existing ancestor; the creator
// gets nothing extra (permissions are inherited from that ancestor). A
// folder the subject may not read counts as missing (see ErrUnreadable),
// so that the answer is the same whether it exists or not.
func (s *Service) Mkdirs(ctx context.Context, sub *Subject, path string) (*Folder, error) {
	p, err := NormalizePath(path)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, errs.E(errs.Invalid, "the root folder cannot be created")
	}
	// Find the nearest existing ancestor the subject sees, and check it.
	var missing []string
	existing := "/"
	for _, q := range append([]string{p}, Ancestors(p)...) {
		if q == "/" {
			break
		}
		f, err := s.store.GetFolder(ctx, q)
		if err != nil && !errs.Is(err, errs.NotFound) {
			return nil, err
		}
		if err == nil {
			err = s.Authorize(ctx, sub, OpReadFolder, Resource{ResourceFolder, q})
			if err == nil && q == p {
				return f, nil
			}
			if err == nil || !errors.Is(err, ErrUnreadable) {
				existing = q
				break
			}
		}
		missing = append(missing, q)
	}
	if existing == "/" {
		if err := s.Authorize(ctx, sub, OpCreateTopFolder, Resource{}); err != nil {
			return nil, err
		}
	} else if err := s.Authorize(ctx, sub, OpCreateInFolder, Resource{ResourceFolder, existing}); err != nil {
		return nil, err
	}
	// A folder and an experiment never share a path (folders_implicit.go);
	// checked once the caller may create here, so that the answer says
	// nothing of experiments it may not see.
	if err := s.checkNoExperimentAt(ctx, append([]string{p}, Ancestors(p)...)); err != nil {
		return nil, err
	}
	owner := int64(0)
	if sub != nil && sub.User != nil {
		owner = sub.User.ID
	}
	var last *Folder
	for i := len(missing) - 1; i >= 0; i-- {
		f := &Folder{Path: missing[i], OwnerID: owner, CreatedMs: s.nowMs()}
		if err := s.store.CreateFolder(ctx, f); err != nil && !errs.Is(err, errs.AlreadyExists) {
			return nil, err
		}
		last = f
	}
	s.audit(ctx, sub, "folder.create", p, "")
	return last, nil
}

// ListFolder returns the subfolders of a folder the subject can read.
func (s *Service) ListFolder(ctx context.Context, sub *Subject, path string) ([]*Folder, error) {
	p, err := NormalizePath(path)
	if err != nil {
		return nil, err
	}
	// Folders exist because something lives under them, too: see
	// folders_implicit.go.
	return s.listFolder(ctx, sub, p)
}

// PrepareExperimentName checks a new experiment name (or a rename's new
// name) in multi-user mode and returns its canonical form: it must be an
// absolute workspace path whose folder exists and on which the subject has
// CAN_EDIT.
func (s *Service) PrepareExperimentName(ctx context.Context, sub *Subject, name string) (string, error) {
	p, err := NormalizePath(name)
	if err != nil {
		return "", err
	}
	parent := Parent(p)
	if parent == "/" || parent == UsersRoot {
		return "", errs.Errorf(errs.Invalid, "experiment %q must be inside a folder such as /Users/<you>/ or /Shared/", p)
	}
	missing := errs.Errorf(errs.NotFound, "folder %s does not exist; create it first (POST /api/2.0/sextant/workspace/mkdirs)", parent)
	if _, err := s.store.GetFolder(ctx, parent); err != nil {
		if errs.Is(err, errs.NotFound) {
			return "", missing
		}
		return "", err
	}
	if err := s.Authorize(ctx, sub, OpCreateInFolder, Resource{ResourceFolder, parent}); err != nil {
		return "", AsMissing(err, missing)
	}
	return p, nil
}

// CanonicalName returns the canonical form of an experiment name: absolute
// names are normalised, others kept (single-user mode allows them).
func CanonicalName(name string) string {
	if strings.HasPrefix(name, "/") {
		if p, err := NormalizePath(name); err == nil {
			return p
		}
	}
	return name
}

// ExperimentCreated gives the creator CAN_MANAGE on a new experiment.
func (s *Service) ExperimentCreated(ctx context.Context, sub *Subject, id string) error {
	if sub == nil || sub.User == nil || sub.User.ID <= 0 {
		return nil
	}
	g := Grant{Resource: Resource{ResourceExperiment, id}, Principal: Principal{PrincipalUser, sub.User.ID}, Level: CanManage}
	if err := s.store.SetGrant(ctx, g); err != nil {
		return err
	}
	s.forgetExperiment(id)
	return nil
}

// ExperimentRenamed records that an experiment was renamed from one name
// to another: it forgets what was cached about the experiment's place and
// writes the change to the audit log ("experiment.move" when the folder
// changed, "experiment.rename" otherwise).
func (s *Service) ExperimentRenamed(ctx context.Context, sub *Subject, id, from, to string) {
	s.forgetExperiment(id)
	action := "experiment.rename"
	if RenameOperation(from, to) == OpMoveExperiment {
		action = "experiment.move"
	}
	s.audit(ctx, sub, action, "experiment:"+id, from+" -> "+to)
}

// RenameOperation returns the policy's operation for renaming an
// experiment from one name to another: OpMoveExperiment when the folder
// changes (the experiment then inherits another folder's grants),
// OpRenameExperiment otherwise.
func RenameOperation(from, to string) Operation {
	if Parent(CanonicalName(from)) != Parent(CanonicalName(to)) {
		return OpMoveExperiment
	}
	return OpRenameExperiment
}

// DefaultExperimentID is the id of the Default experiment, where clients
// that name no experiment log.
const DefaultExperimentID = "0"

// IsDefaultExperiment reports whether id names the Default experiment
// (ids are compared as numbers: "00" is the Default too).
func IsDefaultExperiment(id string) bool {
	n, err := strconv.ParseInt(id, 10, 64)
	return err == nil && n == 0
}

func (s *Service) forgetExperiment(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expPaths, id)
	for k := range s.perms {
		if k.exp == id {
			delete(s.perms, k)
		}
	}
}

// ---- permissions ----

// ParseResource parses "experiment:<id>", "folder:<path>", or
// "catalog:<name>", "schema:<catalog>.<schema>" and
// "volume:<catalog>.<schema>.<volume>" (names are case-insensitive and
// kept lowercase; the Resources checker validates them further).
func ParseResource(s string) (Resource, error) {
	kind, key, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == "experiment" && key != "":
		return Resource{ResourceExperiment, key}, nil
	case ok && kind == "folder":
		p, err := NormalizePath(key)
		if err != nil {
			return Resource{}, err
		}
		return Resource{ResourceFolder, p}, nil
	case ok && (kind == "catalog" || kind == "schema" || kind == "volume"):
		parts := map[string]int{"catalog": 1, "schema": 2, "volume": 3}[kind]
		names := strings.Split(key, ".")
		if len(names) != parts || slices.Contains(names, "") {
			return Resource{}, errs.Errorf(errs.Invalid, "resource %q: a %s is named by %d dot-separated names, such as %s", errs.Truncate(s, 120), kind, parts, []string{"", "catalog:main", "schema:main.team", "volume:main.team.checkpoints"}[parts])
		}
		k := map[string]ResourceKind{"catalog": ResourceCatalog, "schema": ResourceSchema, "volume": ResourceVolume}[kind]
		return Resource{k, strings.ToLower(key)}, nil
	}
	return Resource{}, errs.Errorf(errs.Invalid, "resource %q must be experiment:<id>, folder:<path>, catalog:<name>, schema:<catalog>.<schema> or volume:<catalog>.<schema>.<volume>", errs.Truncate(s, 120))
}

// Permissions lists the grants on a resource (CAN_READ needed).
func (s *Service) Permissions(ctx context.Context, sub *Subject, r Resource) ([]Grant, error) {
	if err := s.checkGrants(ctx, sub, r, OpReadPermissions); err != nil {
		return nil, err
	}
	grants, err := s.store.Grants(ctx, []Resource{r})
	if err != nil {
		return nil, err
	}
	return grants[r], nil
}

// checkGrants checks op on r for the permissions API: r must exist.
func (s *Service) checkGrants(ctx context.Context, sub *Subject, r Resource, op Operation) error {
	if r.Kind == ResourceFolder {
		if _, err := s.store.GetFolder(ctx, r.Key); err != nil {
			return err
		}
	}
	return s.Authorize(ctx, sub, op, r)
}

// SetPermission grants level on r to a user (by email) or a group (by
// "group:<name>"), or removes the grant with NoAccess. The subject needs
// CAN_MANAGE on r. The change is audited.
func (s *Service) SetPermission(ctx context.Context, sub *Subject, r Resource, principal string, level Level) error {
	if err := s.checkGrants(ctx, sub, r, OpSetPermissions); err != nil {
		return err
	}
	p, err := s.resolvePrincipal(ctx, principal)
	if err != nil {
		return err
	}
	if err := s.store.SetGrant(ctx, Grant{Resource: r, Principal: p, Level: level}); err != nil {
		return err
	}
	s.forgetGrantsOf(p)
	s.audit(ctx, sub, "permission.set", r.String(), principal+" "+level.String())
	return nil
}

func (s *Service) resolvePrincipal(ctx context.Context, name string) (Principal, error) {
	if g, ok := strings.CutPrefix(name, "group:"); ok {
		if g == "users" {
			return Principal{PrincipalGroup, AllUsersGroup}, nil
		}
		id, err := s.store.GetGroupByName(ctx, g)
		if err != nil {
			return Principal{}, err
		}
		return Principal{PrincipalGroup, id}, nil
	}
	email, err := NormalizeEmail(name)
	if err != nil {
		return Principal{}, err
	}
	u, _, err := s.store.GetUserByEmail(ctx, email)
	if err != nil {
		return Principal{}, err
	}
	return Principal{PrincipalUser, u.ID}, nil
}

// ---- groups ----

// CreateGroup creates a group (admins only).
func (s *Service) CreateGroup(ctx context.Context, sub *Subject, name string) error {
	if err := s.Authorize(ctx, sub, OpCreateGroup, Resource{}); err != nil {
		return err
	}
	if name == "" || name == "users" || strings.ContainsAny(name, ":/") || utf8.RuneCountInString(name) > 100 {
		return errs.Errorf(errs.Invalid, "invalid group name %q (1 to 100 characters, no ':' or '/', not 'users')", errs.Truncate(name, 120))
	}
	if _, err := s.store.CreateGroup(ctx, name); err != nil {
		return err
	}
	s.audit(ctx, sub, "group.create", name, "")
	return nil
}

// SetGroupMember adds or removes a user from a group (admins only).
func (s *Service) SetGroupMember(ctx context.Context, sub *Subject, group, email string, member bool) error {
	if err := s.Authorize(ctx, sub, OpChangeGroup, Resource{}); err != nil {
		return err
	}
	gid, err := s.store.GetGroupByName(ctx, group)
	if err != nil {
		return err
	}
	email, err = NormalizeEmail(email)
	if err != nil {
		return err
	}
	u, _, err := s.store.GetUserByEmail(ctx, email)
	if err != nil {
		return err
	}
	if member {
		err = s.store.AddGroupMember(ctx, gid, u.ID)
	} else {
		err = s.store.RemoveGroupMember(ctx, gid, u.ID)
	}
	if err != nil {
		return err
	}
	s.forgetAccess(u.ID)
	action := "group.add"
	if !member {
		action = "group.remove"
	}
	s.audit(ctx, sub, action, group, email)
	return nil
}

// ListGroups lists groups and their members: every group for an
// administrator, the subject's own groups for anyone else (the others'
// names and members are not theirs to see).
func (s *Service) ListGroups(ctx context.Context, sub *Subject) ([]Group, error) {
	all, err := s.store.ListGroups(ctx)
	if err != nil || sub.IsActiveAdmin() {
		return all, err
	}
	var mine []Group
	if sub != nil && sub.User != nil && !sub.User.Disabled {
		for _, g := range all {
			if slices.Contains(sub.Groups, g.ID) {
				mine = append(mine, g)
			}
		}
	}
	return mine, nil
}

// ---- comments ----

// MaxCommentLen is the longest comment, in characters.
const MaxCommentLen = 65536

// CommentTargetExperiment checks that a comment's target is a run or an
// experiment that exists, and returns the id of the experiment it is on
// (the experiment itself, or the run's). It looks the target up whoever
// asks: it decides no access. Errors name the request's fields: Invalid
// for a missing or unknown target_kind and a missing or malformed
// target_id, NotFound for a target that does not exist.
func (s *Service) CommentTargetExperiment(ctx context.Context, t CommentTarget) (string, error) {
	kind, id := t.Kind, t.ID
	if kind == "" {
		return "", errs.E(errs.Invalid, "Missing value for required parameter 'target_kind' (run or experiment)")
	}
	if kind != "run" && kind != "experiment" {
		return "", errs.Errorf(errs.Invalid, "Invalid value %q for parameter 'target_kind': must be run or experiment", errs.Truncate(kind, 40))
	}
	if id == "" {
		return "", errs.Errorf(errs.Invalid, "Missing value for required parameter 'target_id' (the id of the %s)", kind)
	}
	if kind == "run" {
		if tracking.ValidateRunID(id) != nil {
			return "", errs.Errorf(errs.Invalid, "Invalid value %q for parameter 'target_id': not a run id", errs.Truncate(id, 80))
		}
		exp, err := s.store.RunExperiment(ctx, id)
		if errs.Is(err, errs.NotFound) {
			return "", CommentTargetNotFound(t)
		}
		return exp, err
	}
	if tracking.ValidateExperimentID(id) != nil {
		return "", errs.Errorf(errs.Invalid, "Invalid value %q for parameter 'target_id': not an experiment id", errs.Truncate(id, 80))
	}
	if _, err := s.store.ExperimentPath(ctx, id); errs.Is(err, errs.NotFound) {
		return "", CommentTargetNotFound(t)
	} else if err != nil {
		return "", err
	}
	return id, nil
}

// CommentTargetNotFound is the error for a comment target (a run or an
// experiment) that does not exist, and for one the subject may not read
// (see AsMissing).
func CommentTargetNotFound(t CommentTarget) error {
	return errs.Errorf(errs.NotFound, "No %s with id %q (parameter 'target_id') exists", t.Kind, errs.Truncate(t.ID, 80))
}

// AddComment adds a comment on a run or experiment that exists, for every
// subject (an administrator and the local user included); see
// CommentTargetExperiment. The caller has checked that the subject can
// read the target.
func (s *Service) AddComment(ctx context.Context, sub *Subject, target CommentTarget, body string) (*Comment, error) {
	if _, err := s.CommentTargetExperiment(ctx, target); err != nil {
		return nil, err
	}
	if strings.TrimSpace(body) == "" || utf8.RuneCountInString(body) > MaxCommentLen {
		return nil, errs.Errorf(errs.Invalid, "Invalid value for parameter 'body': a comment must be 1 to %d characters", MaxCommentLen)
	}
	c := &Comment{Target: target, AuthorID: sub.User.ID, AuthorEmail: sub.User.Email, Body: body, CreatedMs: s.nowMs(), UpdatedMs: s.nowMs()}
	if err := s.store.AddComment(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Comments lists the comments on a target.
func (s *Service) Comments(ctx context.Context, target CommentTarget) ([]*Comment, error) {
	cs, err := s.store.ListComments(ctx, target)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		nameLocalAuthor(c)
	}
	return cs, nil
}

// GetComment returns a comment.
func (s *Service) GetComment(ctx context.Context, id int64) (*Comment, error) {
	c, err := s.store.GetComment(ctx, id)
	if err != nil {
		return nil, err
	}
	return nameLocalAuthor(c), nil
}

// nameLocalAuthor gives a comment of single-user mode's local user, who has
// no row in the users table, the email AddComment answered with.
func nameLocalAuthor(c *Comment) *Comment {
	if c.AuthorID == LocalAdmin().User.ID && c.AuthorEmail == "" {
		c.AuthorEmail = LocalAdmin().User.Email
	}
	return c
}

// EditComment changes a comment's text; only its author may.
func (s *Service) EditComment(ctx context.Context, sub *Subject, id int64, body string) (*Comment, error) {
	c, err := s.store.GetComment(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.AuthorID != sub.User.ID {
		return nil, errs.E(errs.PermissionDenied, "only a comment's author can edit it")
	}
	if strings.TrimSpace(body) == "" || utf8.RuneCountInString(body) > MaxCommentLen {
		return nil, errs.Errorf(errs.Invalid, "Invalid value for parameter 'body': a comment must be 1 to %d characters", MaxCommentLen)
	}
	if err := s.store.UpdateComment(ctx, id, body, s.nowMs()); err != nil {
		return nil, err
	}
	return s.GetComment(ctx, id)
}

// DeleteComment removes a comment: its author may, and so may whoever
// manages the target (managerOK).
func (s *Service) DeleteComment(ctx context.Context, sub *Subject, id int64, managerOK bool) error {
	c, err := s.store.GetComment(ctx, id)
	if err != nil {
		return err
	}
	if c.AuthorID != sub.User.ID && !managerOK {
		return errs.E(errs.PermissionDenied, "only a comment's author (or a manager of what it is on) can delete it")
	}
	if err := s.store.DeleteComment(ctx, id); err != nil {
		return err
	}
	s.audit(ctx, sub, "comment.delete", c.Target.Kind+" "+c.Target.ID, "comment "+strconv.FormatInt(id, 10))
	return nil
}
