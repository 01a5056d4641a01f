package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/opterr"
)

// TestOptionFlagsCoverLibrary: every option the library's errors name
// (an opterr.Of literal in a non-test source outside cmd/) has its flag
// in optionFlags, so that no error reaches a CLI user in Go terms.
func TestOptionFlagsCoverLibrary(t *testing.T) {
	lit := regexp.MustCompile(`"([a-z]+\.[A-Za-z.()]+)"`)
	of := regexp.MustCompile(`opterr\.Of\(([^)]*(?:\([a-z]+\)[^)]*)*)\)`)
	seen := 0
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "cmd" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, call := range of.FindAllStringSubmatch(string(src), -1) {
			for _, m := range lit.FindAllStringSubmatch(call[1], -1) {
				seen++
				if _, ok := optionFlags[opterr.Option(m[1])]; !ok {
					t.Errorf("%s names option %s, which optionFlags does not map to a flag", path, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
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
