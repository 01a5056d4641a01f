package jetstream_test

import (
	"os"
	"testing"

	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestMain runs the test binary as a bridge process when a test starts
// one (bridgetest.StartChild).
func TestMain(m *testing.M) { os.Exit(bridgetest.Main(m)) }
