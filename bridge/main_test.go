package bridge_test

import (
	"os"
	"testing"

	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestMain runs the tests and removes the pgq binary the latency
// benchmark built (bridgetest.Main).
func TestMain(m *testing.M) { os.Exit(bridgetest.Main(m)) }
