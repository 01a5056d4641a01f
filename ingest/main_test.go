package ingest_test

import (
	"os"
	"testing"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// One cluster for the package; logical_decoding_work_mem is low so large
// transactions are streamed (protocol v2) in tests. The pgq binary the
// tests built is removed after them.
func TestMain(m *testing.M) {
	code := pgtest.Main(m, pgtest.Options{Settings: []string{"logical_decoding_work_mem = '64kB'"}})
	pgqbin.Remove()
	os.Exit(code)
}
