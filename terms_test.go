package pgq_test

import (
	"regexp"
	"testing"

	"github.com/pgq-dev/pgq/internal/srclit"
)

// cliTerm matches what names the pgq CLI rather than the library: a flag
// ("--create-slot") or an environment variable of the CLI ("PGQ_SLOT").
var cliTerm = regexp.MustCompile(`(^|[^-\w])--[a-z]|\bPGQ_[A-Z]`)

// cliTermsAllowed are the library files whose string literals may still
// name the CLI's flags, each for a reason that holds beyond this test:
var cliTermsAllowed = map[string]string{
	// The harness of pgq's own tests: its environment variable and
	// pg_config's and initdb's own flags.
	"internal/pgtest/pgtest.go": "test harness; other programs' flags",
	// The bridge tests' harness runs the pgq binary as a child process and
	// reads its test environment.
	"internal/bridgetest/child.go": "test harness: the child pgq bridge's environment",
	"internal/bridgetest/kafka.go": "test harness: an outside Kafka for the tests",
	// The end-to-end tests' harness runs the pgq binary with its flags.
	"internal/pgqbin/proc.go": "test harness: pgq run and pgq bridge webhook as processes",
	// Metric help texts are bytes that /metrics serves (a contract); they
	// name the flag whose effect they count.
	"ingest/metrics.go":     "metric help text (/metrics contract)",
	"consumers/hold.go":     "metric help text (/metrics contract)",
	"server/tls.go":         "metric help text (/metrics contract)",
	"httpapi/origin.go":     "HTTP error messages (the API's contract)",
	"backfill/table.go":     "HTTP error message of a backfill's where clause (the API's contract)",
	"client/tls.go":         "the Go client's TLS hints (issue 32 item 6 rewords them)",
	"bridge/kafka/kafka.go": "a missing topic's hint, also shown in the bridge's /status last_error",
	"journal/torn.go":       "names the journal tools (pgq journal verify/repair) an operator runs on a corrupt journal",
}

// TestLibrarySpeaksItsOwnTerms fails on a string literal of a library
// package (not cmd/, not a test, not the benchmarks) that names a flag or
// a PGQ_ variable of the CLI: a program embedding the library has neither.
// Name the option in Go terms instead (package opterr for errors;
// cmd/pgq renders it as its flag). Comments are free to name flags.
func TestLibrarySpeaksItsOwnTerms(t *testing.T) {
	found := map[string]bool{}
	err := srclit.Walk(".", func(l srclit.Literal) {
		if !cliTerm.MatchString(l.Value) {
			return
		}
		if _, ok := cliTermsAllowed[l.Path]; ok {
			found[l.Path] = true
			return
		}
		t.Errorf("%s: %q names a CLI flag or variable: say it in the library's terms (opterr)", l.Pos, l.Value)
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, why := range cliTermsAllowed {
		if !found[path] {
			t.Errorf("%s (%s) names no CLI term any more: take it off cliTermsAllowed", path, why)
		}
	}
}
