package pgqbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// pkg is built by import path, not by a relative directory, so that a
// test of any package in the module can build it.
const pkg = "github.com/pgq-dev/pgq/cmd/pgq"

var (
	mu       sync.Mutex
	dir      string // the temporary directory Path built into
	path     string
	buildErr error // kept, so that a broken build is not repeated per test
)

// Path returns the pgq binary, built on the first call of the test
// process; a failed build fails t.
func Path(t testing.TB) string {
	t.Helper()
	p, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func built() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if path != "" || buildErr != nil {
		return path, buildErr
	}
	d, err := os.MkdirTemp("", "pgq-bin-")
	if err != nil {
		buildErr = fmt.Errorf("pgqbin: %w", err)
		return "", buildErr
	}
	dir = d
	if path, buildErr = Build(d); buildErr != nil {
		path = ""
	}
	return path, buildErr
}

// Build builds the pgq binary into dir/pgq and returns its path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "pgq")
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("pgqbin: go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Remove deletes what Path built; a later Path builds again.
func Remove() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	dir, path, buildErr = "", "", nil
}

// Env is the environment without PGQ_ variables, which would set the
// CLI's flags: the environment of a test's pgq process.
func Env() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PGQ_") {
			env = append(env, e)
		}
	}
	return env
}
