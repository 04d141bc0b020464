package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// The permission policy: every "may this subject do this to that" in
// Sextant is answered here. The HTTP routes declare an Operation and the
// services (workspace, volumes) ask for one; the level an operation needs
// is written once, in operations, and the rules that cut across routes
// (administrators, disabled users, the Default experiment, moves,
// references, admin-only objects) are written once, in Permit.

// Operation is something a subject asks to do to a resource.
type Operation int

// The operations. Each has a row in operations.
const (
	opUndeclared Operation = iota

	// OpReadExperiment reads an experiment and what is in it: runs,
	// metrics, logged models, artifacts, logs, events, comments.
	OpReadExperiment
	// OpEditExperiment writes into an experiment: runs, metrics, params,
	// tags, logged models, artifacts, logs, events.
	OpEditExperiment
	// OpManageExperiment deletes and restores what is in an experiment.
	OpManageExperiment
	// OpRenameExperiment renames an experiment within its folder.
	OpRenameExperiment
	// OpMoveExperiment moves an experiment to another folder, which
	// changes who governs it (it inherits the new folder's grants); the
	// destination needs OpCreateInFolder too.
	OpMoveExperiment
	// OpDeleteExperiment deletes or restores an experiment.
	OpDeleteExperiment

	// OpReadFolder lists a folder and reads the files in it.
	OpReadFolder
	// OpCreateInFolder creates folders, experiments and files in a
	// folder, and changes its files.
	OpCreateInFolder
	// OpCreateTopFolder creates a folder directly under the root.
	OpCreateTopFolder

	// OpReadPermissions lists the grants on a resource.
	OpReadPermissions
	// OpSetPermissions changes the grants on a resource.
	OpSetPermissions

	// OpReadSecurable reads a catalog, schema or volume and the files in
	// a volume.
	OpReadSecurable
	// OpEditSecurable creates schemas in a catalog, volumes in a schema
	// and files in a volume.
	OpEditSecurable
	// OpManageSecurable changes and deletes a catalog, schema or volume.
	OpManageSecurable
	// OpCreateCatalog creates a catalog.
	OpCreateCatalog

	// OpReadReference and OpWriteReference are for an object a request
	// names besides the one it acts on (a run's parent, the logged model
	// a metric is also recorded on): pointing at it needs CAN_READ,
	// writing into it CAN_EDIT.
	OpReadReference
	OpWriteReference

	// OpReachArtifactStore reaches places in the artifact store outside
	// any experiment.
	OpReachArtifactStore
	// OpCreateUser, OpListUsers, OpChangeUser and OpSetOthersPassword
	// administer accounts.
	OpCreateUser
	OpListUsers
	OpChangeUser
	OpSetOthersPassword
	// OpCreateGroup and OpChangeGroup administer groups.
	OpCreateGroup
	OpChangeGroup
	// OpReadAudit reads the audit log.
	OpReadAudit
	// OpCreateNodeToken creates a node token (nodes.go).
	OpCreateNodeToken
	// OpReportNode reports a node's GPU samples: a node token for the
	// node (see Service.AuthorizeNodeReport for the users' runs).
	OpReportNode

	opCount // keep last
)

// rule is one row of the policy's table.
type rule struct {
	name string
	// level is what the subject needs on the resource; NoAccess for the
	// administrators' operations.
	level Level
	// admin marks an operation only active administrators may do; what
	// completes the refusal "only administrators may ...".
	admin bool
	what  string
	// reveal marks an operation whose refusal says PermissionDenied even
	// where the subject may not see the resource: a reference, which
	// names the object of another's request (see OpReadReference).
	reveal bool
	// defaultIsAdmins marks a change to the Default experiment's name,
	// lifecycle or permissions: every user logs there, and a user who
	// could move it into their folder or revoke the others would take it
	// from everyone, so only administrators may. what names the change.
	defaultIsAdmins bool
}

