package workspace

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// Path rules. Workspace paths are absolute and slash-separated:
// "/Users/alice@example.com/mnist", "/Shared/team/baseline". The prefix
// "/Workspace" is accepted and dropped ("/Workspace/Users/x" and
// "/Users/x" name the same node), repeated and trailing slashes are
// collapsed, and "." or ".." segments are refused rather than resolved, so
// that no spelling of a path can reach outside the folder it names.
const (
	// MaxPathLen is the longest workspace path, in bytes.
	MaxPathLen = 1024
	// MaxNameLen is the longest path segment, in bytes.
	MaxNameLen = 255
)

// Well-known folders.
const (
	UsersRoot  = "/Users"
	SharedRoot = "/Shared"
)

// NormalizePath checks a workspace path and returns its canonical form.
func NormalizePath(p string) (string, error) {
	if p == "" {
		return "", errs.E(errs.Invalid, "a workspace path is required")
	}
	if !utf8.ValidString(p) {
		return "", errs.E(errs.Invalid, "workspace path is not valid UTF-8")
	}
	if !strings.HasPrefix(p, "/") {
		return "", errs.Errorf(errs.Invalid, "%q is not an absolute workspace path: names are paths such as /Users/<you>/%s or /Shared/%s", errs.Truncate(p, 120), errs.Truncate(p, 120), errs.Truncate(p, 120))
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "":
			continue // repeated or trailing slash
		case ".", "..":
			return "", errs.Errorf(errs.Invalid, "workspace path %q contains a %q segment", errs.Truncate(p, 120), s)
		}
		if len(s) > MaxNameLen {
			return "", errs.Errorf(errs.Invalid, "workspace path %q has a name longer than %d bytes", errs.Truncate(p, 120), MaxNameLen)
		}
		for _, r := range s {
			if unicode.IsControl(r) || r == '\\' {
				return "", errs.Errorf(errs.Invalid, "workspace path %q contains a control character or backslash", errs.Truncate(p, 120))
			}
		}
		segs = append(segs, s)
	}
	if len(segs) > 0 && segs[0] == "Workspace" {
		segs = segs[1:]
	}
	out := "/" + strings.Join(segs, "/")
	if len(out) > MaxPathLen {
		return "", errs.Errorf(errs.Invalid, "workspace path is longer than %d bytes", MaxPathLen)
	}
	return out, nil
}

// Parent returns the folder that holds p ("/" for top-level names).
func Parent(p string) string { return path.Dir(p) }

// Ancestors returns p's folders from p's parent up to "/", nearest first.
func Ancestors(p string) []string {
	var out []string
	for p != "/" {
		p = path.Dir(p)
		out = append(out, p)
	}
	return out
}

// HomeOf returns a user's home folder.
func HomeOf(email string) string { return UsersRoot + "/" + email }
