package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/journal"
)

var updateJournalBytes = flag.Bool("update-journal-bytes", false, "rewrite testdata/journal/capture from the pgoutput captures")

// journalBytesDir holds, per pgoutput capture, the journal files ingest
// wrote from it (segment and relation catalog): the bytes a
// journal of that input must have.
const journalBytesDir = "../testdata/journal/capture"

// TestJournalBytesOfCapture feeds the committed pgoutput captures
// (testdata/pgoutput: a protocol 1 session and a protocol 2 one with
// streamed transactions) through the session's message handling into a
// journal and compares every file of it with the journal written from
// them before the journal's append path was rewritten: a change of the
// encoding, compaction or checksum path must not change one byte on
// disk.
func TestJournalBytesOfCapture(t *testing.T) {
	for _, name := range []string{"proto1", "proto2-streaming"} {
		t.Run(name, func(t *testing.T) {
			got := journalOfCapture(t, name)
			golden := filepath.Join(journalBytesDir, name)
			if *updateJournalBytes {
				if err := os.RemoveAll(golden); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(golden, 0o755); err != nil {
					t.Fatal(err)
				}
				for f, data := range got {
					if err := os.WriteFile(filepath.Join(golden, f), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := readDirFiles(t, golden)
			if len(want) == 0 {
				t.Fatalf("no golden journal in %s", golden)
			}
			for _, f := range sortedKeys(want) {
				g, ok := got[f]
				switch {
				case !ok:
					t.Errorf("%s: not written", f)
				case !bytes.Equal(g, want[f]):
					t.Errorf("%s: %d bytes differ from the golden %d (first difference at byte %d)", f, len(g), len(want[f]), firstDiff(g, want[f]))
				}
			}
			for _, f := range sortedKeys(got) {
				if _, ok := want[f]; !ok {
					t.Errorf("%s: written, not in the golden journal", f)
				}
			}
		})
	}
}

// journalOfCapture journals the capture name through a session and
// returns the journal's files by name: segments and relation catalog.
func journalOfCapture(t *testing.T, name string) map[string][]byte {
	t.Helper()
	msgs := readCaptureFile(t, filepath.Join("..", "testdata", "pgoutput", name+".bin"))
	dir := t.TempDir()
	jdir := filepath.Join(dir, "journal")
	j, err := journal.Open(journal.Options{Dir: jdir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := journal.NewCommitter(j, journal.CommitterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The session reads the primary key and base types of the captured
	// relations from PostgreSQL by OID: a fresh database has none of
	// them, so every capture reads the same (empty) answers.
	s := offlineSession(ctx, t, c, j, pgtest.Shared(t).NewDB(t).URL, filepath.Join(dir, "spill"))
	for i, m := range msgs {
		if err := s.handleCopyData(ctx, xlogData(pgq.LSN(i+1), m)); err != nil {
			t.Fatalf("message %d (%q): %v", i, m[0], err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if j.LastOffset() < 10 {
		t.Fatalf("%s: %d records journaled", name, j.LastOffset())
	}
	if err := c.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	files := readDirFiles(t, jdir)
	// The lock file is empty; the durable-point marker counts the
	// committer's batches, which depend on timing, not on the records.
	delete(files, journal.LockFile)
	delete(files, journal.DurableFile)
	return files
}

// readCaptureFile reads a capture: each message a big-endian uint32
// length and the message.
func readCaptureFile(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 || uint64(binary.BigEndian.Uint32(b)) > uint64(len(b)-4) {
			t.Fatalf("%s: torn capture", path)
		}
		n := binary.BigEndian.Uint32(b)
		out = append(out, b[4:4+n:4+n])
		b = b[4+n:]
	}
	return out
}

// readDirFiles returns the regular files of dir by name; none when dir
// is missing.
func readDirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
