package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestRequestBodiesAreWireTypes keeps the client's request bodies in
// internal/wire, where the server decodes the same types: a body built as
// a map here would drift from the server's without a compile error. The
// client has no map literals at all, so any is taken for a body.
func TestRequestBodiesAreWireTypes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if filepath.Ext(name) != ".go" || len(name) > 8 && name[len(name)-8:] == "_test.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "jsonRequest" {
					checked++
				}
			case *ast.CompositeLit:
				// No map literal at all: a body built as one and passed
				// on through a variable is a map literal too.
				if _, isMap := n.Type.(*ast.MapType); isMap {
					t.Errorf("%s: a map literal: request bodies are types of internal/wire", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("found no jsonRequest calls: the test looks in the wrong place")
	}
}
