// Package srclit walks the string literals of pgq's library sources, for
// the tests that hold what the library says to its callers: that it names
// options in Go terms (the root's TestLibrarySpeaksItsOwnTerms) and that
// the CLI has a flag for each option it names (cmd/pgq's
// TestOptionFlagsCoverLibrary). Both must read the same sources, so
// which files are the library is said here once.
//
// The library is every non-test .go file under the module root except
// cmd/ (the CLI), benchmarks/, deploy/, testdata/ and hidden directories.
// Walk holds no state; it may run from concurrent tests.
package srclit

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Literal is one string literal of a library source.
type Literal struct {
	Path  string         // the file, slash-separated, relative to the root
	Pos   token.Position // where it is
	Value string         // unquoted
}

// notLibrary are the module root's directories that hold no library code.
var notLibrary = map[string]bool{"cmd": true, "benchmarks": true, "deploy": true}

// Walk calls visit with each string literal of the library's sources
// under root, the module's root directory.
func Walk(root string, visit func(Literal)) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || notLibrary[rel]) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("srclit: %w", err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				visit(Literal{Path: rel, Pos: fset.Position(lit.Pos()), Value: s})
			}
			return true
		})
		return nil
	})
}
