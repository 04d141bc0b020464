package volumes

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// Path rules. A volume path is /Volumes/<catalog>/<schema>/<volume> (the
// volume's root) followed by the path of a file or directory inside it.
// Catalog, schema and volume names are case-insensitive; the rest is not.
// Nothing is resolved: '.' and '..' segments, empty segments ("a//b"),
// backslashes and control characters are refused, so that no spelling of a
// path reaches outside the volume it names.
const (
	// Root is the prefix of every volume path.
	Root = "/Volumes"
	// MaxRelLen is the longest path inside a volume, in bytes (its blob key
	// is the volume id, a slash and this path).
	MaxRelLen = 960
	// MaxSegmentLen is the longest file or directory name, in bytes.
	MaxSegmentLen = 255
	// DirMarker is the name of the empty file that keeps a directory made
	// with MakeDir in existence while it is empty. It is reserved: no path
	// may use it, and listings leave it out.
	DirMarker = ".sextant-dir"
)

// Path is a parsed volume path.
type Path struct {
	Catalog, Schema, Volume string
	// Rel is the path inside the volume without leading or trailing
	// slashes; "" is the volume's root.
	Rel string
}

// String returns the canonical path, "/Volumes/c/s/v[/rel]".
func (p Path) String() string {
	s := Root + "/" + p.Catalog + "/" + p.Schema + "/" + p.Volume
	if p.Rel != "" {
		s += "/" + p.Rel
	}
	return s
}

// FullName returns the volume's full name, "c.s.v".
func (p Path) FullName() string { return p.Catalog + "." + p.Schema + "." + p.Volume }

// Name returns the last segment of the path inside the volume ("" at the
// root).
func (p Path) Name() string {
	return p.Rel[strings.LastIndexByte(p.Rel, '/')+1:]
}

// Dir returns the directory that holds p (p itself at the root).
func (p Path) Dir() Path {
	i := strings.LastIndexByte(p.Rel, '/')
	if i < 0 {
		p.Rel = ""
	} else {
		p.Rel = p.Rel[:i]
	}
	return p
}

// Join returns the path of name inside directory p.
func (p Path) Join(name string) Path {
	if p.Rel == "" {
		p.Rel = name
	} else {
		p.Rel += "/" + name
	}
	return p
}

// ParsePath checks a volume path. One trailing slash is allowed (a
// directory written as such).
func ParsePath(s string) (Path, error) {
	bad := func(why string) (Path, error) {
		return Path{}, errs.Errorf(errs.Invalid, "Invalid path %q: %s", errs.Truncate(s, 120), why)
	}
	if !utf8.ValidString(s) {
		return bad("not valid UTF-8")
	}
	rest, ok := strings.CutPrefix(s, Root+"/")
	if !ok {
		return bad("volume paths are /Volumes/<catalog>/<schema>/<volume>/<path>")
	}
	rest = strings.TrimSuffix(rest, "/")
	segs := strings.Split(rest, "/")
	if len(segs) < 3 {
		return bad("it is outside any volume: volume paths are /Volumes/<catalog>/<schema>/<volume>/<path>")
	}
	for _, seg := range segs {
		switch {
		case seg == "":
			return bad("it contains an empty segment (//)")
		case seg == "." || seg == "..":
			return bad("it contains a '" + seg + "' segment")
		case seg == DirMarker:
			return bad("the name " + DirMarker + " is reserved")
		case len(seg) > MaxSegmentLen:
			return bad("it has a name longer than 255 bytes")
		}
		for _, r := range seg {
			if r == '\\' || unicode.IsControl(r) {
				return bad("it contains a backslash or a control character")
			}
		}
	}
	var p Path
	var err error
	if p.Catalog, err = ValidateName("catalog", segs[0]); err != nil {
		return Path{}, err
	}
	if p.Schema, err = ValidateName("schema", segs[1]); err != nil {
		return Path{}, err
	}
	if p.Volume, err = ValidateName("volume", segs[2]); err != nil {
		return Path{}, err
	}
	p.Rel = strings.Join(segs[3:], "/")
	if len(p.Rel) > MaxRelLen {
		return bad("the path inside the volume is longer than 960 bytes")
	}
	return p, nil
}
