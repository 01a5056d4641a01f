package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/srclit"
	"github.com/pgq-dev/pgq/opterr"
)

// goOption matches an option's Go name in a string literal: the names
// opterr.Of lists, and those log messages name.
var goOption = regexp.MustCompile(`\b(?:ingest|server|consumers|httpapi|jetstream|kafka|webhook|client)\.(?:\w*Options|Limits)(?:\.[A-Z]\w*)*|\bingest\.(?:DropSlot|InstallDDLCapture)(?:\([a-z]+\)| on publication)`)

// TestOptionFlagsCoverLibrary: every option the library's errors and log
// messages name (in a string literal of a non-test source outside cmd/)
// has its flag in optionFlags, so that none reaches a CLI user in Go
// terms.
func TestOptionFlagsCoverLibrary(t *testing.T) {
	seen := 0
	err := srclit.Walk("../..", func(l srclit.Literal) {
		for _, name := range goOption.FindAllString(l.Value, -1) {
			seen++
			if _, ok := optionFlags[opterr.Option(name)]; !ok {
				t.Errorf("%s names option %s, which optionFlags does not map to a flag", l.Pos, name)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 30 {
		t.Fatalf("found only %d options named in the library's sources", seen)
	}
}

// TestInFlagTerms: an error that names options, however wrapped, reads
// in flag terms, with the environment variable where the library asks.
func TestInFlagTerms(t *testing.T) {
	e := opterr.New(ingest.ErrSlotMissing, "slot %q does not exist (pass {}; url: {+env})", opterr.Of("ingest.Options.CreateSlot", "ingest.Options.PGURL"), "s")
	got := errorLine(fmt.Errorf("server: open: %w", &ingest.FatalError{Err: e}))
	want := `open: replication slot does not exist: slot "s" does not exist (pass --create-slot; url: --pg-url or PGQ_PG_URL)`
	if got != want {
		t.Errorf("errorLine = %s\nwant %s", got, want)
	}
}

// TestLogsInFlagTerms: the library's log messages, and the errors they
// carry, reach the CLI's log in flag terms, in both formats.
func TestLogsInFlagTerms(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var b strings.Builder
		log := newLogger(&b, "info", format).With("slot", "s")
		log.Warn("accepting a gap in the journal (ingest.Options.AcceptGap); retention (consumers.RetentionOptions.MaxAge / consumers.RetentionOptions.MaxBytes)",
			"error", opterr.New(ingest.ErrConfig, "{} is negative", opterr.Of("ingest.Options.ReconnectGiveUp")))
		got := b.String()
		for _, want := range []string{"(--accept-gap)", "(--retain-max-age / --retain-max-bytes)", "configuration error: --reconnect-give-up is negative", "slot"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s log %q lacks %q", format, got, want)
			}
		}
	}
}
