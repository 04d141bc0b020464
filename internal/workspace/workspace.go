// Package workspace holds Sextant's team model: users and their
// credentials (passwords, personal access tokens, browser sessions),
// groups, the folder tree (/Users/<email>, /Shared) in which experiments
// are named by path, the permissions on folders and experiments, comments
// and the audit log. The permission policy (policy.go: Authorize and
// Permit) is the one place that answers "may this user do this to that".
package workspace

import (
	"strings"
)

// Level is a permission level. The numbers are persisted and ordered: a
// higher level includes the lower ones.
type Level int

// The levels.
const (
	NoAccess  Level = 0
	CanRead   Level = 1
	CanEdit   Level = 2
	CanManage Level = 3
)

// String returns the level's name as users write it.
func (l Level) String() string {
	switch l {
	case CanRead:
		return "CAN_READ"
	case CanEdit:
		return "CAN_EDIT"
	case CanManage:
		return "CAN_MANAGE"
	}
	return "NO_PERMISSIONS"
}

// ParseLevel parses a level name (case-insensitive; READ, EDIT and MANAGE
// are accepted too).
func ParseLevel(s string) (Level, bool) {
	switch strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "CAN_")) {
	case "READ":
		return CanRead, true
	case "EDIT":
		return CanEdit, true
	case "MANAGE":
		return CanManage, true
	case "NO_PERMISSIONS", "NONE":
		return NoAccess, true
	}
	return 0, false
}

// User is a person (or a robot account) identified by email.
type User struct {
	ID          int64
	Email       string
	DisplayName string
	Admin       bool
	Disabled    bool
	CreatedMs   int64
}

// PrincipalKind says whether a grant names a user or a group. Persisted.
type PrincipalKind int

// The principal kinds.
const (
	PrincipalUser  PrincipalKind = 1
	PrincipalGroup PrincipalKind = 2
)

// AllUsersGroup is the built-in group every user belongs to; /Shared is
// managed by it.
const AllUsersGroup int64 = 0

// Principal names a user or a group.
type Principal struct {
	Kind PrincipalKind
	ID   int64
}

// ResourceKind says what a grant applies to. Persisted.
type ResourceKind int

// The resource kinds.
const (
	ResourceFolder     ResourceKind = 1
	ResourceExperiment ResourceKind = 2
	// Catalogs, schemas and volumes (internal/volumes) are checked by the
	// Options.Resources checker; their keys are full names ("main",
	// "main.team", "main.team.ckpts"), lowercase.
	ResourceCatalog ResourceKind = 3
	ResourceSchema  ResourceKind = 4
	ResourceVolume  ResourceKind = 5
)

// Resource names a folder (by path), an experiment (by id), or a catalog,
// schema or volume (by full name).
type Resource struct {
	Kind ResourceKind
	// Key is a folder's canonical path, an experiment's id, or a
	// securable's full name.
	Key string
}

// String names the resource in messages.
func (r Resource) String() string {
	switch r.Kind {
	case ResourceFolder:
		return "folder " + r.Key
	case ResourceCatalog:
		return "catalog " + r.Key
	case ResourceSchema:
		return "schema " + r.Key
	case ResourceVolume:
		return "volume " + r.Key
	}
	return "experiment " + r.Key
}

// Grant gives a principal a level on a resource.
type Grant struct {
	Resource  Resource
	Principal Principal
	// PrincipalName is the user's email or the group's name, for display.
	PrincipalName string
	Level         Level
}

// Subject is who is asking: a user and the groups they belong to.
type Subject struct {
	User   *User
	Groups []int64
	// Nodes, when not nil, says that the request came with a node token
	// (nodes.go): it may report the GPU samples of these nodes and do
	// nothing else, whoever created it.
	Nodes []string
}

// has reports whether a grant's principal is the subject.
func (s *Subject) has(p Principal) bool {
	switch p.Kind {
	case PrincipalUser:
		return p.ID == s.User.ID
	case PrincipalGroup:
		if p.ID == AllUsersGroup {
			return true
		}
		for _, g := range s.Groups {
			if g == p.ID {
				return true
			}
		}
	}
	return false
}

// Effective returns the subject's level on a resource given the grants on
// it and on every folder above it (chain: the resource first, then its
// ancestors). Grants on a folder are inherited by everything below it;
// the highest level wins. Admins have CanManage everywhere; disabled users
// have nothing.
func Effective(s *Subject, chain [][]Grant) Level {
	if s.IsActiveAdmin() {
		return CanManage
	}
	if s == nil || s.User == nil || s.User.Disabled || s.Nodes != nil {
		return NoAccess
	}
	best := NoAccess
	for _, grants := range chain {
		for _, g := range grants {
			if g.Level > best && s.has(g.Principal) {
				best = g.Level
			}
		}
	}
	return best
}
