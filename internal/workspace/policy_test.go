package workspace_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

func subject(admin, disabled bool) *workspace.Subject {
	return &workspace.Subject{User: &workspace.User{ID: 7, Email: "u@example.com", Admin: admin, Disabled: disabled}}
}

// TestEveryOperationHasALevel: each operation of the policy's table needs
// a real level or is the administrators', and has a name.
func TestEveryOperationHasALevel(t *testing.T) {
	ops := workspace.Operations()
	if len(ops) < 20 {
		t.Fatalf("only %d operations", len(ops))
	}
	for _, op := range ops {
		name := op.String()
		if name == "" || strings.HasPrefix(name, "operation(") {
			t.Errorf("operation %d has no name", int(op))
		}
		l := op.Level()
		switch {
		case op.AdminOnly() && l != workspace.NoAccess:
			t.Errorf("%s: admin-only with level %s", name, l)
		case !op.AdminOnly() && (l < workspace.CanRead || l > workspace.CanManage):
			t.Errorf("%s: level %s, want CAN_READ, CAN_EDIT or CAN_MANAGE", name, l)
		}
	}
	if l := workspace.Operation(0).Level(); l <= workspace.CanManage {
		t.Errorf("the undeclared operation needs %s: nobody may be allowed it", l)
	}
}

// TestPermit is the policy's table of decisions.
func TestPermit(t *testing.T) {
	exp := workspace.Resource{Kind: workspace.ResourceExperiment, Key: "5"}
	def := workspace.Resource{Kind: workspace.ResourceExperiment, Key: "0"}
	folder := workspace.Resource{Kind: workspace.ResourceFolder, Key: "/Shared/x"}
	user, admin := subject(false, false), subject(true, false)
	for name, c := range map[string]struct {
		sub  *workspace.Subject
		op   workspace.Operation
		res  workspace.Resource
		got  workspace.Level
		want errs.Code // "": allowed
	}{
		"OKReader":                   {user, workspace.OpReadExperiment, exp, workspace.CanRead, ""},
		"ErrReaderEdits":             {user, workspace.OpEditExperiment, exp, workspace.CanRead, errs.PermissionDenied},
		"OKEditorRenames":            {user, workspace.OpRenameExperiment, exp, workspace.CanEdit, ""},
		"ErrEditorMoves":             {user, workspace.OpMoveExperiment, exp, workspace.CanEdit, errs.PermissionDenied},
		"OKManagerMoves":             {user, workspace.OpMoveExperiment, exp, workspace.CanManage, ""},
		"ErrManagerMovesDefault":     {user, workspace.OpMoveExperiment, def, workspace.CanManage, errs.PermissionDenied},
		"ErrManagerDeletesDefault":   {user, workspace.OpDeleteExperiment, def, workspace.CanManage, errs.PermissionDenied},
		"ErrManagerRevokesDefault":   {user, workspace.OpSetPermissions, def, workspace.CanManage, errs.PermissionDenied},
		"OKEditorLogsToDefault":      {user, workspace.OpEditExperiment, def, workspace.CanEdit, ""},
		"OKAdminMovesDefault":        {admin, workspace.OpMoveExperiment, def, workspace.NoAccess, ""},
		"OKReadReference":            {user, workspace.OpReadReference, exp, workspace.CanRead, ""},
		"ErrWriteReferenceReadOnly":  {user, workspace.OpWriteReference, exp, workspace.CanRead, errs.PermissionDenied},
		"OKWriteReference":           {user, workspace.OpWriteReference, exp, workspace.CanEdit, ""},
		"ErrUserCreatesCatalog":      {user, workspace.OpCreateCatalog, workspace.Resource{}, workspace.CanManage, errs.PermissionDenied},
		"ErrUserCreatesTopFolder":    {user, workspace.OpCreateTopFolder, workspace.Resource{}, workspace.CanManage, errs.PermissionDenied},
		"ErrUserReadsAudit":          {user, workspace.OpReadAudit, workspace.Resource{}, workspace.CanManage, errs.PermissionDenied},
		"OKAdminReadsAudit":          {admin, workspace.OpReadAudit, workspace.Resource{}, workspace.NoAccess, ""},
		"ErrDisabledAdminReadsAudit": {subject(true, true), workspace.OpReadAudit, workspace.Resource{}, workspace.NoAccess, errs.PermissionDenied},
		"ErrDisabledAdminReads":      {subject(true, true), workspace.OpReadExperiment, exp, workspace.NoAccess, errs.PermissionDenied},
		"ErrDisabledUserWithGrant":   {subject(false, true), workspace.OpReadFolder, folder, workspace.CanManage, errs.PermissionDenied},
		"ErrAnonymous":               {nil, workspace.OpReadFolder, folder, workspace.CanManage, errs.PermissionDenied},
		"OKCreateInFolder":           {user, workspace.OpCreateInFolder, folder, workspace.CanEdit, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := workspace.Permit(t.Context(), c.sub, c.op, c.res, c.got)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && errs.CodeOf(err) != c.want:
				t.Fatalf("got %v (%v), want %v", errs.CodeOf(err), err, c.want)
			}
		})
	}
}

