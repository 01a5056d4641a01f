package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientStaysLight fails when the client package's dependencies gain
// a server-side module.
func TestClientStaysLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := string(out)
	for _, heavy := range []string{"github.com/cockroachdb/pebble", "github.com/tidwall/wal", "github.com/prometheus/", "github.com/pgq-dev/pgq/consumers", "github.com/pgq-dev/pgq/journal", "github.com/pgq-dev/pgq/index"} {
		if strings.Contains(deps, heavy) {
			t.Errorf("client depends on %s", heavy)
		}
	}
	// Outside the standard library: pgq, pgq/api, msgpack (and its tag
	// parser) and pgtype (and its internals): about a dozen.
	var modules []string
	for _, p := range strings.Fields(deps) {
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			modules = append(modules, p)
		}
	}
	if len(modules) > 16 {
		t.Errorf("client pulls %d packages outside the standard library; it should stay small: %v", len(modules), modules)
	}
}
