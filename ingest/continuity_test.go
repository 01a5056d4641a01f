package ingest_test

import (
	"errors"
	"fmt"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/feedback"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/server"
)

// runErr waits for a sidecar that must stop by itself and returns Run's
// error.
func (r *running) runErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.cancel()
		r.cancel = nil
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not stop by itself")
		return nil
	}
}

// idValues returns the "id" of every insert in the records, in order.
func idValues(t *testing.T, txs []*pgq.Transaction) []any {
	var ids []any
	for _, c := range changesOf(t, txs) {
		if c["op"] == "insert" {
			ids = append(ids, c["new"].(map[string]any)["id"])
		}
	}
	return ids
}

func gapChanges(t *testing.T, txs []*pgq.Transaction) []map[string]any {
	var gaps []map[string]any
	for _, c := range changesOf(t, txs) {
		if c["op"] == "gap" {
			gaps = append(gaps, c)
		}
	}
	return gaps
}

func waitJournaled(t *testing.T, dir string, n int) {
	t.Helper()
	waitFor(t, 20*time.Second, "journaled inserts", func() bool { return len(idValues(t, records(t, dir))) >= n })
}

// TestGapNewSlotOverJournal: the slot is dropped and created again while a
// row is written. pgq refuses with one line naming both LSNs; with
// AcceptGap it journals exactly one gap change and goes on, and a later
// restart raises no alarm.
func TestGapNewSlotOverJournal(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE g (id int PRIMARY KEY)`)
	dir := t.TempDir()
	slot := slotName("pgq", db)

	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO g VALUES (1)`)
	waitJournaled(t, dir, 1)
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if err := ingest.DropSlot(t.Context(), db.URL, slot, true); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO g VALUES (2)`) // lost: no slot exists

	// The binary, as the README runs it: non-zero exit, one line.
	p := startPgq(t, "run", "--pg-url", db.URL, "--slot", slot, "--publication", "pgq", "--data-dir", dir,
		"--create-slot", "--listen", "127.0.0.1:0")
	code, stderr := p.wait(t, 30*time.Second)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := lines[len(lines)-1]; code == 0 || !strings.HasPrefix(last, "pgq: journal and slot disagree: slot "+slot+" was just created at ") {
		t.Fatalf("pgq run over a new slot: exit %d, last line %q", code, last)
	}
	// The refused start dropped the slot it created (issue 23 item 12).
	if ok, _ := slotExists(t, db, slot); ok {
		t.Fatal("the refused start left the slot it created behind")
	}

	r = startSidecar(t, db, dir, nil) // --create-slot, as the README runs it
	err := r.runErr(t)
	if !errors.Is(err, ingest.ErrGap) {
		t.Fatalf("start over a new slot: %v, want ErrGap", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "just created") || !strings.Contains(msg, "ingest.Options.AcceptGap") {
		t.Fatalf("error is not one clear line naming the cause: %q", msg)
	}
	if n := len(records(t, dir)); n != 1 {
		t.Fatalf("refused start wrote records: %d, want 1", n)
	}

	// Row 3 commits on a new slot before pgq starts again: the record
	// after the gap, which the gap's commit time must not lie after.
	db.Exec(t, `SELECT pg_create_logical_replication_slot('`+slot+`', 'pgoutput')`, `INSERT INTO g VALUES (3)`)
	time.Sleep(50 * time.Millisecond)
	r = startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.AcceptGap = true })
	r.waitStreaming(t)
	waitJournaled(t, dir, 2)
	txs := records(t, dir)
	gaps := gapChanges(t, txs)
	if len(gaps) != 1 {
		t.Fatalf("gap changes: %v, want exactly one", gaps)
	}
	if !lsnLess(t, gaps[0]["from_lsn"].(string), gaps[0]["to_lsn"].(string)) {
		t.Fatalf("gap range is empty or reversed: %v", gaps[0])
	}
	if ids := idValues(t, txs); len(ids) != 2 || ids[0] != float64(1) || ids[1] != float64(3) {
		t.Fatalf("journaled ids %v, want [1 3] (2 was written while no slot existed)", ids)
	}
	// The gap sits between the two rows, in order.
	if len(txs) != 3 || txs[1].Changes[0].Op != pgq.OpGap {
		t.Fatalf("records: want insert, gap, insert; got %d records", len(txs))
	}
	// Commit times keep the journal's order: the gap's is not after the
	// next record's (it carries the last known one, the record before).
	if txs[1].CommitTime.Before(txs[0].CommitTime) || txs[1].CommitTime.After(txs[2].CommitTime) {
		t.Fatalf("commit times %v, %v (gap), %v: the gap's is out of order", txs[0].CommitTime, txs[1].CommitTime, txs[2].CommitTime)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}

	// A plain restart after the accepted gap: no alarm, no second gap.
	r = startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO g VALUES (4)`)
	waitJournaled(t, dir, 3)
	if gaps := gapChanges(t, records(t, dir)); len(gaps) != 1 {
		t.Fatalf("after restart: %d gap changes, want 1", len(gaps))
	}
}

