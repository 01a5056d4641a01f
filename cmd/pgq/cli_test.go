package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/internal/servertest"
)

// TestCLI drives the pgq binary against a running server: groups create,
// info, reset --dry-run, list (JSON when piped, and as a table), consume
// with and without --no-commit (the journal's lines, then nothing once
// committed), one error prefix for an API error, journal dump --follow
// printing what is appended until SIGINT, and groups delete.
func TestCLI(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	e := servertest.Start(t, c, nil)
	bin := pgqbin.Path(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PGQ_ADDR="+e.S.Addr())
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out) + string(ee.Stderr), err
		}
		return string(out), err
	}
	if out, err := run("groups", "create", "cli", "--from", "earliest", "--tables", "public.t"); err != nil {
		t.Fatalf("create: %v %s", err, out)
	}
	last := e.Insert(t, 3)
	var want strings.Builder
	for off := pgq.Offset(1); off <= last; off++ {
		tx, err := serverparts.Of(e.S).Journal.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(format.AppendJSON(nil, tx))
		want.WriteByte('\n')
	}
	out, err := run("consume", "--group", "cli", "--no-commit")
	if err != nil || out != want.String() {
		t.Fatalf("consume --no-commit: %v\n%s\nwant\n%s", err, out, want.String())
	}
	out, err = run("consume", "--group", "cli")
	if err != nil || out != want.String() {
		t.Fatalf("consume: %v\n%s", err, out)
	}
	if out, err = run("consume", "--group", "cli"); err != nil || out != "" {
		t.Fatalf("consume after commit: %v %q", err, out)
	}
	if out, err = run("groups", "info", "cli"); err != nil || !strings.Contains(out, fmt.Sprintf(`"committed_offset":%d`, last)) {
		t.Fatalf("info: %v %s", err, out)
	}
	if out, err = run("groups", "reset", "cli", "--to", "offset:1", "--dry-run"); err != nil || !strings.Contains(out, `"next_offset":1`) {
		t.Fatalf("reset: %v %s", err, out)
	}
	if out, err = run("groups", "list"); err != nil || !strings.HasPrefix(out, `{"groups":[{"name":"cli"`) {
		t.Fatalf("list (piped: JSON): %v %s", err, out)
	}
	if out, err = run("groups", "list", "--output", "table"); err != nil || !strings.Contains(out, "OUT_OF_RANGE") || !strings.Contains(out, "cli") {
		t.Fatalf("list --output table: %v %s", err, out)
	}
	if out, err = run("groups", "info", "cli", "-o", "table"); err != nil || !strings.HasPrefix(out, "FIELD") || !strings.Contains(out, "committed_offset") {
		t.Fatalf("info -o table: %v %s", err, out)
	}
	// One error prefix, even for errors the API returns.
	if out, err = run("groups", "create", "bad", "--ops", "nope"); err == nil || strings.Count(out, "pgq: ") != 1 || strings.Contains(out, "consumers: ") {
		t.Fatalf("create with a bad op: %v %q", err, out)
	}
	// journal dump --follow prints what is appended while it runs.
	dump := exec.Command(bin, "journal", "dump", "--data-dir", filepath.Dir(serverparts.Of(e.S).Journal.Dir()), "--follow", "--poll", "20ms")
	stdout, err := dump.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	readLines := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if !lines.Scan() {
				t.Fatalf("journal dump --follow ended after %d lines: %v", i, lines.Err())
			}
		}
	}
	readLines(int(last))
	more := e.Insert(t, 2)
	readLines(int(more - last))
	if err := dump.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := dump.Wait(); err != nil {
		t.Fatalf("journal dump --follow on SIGINT: %v", err)
	}
	out, err = run("groups", "info", "nope")
	if err == nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "not found") {
		t.Fatalf("info nope: %v %q", err, out)
	}
	if out, err = run("groups", "delete", "cli"); err != nil {
		t.Fatalf("delete: %v %s", err, out)
	}
}
