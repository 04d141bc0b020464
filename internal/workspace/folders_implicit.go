package workspace

import (
	"context"
	"sort"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// Implicit folders. An experiment may be named by a path whose folders were
// never created: single-user mode creates experiments anywhere
// (mlflow.set_experiment("/Users/alice@example.com/mnist"), `sextant run`'s
// /Users/<user>/<entry>), and a server that later turns sign-in on keeps
// them. Such a folder exists because something lives under it: it is
// listed and can be browsed like a created one. A created folder keeps the
// folder rules; an implicit one is visible to a subject who can read an
// experiment somewhere under it (administrators and single-user mode's
// local user: any experiment).

// readablePaths returns the canonical paths of the experiments the subject
// can read whose names are workspace paths.
func (s *Service) readablePaths(ctx context.Context, sub *Subject) ([]string, error) {
	ids, all, err := s.ReadableExperimentIDs(ctx, sub)
	if err != nil {
		return nil, err
	}
	if !all && len(ids) == 0 {
		return nil, nil
	}
	names, err := s.store.ExperimentNames(ctx)
	if err != nil {
		return nil, err
	}
	keep := func(string) bool { return true }
	if !all {
		set := make(map[string]bool, len(ids))
		for _, id := range ids {
			set[id] = true
		}
		keep = func(id string) bool { return set[id] }
	}
	var out []string
	for id, name := range names {
		if !strings.HasPrefix(name, "/") || !keep(id) {
			continue
		}
		if p, err := NormalizePath(name); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// holdingFolders returns the set of folders that hold (at any depth) one
// of paths.
func holdingFolders(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		for _, a := range Ancestors(p) {
			if out[a] {
				break // and so are its ancestors
			}
			out[a] = true
		}
	}
	return out
}

// implicitChildren returns the paths of the folders directly in dir that
// hold (at any depth) one of paths.
func implicitChildren(dir string, paths []string) (children []string) {
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	seen := map[string]bool{}
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" {
			continue
		}
		name, _, deeper := strings.Cut(rest, "/")
		if deeper && !seen[name] {
			seen[name] = true
			children = append(children, prefix+name)
		}
	}
	sort.Strings(children)
	return children
}

// browsable reports whether the subject may list the folder p: a created
// folder by the folder rules (CAN_READ on it; /Users may be listed by
// anyone, to find the homes they can read), an implicit one when the
// subject can read an experiment under it (holding[p]). A path that is
// neither gives errs.NotFound.
func (s *Service) browsable(ctx context.Context, sub *Subject, p string, holding map[string]bool) (bool, error) {
	if p == "/" {
		return true, nil
	}
	if _, err := s.store.GetFolder(ctx, p); errs.Is(err, errs.NotFound) && holding[p] {
		return true, nil
	} else if err != nil {
		return false, err
	}
	if p == UsersRoot {
		return true, nil
	}
	if err := s.CheckFolder(ctx, sub, p, CanRead); err != nil {
		return false, err
	}
	return true, nil
}

// listImplicit adds to shown (the created subfolders of p that the
// subject can read) the folders in p that exist because an experiment the
// subject can read lies under them. A created folder (of created, every
// created subfolder of p) is never added: it keeps its own rules.
func listImplicit(p string, created, shown []*Folder, readable []string) []*Folder {
	children := implicitChildren(p, readable)
	have := make(map[string]bool, len(created))
	for _, f := range created {
		have[f.Path] = true
	}
	out := shown
	for _, c := range children {
		if !have[c] {
			out = append(out, &Folder{Path: c})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// listFolder returns the subfolders of p that the subject may browse,
// created and implicit; errs.NotFound for a folder that neither exists nor
// holds anything the subject can read, and PermissionDenied for a created
// folder the subject cannot read.
func (s *Service) listFolder(ctx context.Context, sub *Subject, p string) ([]*Folder, error) {
	readable, err := s.readablePaths(ctx, sub)
	if err != nil {
		return nil, err
	}
	holding := holdingFolders(readable)
	if ok, err := s.browsable(ctx, sub, p, holding); !ok {
		return nil, err
	}
	all, err := s.store.ListFolders(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []*Folder
	// Created children the subject cannot read are left out (in /Users,
	// the homes of others); /Users itself is listed for everyone, as it
	// may be browsed by everyone.
	for _, f := range all {
		if f.Path == UsersRoot || s.CheckFolder(ctx, sub, f.Path, CanRead) == nil {
			out = append(out, f)
		}
	}
	return listImplicit(p, all, out, readable), nil
}

// checkNoExperimentAt refuses a folder at the path of an experiment: the
// two would be listed as one name twice.
func (s *Service) checkNoExperimentAt(ctx context.Context, paths []string) error {
	names, err := s.store.ExperimentNames(ctx)
	if err != nil {
		return err
	}
	want := make(map[string]bool, len(paths))
	for _, p := range paths {
		want[p] = true
	}
	for _, name := range names {
		if c := CanonicalName(name); want[c] {
			return errs.Errorf(errs.AlreadyExists, "an experiment named %s exists; a folder cannot have the same path", c)
		}
	}
	return nil
}

// CheckNoFolderAt refuses an experiment name that is the path of a created
// folder (errs.AlreadyExists): the two would be listed as one name twice.
// Names that are not workspace paths pass.
func (s *Service) CheckNoFolderAt(ctx context.Context, name string) error {
	p := CanonicalName(name)
	if !strings.HasPrefix(p, "/") || p == "/" {
		return nil
	}
	if _, err := s.store.GetFolder(ctx, p); err == nil {
		return errs.Errorf(errs.AlreadyExists, "a folder %s exists; an experiment cannot have the same path", p)
	} else if !errs.Is(err, errs.NotFound) {
		return err
	}
	return nil
}