// TestGapLostJournalTail: the data dir is restored from a copy taken
// before the slot was confirmed past more rows. pgq refuses, naming the
// journal's end and the slot's position.
func TestGapLostJournalTail(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE lt (id int PRIMARY KEY)`)
	dir := t.TempDir()
	slot := slotName("pgq", db)

	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO lt VALUES (1)`)
	waitJournaled(t, dir, 1)
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if err := os.CopyFS(backup, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}

	r = startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO lt VALUES (2)`, `INSERT INTO lt VALUES (3)`)
	waitJournaled(t, dir, 3)
	end := records(t, dir)[2].EndLSN
	waitFor(t, 20*time.Second, "slot confirmed past the last row", func() bool { return slotConfirmed(t, db, slot) >= end })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}

	conf := slotConfirmed(t, db, slot)
	r = startSidecar(t, db, backup, nil)
	err := r.runErr(t)
	if !errors.Is(err, ingest.ErrGap) {
		t.Fatalf("start on a restored data dir: %v, want ErrGap", err)
	}
	// The journal "ends" where it covers the slot: its last record, or
	// further when the backup's coverage file says so (an idle advance
	// before the copy); in any case before the slot's position.
	msg := err.Error()
	var covered, resumes string
	if _, serr := fmt.Sscanf(msg[strings.Index(msg, "the journal ends at "):], "the journal ends at %s but slot", &covered); serr != nil {
		t.Fatalf("error does not name where the journal ends: %q", msg)
	}
	resumes = "resumes at " + conf.String()
	if cov, perr := pgq.ParseLSN(covered); perr != nil || cov < records(t, backup)[0].EndLSN || cov >= conf || !strings.Contains(msg, resumes) {
		t.Fatalf("error %q: want the journal's end (at least %s, before %s) and %q", msg, records(t, backup)[0].EndLSN, conf, resumes)
	}
}

// TestNoGapAfterIdleAdvance: transactions that publish nothing and idle
// keepalives move the slot past the journal's last record. The coverage
// file records it, so a restart (and a reconnect) is not mistaken for a
// hole.
func TestNoGapAfterIdleAdvance(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE ia (id int PRIMARY KEY)`)
	dir := t.TempDir()
	slot := slotName("pgq", db)

	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO ia VALUES (1)`)
	waitJournaled(t, dir, 1)
	end := records(t, dir)[0].EndLSN
	// DDL commits are empty transactions for pgoutput.
	db.Exec(t, `CREATE TABLE other1 (x int)`, `CREATE TABLE other2 (x int)`)
	waitFor(t, 20*time.Second, "slot confirmed past the journal's end", func() bool { return slotConfirmed(t, db, slot) > end })
	cov, ok, err := feedback.LoadCoverage(vfsDefault, filepath.Join(dir, "journal", feedback.CoverageFile))
	if err != nil || !ok || cov.Covered <= end || cov.EndLSN != end {
		t.Fatalf("coverage file: %+v ok=%v err=%v; want covered past %s for the record ending at %s", cov, ok, err, end, end)
	}
	if st := r.status(t); st["covered_lsn"] == end.String() {
		t.Fatalf("status covered_lsn did not move past the journal's end: %v", st["covered_lsn"])
	}

	// Reconnect: terminate the walsender.
	db.Exec(t, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '`+slot+`'`)
	waitFor(t, 20*time.Second, "reconnect", func() bool { v, _ := r.status(t)["reconnects"].(float64); return v >= 1 })
	db.Exec(t, `INSERT INTO ia VALUES (2)`)
	waitJournaled(t, dir, 2)
	db.Exec(t, `CREATE TABLE other3 (x int)`)
	last := records(t, dir)[1].EndLSN
	waitFor(t, 20*time.Second, "slot confirmed past the journal's end", func() bool { return slotConfirmed(t, db, slot) > last })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}

	// Restart: no alarm.
	r = startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO ia VALUES (3)`)
	waitJournaled(t, dir, 3)
	if st := r.status(t); st["last_error"] != nil {
		t.Fatalf("last_error after restart: %v", st["last_error"])
	}
	if gaps := gapChanges(t, records(t, dir)); len(gaps) != 0 {
		t.Fatalf("gap changes after an idle advance: %v", gaps)
	}
}

// TestNoGapFreshDataDir: a brand-new data dir over an existing slot starts
// where the slot is, with everything the slot kept.
func TestNoGapFreshDataDir(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	slot := slotName("pgq", db)
	db.Exec(t, `CREATE TABLE fd (id int PRIMARY KEY)`, `CREATE PUBLICATION pgq FOR ALL TABLES`,
		`SELECT pg_create_logical_replication_slot('`+slot+`', 'pgoutput')`,
		`INSERT INTO fd VALUES (1)`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.CreateSlot, o.Ingest.CreatePublication = false, "" })
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO fd VALUES (2)`)
	waitJournaled(t, dir, 2)
	txs := records(t, dir)
	if ids := idValues(t, txs); len(ids) != 2 || ids[0] != float64(1) || ids[1] != float64(2) {
		t.Fatalf("ids %v, want [1 2]", ids)
	}
	if gaps := gapChanges(t, txs); len(gaps) != 0 {
		t.Fatalf("gap in a fresh data dir: %v", gaps)
	}
}

var vfsDefault = vfs.Default