// operations is the policy's table: what each operation needs.
var operations = [opCount]rule{
	OpReadExperiment:   {name: "read experiment", level: CanRead},
	OpEditExperiment:   {name: "edit experiment", level: CanEdit},
	OpManageExperiment: {name: "manage experiment", level: CanManage},
	OpRenameExperiment: {name: "rename experiment", level: CanEdit, defaultIsAdmins: true, what: "rename"},
	OpMoveExperiment:   {name: "move experiment", level: CanManage, defaultIsAdmins: true, what: "rename"},
	OpDeleteExperiment: {name: "delete experiment", level: CanManage, defaultIsAdmins: true, what: "delete"},

	OpReadFolder:      {name: "read folder", level: CanRead},
	OpCreateInFolder:  {name: "create in folder", level: CanEdit},
	OpCreateTopFolder: {name: "create top-level folder", admin: true, what: "create top-level folders; use /Users/<you>/... or /Shared/..."},

	OpReadPermissions: {name: "read permissions", level: CanRead},
	OpSetPermissions:  {name: "set permissions", level: CanManage, defaultIsAdmins: true, what: "change the permissions of"},

	OpReadSecurable:   {name: "read catalog, schema or volume", level: CanRead},
	OpEditSecurable:   {name: "edit catalog, schema or volume", level: CanEdit},
	OpManageSecurable: {name: "manage catalog, schema or volume", level: CanManage},
	OpCreateCatalog:   {name: "create catalog", admin: true, what: "create catalogs; ask one to create it, or to grant you CAN_EDIT on an existing catalog to create schemas in it"},

	OpReadReference:  {name: "reference for reading", level: CanRead, reveal: true},
	OpWriteReference: {name: "reference for writing", level: CanEdit, reveal: true},

	OpReachArtifactStore: {name: "reach the artifact store outside experiments", admin: true, what: "reach artifacts outside an experiment"},
	OpCreateUser:         {name: "create user", admin: true, what: "create users"},
	OpListUsers:          {name: "list users", admin: true, what: "list users"},
	OpChangeUser:         {name: "change user", admin: true, what: "change users"},
	OpSetOthersPassword:  {name: "set another user's password", admin: true, what: "change other users' passwords"},
	OpCreateGroup:        {name: "create group", admin: true, what: "create groups"},
	OpChangeGroup:        {name: "change group", admin: true, what: "change groups"},
	OpReadAudit:          {name: "read audit log", admin: true, what: "read the audit log"},
	OpCreateNodeToken:    {name: "create node token", admin: true, what: "create node tokens"},
	// A node token names its nodes: AuthorizeNodeReport decides with them.
	OpReportNode: {name: "report a node's GPU samples", level: CanManage, reveal: true},
}

// String names the operation.
func (op Operation) String() string {
	if op <= opUndeclared || op >= opCount {
		return fmt.Sprintf("operation(%d)", int(op))
	}
	return operations[op].name
}

// Level returns the level op needs on its resource: NoAccess for the
// operations only administrators may do (AdminOnly).
func (op Operation) Level() Level {
	if op <= opUndeclared || op >= opCount {
		return CanManage + 1 // an unknown operation is allowed to nobody
	}
	return operations[op].level
}

// AdminOnly reports whether only active administrators may do op.
func (op Operation) AdminOnly() bool {
	return op > opUndeclared && op < opCount && operations[op].admin
}

// Operations lists every operation, for tests and documentation.
func Operations() []Operation {
	out := make([]Operation, 0, opCount-1)
	for op := opUndeclared + 1; op < opCount; op++ {
		out = append(out, op)
	}
	return out
}

// OperationFor returns the operation on an experiment that needs l:
// OpReadExperiment, OpEditExperiment or OpManageExperiment.
func OperationFor(l Level) Operation {
	switch {
	case l <= CanRead:
		return OpReadExperiment
	case l == CanEdit:
		return OpEditExperiment
	}
	return OpManageExperiment
}

// IsActiveAdmin reports whether the subject is an administrator whose
// account is enabled (and who did not come with a node token): the one
// spelling of "is admin" in Sextant.
func (s *Subject) IsActiveAdmin() bool {
	return s != nil && s.User != nil && s.User.Admin && !s.User.Disabled && s.Nodes == nil
}

// ErrUnreadable is the cause of the errs.NotFound the policy answers for a
// resource the subject may not even read: such a resource is answered
// exactly as a missing one (same code, same message), so that names,
// emails and ids cannot be confirmed by asking. Callers that named the
// resource otherwise (a run, by its id, for its experiment) replace the
// message with AsMissing.
var ErrUnreadable = errors.New("the subject may not read the resource: answered as missing")

// Permit is the policy's decision: nil when the subject, holding got on
// r, may do op to r; otherwise an error saying why not. Active
// administrators may do everything; disabled users nothing; the
// administrators' operations are refused to everyone else; a change to
// the Default experiment's name, lifecycle or permissions is the
// administrators'; otherwise got must reach op's level. A refusal is
// errs.PermissionDenied where the subject may read r, and r's
// errs.NotFound (wrapping ErrUnreadable) where they may not (see
// PermitVisible).
func Permit(ctx context.Context, sub *Subject, op Operation, r Resource, got Level) error {
	return PermitVisible(ctx, sub, op, r, got, got >= CanRead)
}

