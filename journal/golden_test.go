package journal

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

var update = flag.Bool("update", false, "rewrite the golden journal in testdata/journal")

// goldenDir holds a small journal written by format version 1. It must stay
// readable by every later version.
var goldenDir = filepath.Join("..", "testdata", "journal", "v1")

func goldenTxs() []*pgq.Transaction {
	var txs []*pgq.Transaction
	for i := 1; i <= 12; i++ {
		tx := mkTx(i, 1+i%3)
		tx.Origin = []string{"", "node-b"}[i%2]
		switch i {
		case 5:
			tx.Changes = append(tx.Changes,
				pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: cols, OldKind: pgq.OldKey,
					New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueUnchangedTOAST}},
					Old: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueNull}}},
				pgq.Change{Op: pgq.OpDelete, Schema: "public", Table: "t", Columns: cols, OldKind: pgq.OldFull,
					Old: []pgq.Value{{Kind: pgq.ValueBinary, Data: []byte{0, 0, 0, 1}}, {Kind: pgq.ValueNull}}})
		case 7:
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpTruncate, Tables: []string{"public.t"}, Cascade: true, RestartIdentity: true})
		case 9:
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpMessage, Prefix: "app", Content: []byte("hello\x00"), Transactional: true})
		case 10, 11:
			tx.Part, tx.Final = uint32(i-10), i == 11
		}
		txs = append(txs, tx)
	}
	return txs
}

func TestGoldenJournal(t *testing.T) {
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		j, err := Open(Options{Dir: goldenDir, SegmentSize: 512, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append(goldenTxs()); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(goldenDir, LockFile)); err != nil {
			t.Fatal(err)
		}
	}
	want := goldenTxs()
	sum, err := Verify(goldenDir)
	if err != nil {
		t.Fatalf("Verify golden journal: %v", err)
	}
	if sum.Records != uint64(len(want)) || sum.First != 1 || sum.LastEndLSN != want[len(want)-1].EndLSN {
		t.Fatalf("golden summary %+v", sum)
	}
	j, err := Open(Options{Dir: copyDir(t, goldenDir), SegmentSize: 512, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i, w := range want {
		got, size, err := j.ReadSized(pgq.Offset(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		w.Offset = got.Offset
		// The record read back has the size of the record written.
		if want := len(record.Append(nil, w)); size != want {
			t.Fatalf("record %d: %d bytes, want %d", i+1, size, want)
		}
		if !got.CommitTime.Equal(w.CommitTime) {
			t.Fatalf("record %d time %v, want %v", i+1, got.CommitTime, w.CommitTime)
		}
		w.CommitTime = got.CommitTime
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("record %d\n got %+v\nwant %+v", i+1, got, w)
		}
	}
}
