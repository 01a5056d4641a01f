package format_test

import (
	"testing"

	"github.com/pgq-dev/pgq/internal/connectcheck"
)

// checkConnect fails t unless msg is what Kafka Connect's JSON converter
// with schemas.enable=true reads (connectcheck.Assert).
func checkConnect(t testing.TB, msg []byte) {
	t.Helper()
	connectcheck.Assert(t, msg)
}
