package main

import (
	"fmt"
	"testing"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestHoldSlotFlags: --hold-slot-for with a name no group can have, a
// blank list, and --hold-slot-max-lag outside 1MiB to 1PiB (from the
// command line or the environment) are refused with one line and the
// usage exit status; good values go on to connect (and fail at runtime
// against a server that is not there).
func TestHoldSlotFlags(t *testing.T) {
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", port)
	run := func(extra ...string) []string {
		return append([]string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}, extra...)
	}
	checkExits(t, []exitCase{
		{"hold-slot-for two groups", run("--hold-slot-for", "bridge,audit", "--hold-slot-max-lag", "1MiB"), nil, exitRuntime, "server unreachable"},
		{"hold-slot-for a bad name", run("--hold-slot-for", "ok,.."), nil, exitUsage, "--hold-slot-for"},
		{"hold-slot-for blank", run("--hold-slot-for", " "), nil, exitUsage, "--hold-slot-for is empty"},
		{"hold-slot-max-lag too small", run("--hold-slot-max-lag", "1KiB"), nil, exitUsage, "--hold-slot-max-lag 1024 is out of range"},
		{"hold-slot-max-lag from the environment", run(), []string{"PGQ_HOLD_SLOT_MAX_LAG=10"}, exitUsage, "--hold-slot-max-lag 10 is out of range"},
	})
}
