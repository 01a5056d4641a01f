package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/journal"
)

// dirSum hashes every file of dir (names and contents).
func dirSum(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %x\n", e.Name(), sha256.Sum256(b))
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestRunRefusesCorruptJournal: a byte flipped in a fsynced record of a
// stopped journal makes `pgq run` exit 1 with one line naming the
// segment file, the offset and `pgq journal verify`, before it connects
// to PostgreSQL, and no byte of the journal changes. `pgq journal repair
// --truncate-at` then cuts there, after which the journal verifies.
func TestRunRefusesCorruptJournal(t *testing.T) {
	data := t.TempDir()
	corruptJournal(t, data) // record 1 of 3 is bad
	jdir := filepath.Join(data, "journal")
	before := dirSum(t, jdir)
	code, line := runPgq(t, nil, "run", "--pg-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=1",
		"--slot", "s", "--publication", "p", "--data-dir", data, "--listen", "127.0.0.1:0", "--no-reconnect")
	seg := filepath.Join(jdir, "00000000000000000001")
	for _, want := range []string{seg, "offset 1", "pgq journal verify", "--truncate-at 1"} {
		if !strings.Contains(line, want) {
			t.Fatalf("pgq run: %q does not name %q", line, want)
		}
	}
	if code != exitRuntime {
		t.Fatalf("pgq run: exit %d, want %d", code, exitRuntime)
	}
	if after := dirSum(t, jdir); after != before {
		t.Fatal("pgq run changed the journal directory")
	}
	if code, line := runPgq(t, nil, "journal", "repair", "--data-dir", data, "--truncate-at", "3"); code != exitRuntime || !strings.Contains(line, "cut at 1 or lower") {
		t.Fatalf("repair above the bad record: exit %d %q", code, line)
	}
	cmd := exec.Command(pgqbin.Path(t), "journal", "repair", "--data-dir", data, "--truncate-at", "1")
	cmd.Env = cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"kept_last_offset":0`) || !strings.Contains(string(out), "lost") {
		t.Fatalf("pgq journal repair: %v\n%s", err, out)
	}
	j, err := journal.Open(journal.Options{Dir: jdir})
	if err != nil {
		t.Fatalf("Open after the repair: %v", err)
	}
	if j.LastOffset() != 0 {
		t.Fatalf("last offset %d after cutting at 1", j.LastOffset())
	}
	_ = j.Close()
}