// PermitVisible is Permit for resources that a subject may see without
// CAN_READ on them: a catalog or schema that holds something they can
// read. visible says whether they see r.
func PermitVisible(ctx context.Context, sub *Subject, op Operation, r Resource, got Level, visible bool) error {
	if op <= opUndeclared || op >= opCount {
		return errs.Errorf(errs.Internal, "permission policy: unknown operation %d", int(op))
	}
	ru := operations[op]
	if sub.IsActiveAdmin() {
		return nil
	}
	if err := CheckScope(sub, op == OpReportNode); err != nil {
		return err
	}
	if ru.admin {
		return errs.Errorf(errs.PermissionDenied, "only administrators may %s", ru.what)
	}
	disabled := sub == nil || sub.User == nil || sub.User.Disabled
	if disabled {
		got, visible = NoAccess, false
	}
	if ru.defaultIsAdmins && r.Kind == ResourceExperiment && IsDefaultExperiment(r.Key) {
		return errs.Errorf(errs.PermissionDenied, "only administrators may %s the Default experiment (id 0), which every user logs to", ru.what)
	}
	if got >= ru.level {
		return nil
	}
	if !visible && !ru.reveal && !disabled && !Known(r) {
		return &errs.Error{Code: errs.NotFound, Msg: errs.MessageOf(NotFoundError(r)), Err: ErrUnreadable}
	}
	who := "anonymous"
	if sub != nil && sub.User != nil {
		who = sub.User.Email
	}
	return errs.Errorf(errs.PermissionDenied, "%s is required on %s; %s does not have it", ru.level, r, who)
}

// Known reports whether every user knows that r exists, so that a refusal
// on it hides nothing: the root, /Users and /Shared, and the Default
// experiment.
func Known(r Resource) bool {
	switch r.Kind {
	case ResourceFolder:
		return r.Key == "/" || r.Key == UsersRoot || r.Key == SharedRoot
	case ResourceExperiment:
		return IsDefaultExperiment(r.Key)
	}
	return false
}

// NotFoundError is the error for a resource that does not exist, worded
// as every store words it.
func NotFoundError(r Resource) error {
	switch r.Kind {
	case ResourceExperiment:
		return tracking.ExperimentNotFound(r.Key)
	case ResourceFolder:
		return FolderNotFound(r.Key)
	case ResourceCatalog:
		return errs.Errorf(errs.NotFound, "catalog %s does not exist", r.Key)
	case ResourceSchema:
		return errs.Errorf(errs.NotFound, "schema %s does not exist", r.Key)
	case ResourceVolume:
		return errs.Errorf(errs.NotFound, "volume %s does not exist", r.Key)
	}
	return errs.Errorf(errs.NotFound, "%s does not exist", r)
}

// FolderNotFound is the error for a folder path that names none.
func FolderNotFound(path string) error {
	return errs.Errorf(errs.NotFound, "folder %s does not exist", path)
}

// AsMissing returns missing, the error for the object a request named not
// existing, where err is the policy's refusal of an object the subject may
// not read (ErrUnreadable), and err otherwise: a run of an unreadable
// experiment answers as a run that does not exist.
func AsMissing(err, missing error) error {
	if errors.Is(err, ErrUnreadable) {
		return &errs.Error{Code: errs.CodeOf(missing), Msg: errs.MessageOf(missing), Err: err}
	}
	return err
}

// Authorize is the one entry to the permission policy for a resource the
// workspace can resolve: it finds the subject's level on r (an
// experiment, a folder, or through Options.Resources a catalog, schema or
// volume) and asks Permit. Operations only administrators may do need no
// resource (the zero Resource).
func (s *Service) Authorize(ctx context.Context, sub *Subject, op Operation, r Resource) error {
	if op.AdminOnly() {
		return Permit(ctx, sub, op, r, NoAccess)
	}
	if r == (Resource{}) {
		return errs.Errorf(errs.Internal, "permission policy: %s names no resource", op)
	}
	if ru := operations[op]; ru.defaultIsAdmins && r.Kind == ResourceExperiment && IsDefaultExperiment(r.Key) {
		return Permit(ctx, sub, op, r, NoAccess)
	}
	got, err := s.Level(ctx, sub, r)
	if err != nil {
		return err
	}
	return Permit(ctx, sub, op, r, got)
}

// Level returns the subject's level on a resource: an experiment (cached
// for CacheTTL), a folder, or a catalog, schema or volume (through
// Options.Resources).
func (s *Service) Level(ctx context.Context, sub *Subject, r Resource) (Level, error) {
	switch r.Kind {
	case ResourceExperiment:
		return s.ExperimentLevel(ctx, sub, r.Key)
	case ResourceFolder:
		chain, err := s.chainFor(ctx, r)
		if err != nil {
			return NoAccess, err
		}
		return Effective(sub, chain), nil
	case ResourceCatalog, ResourceSchema, ResourceVolume:
		if s.opts.Resources == nil {
			return NoAccess, errs.Errorf(errs.Invalid, "%s: this server keeps no catalogs, schemas or volumes", r)
		}
		return s.opts.Resources.ResourceLevel(ctx, sub, r)
	}
	return NoAccess, errs.Errorf(errs.Internal, "permission policy: resource kind %d", int(r.Kind))
}
