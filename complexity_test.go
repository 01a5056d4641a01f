package pgq_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fzipp/gocyclo"
)

// Cyclomatic complexity ceilings (as gocyclo counts it) for non-test
// functions: maxComplexity everywhere, maxCLIComplexity in cmd/pgq, where a
// command's Run should read as a short list of steps.
const (
	maxComplexity    = 30
	maxCLIComplexity = 19
)

// TestComplexity fails on a non-test function over its ceiling: split it
// into named steps rather than raising the ceiling.
func TestComplexity(t *testing.T) {
	stats := gocyclo.Analyze([]string{"."}, regexp.MustCompile(`_test\.go$`))
	if len(stats) == 0 {
		t.Fatal("gocyclo found no functions")
	}
	for _, s := range stats {
		limit := maxComplexity
		if strings.HasPrefix(filepath.ToSlash(s.Pos.Filename), "cmd/pgq/") {
			limit = maxCLIComplexity
		}
		if s.Complexity > limit {
			t.Errorf("%s: %s has cyclomatic complexity %d (at most %d here)", s.Pos, s.FuncName, s.Complexity, limit)
		}
	}
}
