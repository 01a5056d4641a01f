package feedback_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/feedback"
	"github.com/pgq-dev/pgq/journal"
)

func TestCoverageStoreLoad(t *testing.T) {
	fs := vfs.NewMem()
	path := "/j/" + feedback.CoverageFile
	if err := fs.MkdirAll("/j", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := feedback.LoadCoverage(fs, path); ok || err != nil {
		t.Fatalf("missing file: ok=%v err=%v, want neither", ok, err)
	}
	want := feedback.Coverage{Offset: 7, EndLSN: 0x1_0000_0010, Covered: 0x1_0000_0400}
	if _, err := feedback.StoreCoverage(fs, path, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := feedback.LoadCoverage(fs, path)
	if err != nil || !ok || got != want {
		t.Fatalf("load: %+v ok=%v err=%v, want %+v", got, ok, err, want)
	}

	// A flipped byte is reported, not trusted.
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := feedback.LoadCoverage(fs, path); !errors.Is(err, feedback.ErrCoverageCorrupt) {
		t.Fatalf("corrupt file: %v, want ErrCoverageCorrupt", err)
	}
}

// TestCoverageStoreFaults: a failed write, fsync, rename or directory
// sync is returned, and the file still holds the previous coverage or the
// new one, never anything else.
func TestCoverageStoreFaults(t *testing.T) {
	old := feedback.Coverage{Offset: 1, EndLSN: 100, Covered: 200}
	next := feedback.Coverage{Offset: 1, EndLSN: 100, Covered: 300}
	for _, tc := range []struct {
		name string
		op   errorfs.OpKind
		err  error
	}{
		{"create", errorfs.OpCreate, syscall.ENOSPC},
		{"write", errorfs.OpFileWrite, syscall.ENOSPC},
		{"fsync", errorfs.OpFileSync, syscall.EIO},
		{"rename", errorfs.OpRename, syscall.EIO},
		{"dir sync", errorfs.OpFileSync, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			_ = mem.MkdirAll("/j", 0o755)
			path := "/j/" + feedback.CoverageFile
			if _, err := feedback.StoreCoverage(mem, path, old); err != nil {
				t.Fatal(err)
			}
			n := 0
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind != tc.op {
					return nil
				}
				n++
				// The directory sync is the second sync of a store.
				if tc.name == "dir sync" && n != 2 {
					return nil
				}
				return tc.err
			}))
			if _, err := feedback.StoreCoverage(fs, path, next); !errors.Is(err, tc.err) {
				t.Fatalf("store with a failing %s: %v, want %v", tc.name, err, tc.err)
			}
			got, ok, err := feedback.LoadCoverage(mem, path)
			if err != nil || !ok || (got != old && got != next) {
				t.Fatalf("after a failed store: %+v ok=%v err=%v", got, ok, err)
			}
		})
	}
}

// TestCoverageCovers checks the rule against a real journal: valid while
// the journal still holds the named record (or retention removed it from
// the front), invalid once the journal lost a tail past it.
func TestCoverageCovers(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if !(feedback.Coverage{Covered: 50}).Covers(j) {
		t.Fatal("coverage of an empty journal does not cover it")
	}
	var batch []*pgq.Transaction
	for i := range 4 {
		lsn := pgq.LSN(100 * (i + 1))
		batch = append(batch, &pgq.Transaction{Xid: uint32(i + 1), CommitLSN: lsn, EndLSN: lsn + 8, Final: true,
			Changes: []pgq.Change{{Op: pgq.OpMessage, Prefix: "p", Content: []byte("x"), Transactional: true}}})
	}
	if err := j.Append(batch); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    feedback.Coverage
		want bool
	}{
		{feedback.Coverage{Offset: 4, EndLSN: 408, Covered: 500}, true},
		{feedback.Coverage{Offset: 2, EndLSN: 208, Covered: 250}, true},   // the journal went on past it
		{feedback.Coverage{Offset: 5, EndLSN: 508, Covered: 600}, false},  // a lost tail
		{feedback.Coverage{Offset: 3, EndLSN: 999, Covered: 1000}, false}, // another record there now
	} {
		if got := tc.c.Covers(j); got != tc.want {
			t.Errorf("%+v.Covers = %v, want %v", tc.c, got, tc.want)
		}
	}
	if err := j.TruncateFront(3); err != nil {
		t.Fatal(err)
	}
	if !(feedback.Coverage{Offset: 1, EndLSN: 108, Covered: 150}).Covers(j) {
		t.Error("coverage of a record retention removed does not cover the journal")
	}
	if _, err := os.Stat(filepath.Join(dir, feedback.CoverageFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the journal itself wrote a coverage file: %v", err)
	}
}
