package webhook_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestMain runs the test binary as the webhook benchmark's receiver when
// PGQ_BENCH_RECEIVER names one, else as bridgetest.Main does (a bridge
// process when PGQ_BRIDGE_CHILD names a broker: the kill tests SIGKILL it).
func TestMain(m *testing.M) {
	if kind := os.Getenv("PGQ_BENCH_RECEIVER"); kind != "" {
		if err := runReceiver(kind); err != nil {
			fmt.Fprintln(os.Stderr, "receiver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(bridgetest.Main(m))
}
