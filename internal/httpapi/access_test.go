package httpapi

import (
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/workspace"
)

// TestAccessLevelsComeFromThePolicy: a resource-scoped access level names
// a policy operation, whose level the route's String agrees with; the
// others name none.
func TestAccessLevelsComeFromThePolicy(t *testing.T) {
	for a := Public; a <= ManageVolume; a++ {
		op := a.operation()
		switch a {
		case ReadExperiment, EditExperiment, ManageExperiment, ReadVolume, WriteVolume, ManageVolume:
			if op == 0 || op.AdminOnly() {
				t.Errorf("%s names operation %v", a, op)
				continue
			}
			if !strings.HasPrefix(a.String(), op.Level().String()) {
				t.Errorf("%s: the policy's %s needs %s", a, op, op.Level())
			}
		default:
			if op != 0 {
				t.Errorf("%s names operation %s", a, op)
			}
		}
	}
	if (ReadExperiment).operation() != workspace.OpReadExperiment || (ManageVolume).operation() != workspace.OpManageSecurable {
		t.Error("experiment and volume levels name the wrong operations")
	}
}