// TestIsActiveAdmin: a disabled administrator is not one.
func TestIsActiveAdmin(t *testing.T) {
	var none *workspace.Subject
	for name, c := range map[string]struct {
		sub  *workspace.Subject
		want bool
	}{
		"Admin":         {subject(true, false), true},
		"DisabledAdmin": {subject(true, true), false},
		"User":          {subject(false, false), false},
		"NoUser":        {&workspace.Subject{}, false},
		"Nil":           {none, false},
		"LocalAdmin":    {workspace.LocalAdmin(), true},
	} {
		if got := c.sub.IsActiveAdmin(); got != c.want {
			t.Errorf("%s: IsActiveAdmin() = %v, want %v", name, got, c.want)
		}
	}
	if l := workspace.Effective(subject(true, true), nil); l != workspace.NoAccess {
		t.Errorf("a disabled administrator's level: %s", l)
	}
}

// TestRenameOperation: leaving the folder is a move, which needs
// CAN_MANAGE; staying in it a rename, which needs CAN_EDIT.
func TestRenameOperation(t *testing.T) {
	for name, c := range map[string]struct {
		from, to string
		want     workspace.Operation
	}{
		"Rename":          {"/Users/a@x.com/p/exp", "/Users/a@x.com/p/exp2", workspace.OpRenameExperiment},
		"RenameWorkspace": {"/Users/a@x.com/p/exp", "/Workspace/Users/a@x.com/p/exp2", workspace.OpRenameExperiment},
		"Move":            {"/Users/a@x.com/p/exp", "/Shared/exp", workspace.OpMoveExperiment},
		"MoveIntoSub":     {"/Users/a@x.com/p/exp", "/Users/a@x.com/p/q/exp", workspace.OpMoveExperiment},
	} {
		if got := workspace.RenameOperation(c.from, c.to); got != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
	if workspace.OpMoveExperiment.Level() != workspace.CanManage || workspace.OpRenameExperiment.Level() != workspace.CanEdit {
		t.Errorf("move needs %s, rename %s", workspace.OpMoveExperiment.Level(), workspace.OpRenameExperiment.Level())
	}
}

// TestPermitHidesWhatCannotBeRead: a refusal on an object the subject may
// not read is the error of a missing one; one they may read, a reference,
// or a place everyone knows is refused with PermissionDenied.
func TestPermitHidesWhatCannotBeRead(t *testing.T) {
	user := subject(false, false)
	exp := workspace.Resource{Kind: workspace.ResourceExperiment, Key: "5"}
	vol := workspace.Resource{Kind: workspace.ResourceVolume, Key: "main.team.ckpt"}
	for name, c := range map[string]struct {
		op   workspace.Operation
		res  workspace.Resource
		got  workspace.Level
		want errs.Code
		msg  string
	}{
		"HiddenExperiment":    {workspace.OpEditExperiment, exp, workspace.NoAccess, errs.NotFound, "No Experiment with id=5 exists"},
		"HiddenFolder":        {workspace.OpReadFolder, workspace.Resource{Kind: workspace.ResourceFolder, Key: "/Users/a@x.com"}, workspace.NoAccess, errs.NotFound, "folder /Users/a@x.com does not exist"},
		"HiddenVolume":        {workspace.OpManageSecurable, vol, workspace.NoAccess, errs.NotFound, "volume main.team.ckpt does not exist"},
		"ReadableNotEdit":     {workspace.OpEditExperiment, exp, workspace.CanRead, errs.PermissionDenied, "CAN_EDIT is required on experiment 5"},
		"Reference":           {workspace.OpReadReference, exp, workspace.NoAccess, errs.PermissionDenied, "CAN_READ is required"},
		"KnownUsersRoot":      {workspace.OpCreateInFolder, workspace.Resource{Kind: workspace.ResourceFolder, Key: "/Users"}, workspace.NoAccess, errs.PermissionDenied, "CAN_EDIT is required on folder /Users"},
		"KnownDefault":        {workspace.OpReadExperiment, workspace.Resource{Kind: workspace.ResourceExperiment, Key: "0"}, workspace.NoAccess, errs.PermissionDenied, "CAN_READ is required"},
		"MissingIsMissingToo": {workspace.OpReadExperiment, workspace.Resource{Kind: workspace.ResourceExperiment, Key: "99"}, workspace.NoAccess, errs.NotFound, "No Experiment with id=99 exists"},
	} {
		t.Run(name, func(t *testing.T) {
			err := workspace.Permit(t.Context(), user, c.op, c.res, c.got)
			if errs.CodeOf(err) != c.want || errs.MessageOf(err) != c.msg && !strings.HasPrefix(errs.MessageOf(err), c.msg) {
				t.Fatalf("got %v (%v), want %v %q", errs.CodeOf(err), err, c.want, c.msg)
			}
			if hidden := errors.Is(err, workspace.ErrUnreadable); hidden != (c.want == errs.NotFound) {
				t.Fatalf("ErrUnreadable: %v", hidden)
			}
		})
	}
	missing := tracking.RunNotFound("abc")
	if err := workspace.AsMissing(workspace.Permit(t.Context(), user, workspace.OpReadExperiment, exp, workspace.NoAccess), missing); errs.MessageOf(err) != errs.MessageOf(missing) || errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("AsMissing: %v", err)
	}
	if err := workspace.AsMissing(workspace.Permit(t.Context(), user, workspace.OpEditExperiment, exp, workspace.CanRead), missing); errs.CodeOf(err) != errs.PermissionDenied {
		t.Fatalf("AsMissing of a 403: %v", err)
	}
}

