package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq"
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

// TestJournalCommandsBigRecordCorrupt: a byte flipped inside a record of
// 256 KiB or more (written to its segment file straight from the batch,
// and the last record of its segment, which it took past the segment
// size) of a sealed segment. `pgq journal verify` and `pgq journal dump`
// exit 1 with one line naming its offset, `pgq journal repair` refuses a
// cut after it (at the next segment's first record) and cuts at it,
// keeping every record before it, after which the journal verifies.
func TestJournalCommandsBigRecordCorrupt(t *testing.T) {
	data := t.TempDir()
	jdir := filepath.Join(data, "journal")
	const n, bad = 12, 8
	var contents [][]byte
	for i := 1; i <= n; i++ {
		content := bytes.Repeat([]byte{byte('a' + i)}, 64)
		if i%4 == 0 {
			content = bytes.Repeat([]byte{byte('a' + i)}, 300<<10)
		}
		contents = append(contents, content)
	}
	segs := journalOfMessages(t, data, 400<<10, contents...)
	if len(segs) < 2 || segs[1].FirstOffset != bad+1 {
		t.Fatalf("segments %+v: want record %d to end the first one", segs, bad)
	}
	b, err := os.ReadFile(segs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, bytes.Repeat([]byte{byte('a' + bad)}, 300<<10))
	if i < 0 {
		t.Fatal("the big record's content is not in the first segment")
	}
	b[i+150<<10] ^= 0xff
	if err := os.WriteFile(segs[0].Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	offset := fmt.Sprintf("offset %d", bad)
	for _, args := range [][]string{{"journal", "verify", "--data-dir", data}, {"journal", "dump", "--data-dir", data}} {
		if code, line := runPgq(t, nil, args...); code != exitRuntime || !strings.Contains(line, offset) {
			t.Fatalf("pgq %v: exit %d %q, want %d naming %s", args, code, line, exitRuntime, offset)
		}
	}
	before := dirSum(t, jdir)
	if code, line := runPgq(t, nil, "journal", "repair", "--data-dir", data, "--truncate-at", fmt.Sprint(bad+1)); code != exitRuntime || !strings.Contains(line, fmt.Sprintf("cut at %d or lower", bad)) {
		t.Fatalf("repair after the bad record: exit %d %q", code, line)
	}
	if dirSum(t, jdir) != before {
		t.Fatal("a refused repair changed the journal directory")
	}
	cmd := exec.Command(pgqbin.Path(t), "journal", "repair", "--data-dir", data, "--truncate-at", fmt.Sprint(bad))
	cmd.Env = cliEnv()
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf(`"kept_last_offset":%d`, bad-1)) {
		t.Fatalf("pgq journal repair: %v\n%s", err, out)
	}
	sum, err := journal.Verify(jdir)
	if err != nil || sum.First != 1 || sum.Last != bad-1 || sum.LastEndLSN != pgq.LSN(100*(bad-1)+10) {
		t.Fatalf("Verify after the repair: %+v %v", sum, err)
	}
}
