package workspace

import (
	"reflect"
	"testing"
)

func TestImplicitFolders(t *testing.T) {
	paths := []string{"/Users/alice@example.com/mnist", "/Users/runner/train", "/Shared/a/b/c", "/top"}
	if got, want := implicitChildren("/", paths), []string{"/Shared", "/Users"}; !reflect.DeepEqual(got, want) {
		t.Errorf("children of /: %v, want %v", got, want)
	}
	if got, want := implicitChildren("/Users", paths), []string{"/Users/alice@example.com", "/Users/runner"}; !reflect.DeepEqual(got, want) {
		t.Errorf("children of /Users: %v, want %v", got, want)
	}
	if got := implicitChildren("/Users/alice@example.com", paths); len(got) != 0 {
		t.Errorf("children of alice's folder: %v, want none (mnist is an experiment)", got)
	}
	h := holdingFolders(paths)
	for _, p := range []string{"/", "/Users", "/Users/alice@example.com", "/Shared/a", "/Shared/a/b"} {
		if !h[p] {
			t.Errorf("%s holds an experiment but is not in %v", p, h)
		}
	}
	for _, p := range []string{"/top", "/Shared/a/b/c", "/Users/bob"} {
		if h[p] {
			t.Errorf("%s holds nothing but is in the set", p)
		}
	}
	// A created folder is never added as implicit, shown or not.
	created := []*Folder{{Path: "/Users/alice@example.com"}, {Path: "/Users/bob"}}
	got := listImplicit("/Users", created, created[1:], paths)
	var names []string
	for _, f := range got {
		names = append(names, f.Path)
	}
	if want := []string{"/Users/bob", "/Users/runner"}; !reflect.DeepEqual(names, want) {
		t.Errorf("listed %v, want %v", names, want)
	}
}