// TestNodeTokenSubjects: a node token's subject is no administrator and
// reaches nothing but reporting GPU samples.
func TestNodeTokenSubjects(t *testing.T) {
	node := &workspace.Subject{User: &workspace.User{ID: 1, Email: "admin@x.com", Admin: true}, Nodes: []string{"gpu-01"}}
	if node.IsActiveAdmin() {
		t.Fatal("a node token is an administrator")
	}
	if err := workspace.Permit(t.Context(), node, workspace.OpReadExperiment, workspace.Resource{Kind: workspace.ResourceExperiment, Key: "5"}, workspace.CanManage); errs.CodeOf(err) != errs.PermissionDenied {
		t.Fatalf("a node token reads an experiment: %v", err)
	}
	if err := workspace.CheckScope(node, false); errs.CodeOf(err) != errs.PermissionDenied || !strings.Contains(err.Error(), "gpu-01") {
		t.Fatalf("scope: %v", err)
	}
	if err := workspace.CheckScope(node, true); err != nil {
		t.Fatalf("scope of the samples route: %v", err)
	}
	if l := workspace.Effective(node, [][]workspace.Grant{{{Principal: workspace.Principal{Kind: workspace.PrincipalUser, ID: 1}, Level: workspace.CanManage}}}); l != workspace.NoAccess {
		t.Fatalf("a node token's level: %s", l)
	}
	nodes, err := workspace.ParseNodes([]string{"gpu-01, gpu-02", "gpu-01"})
	if err != nil || strings.Join(nodes, "|") != "gpu-01|gpu-02" {
		t.Fatalf("ParseNodes: %v %v", nodes, err)
	}
	if _, err := workspace.ParseNodes([]string{"bad\x01node"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("a control character: %v", err)
	}
}
