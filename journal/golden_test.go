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

var update = flag.Bool("update", false, "rewrite the golden journal of the current format in testdata/journal/v4")

// goldenDirs hold small journals of goldenTxs written by each format: v1
// stores Version 1 records, v2 compact records with a relation catalog,
// v3 also relations with type modifiers (pgq.Column.Typmod), v4 also
// relations with type names (pgq.Column.TypeName). Every one
// must stay readable by every later version; only the current one is
// rewritten by -update.
var goldenDirs = map[string]string{
	"v1": filepath.Join("..", "testdata", "journal", "v1"),
	"v2": filepath.Join("..", "testdata", "journal", "v2"),
	"v3": filepath.Join("..", "testdata", "journal", "v3"),
	"v4": filepath.Join("..", "testdata", "journal", "v4"),
}

// currentGolden is the version -update rewrites.
const currentGolden = "v4"

// typeNameCols is a table journaled with its type names since v4: an
// hstore, an hstore[] (read as text[]) and a numeric(10,3).
var typeNameCols = []pgq.Column{
	{Name: "id", TypeOID: 23, Key: true},
	{Name: "hs", TypeOID: 16390, TypeName: "hstore"},
	{Name: "hsarr", TypeOID: 16395, BaseTypeOID: 1009, TypeName: "hstore[]"},
	pgq.Column{Name: "amount", TypeOID: 1700}.WithTypmod(10<<16 | 3 + 4),
}

// typmodCols is a table journaled with its type modifiers since v3:
// numeric(10,3) ((10<<16 | 3) + 4), timestamp(3), timestamp(0) and a
// text column, which has none.
var typmodCols = []pgq.Column{
	{Name: "id", TypeOID: 23, Key: true},
	pgq.Column{Name: "amount", TypeOID: 1700}.WithTypmod(10<<16 | 3 + 4),
	pgq.Column{Name: "at", TypeOID: 1114}.WithTypmod(3),
	pgq.Column{Name: "at0", TypeOID: 1114}.WithTypmod(0),
	{Name: "note", TypeOID: 25},
}

// goldenTxs are the transactions of the golden journal of version
// (goldenDirs); from v3 on, transaction 3 also changes a table with
// type modifiers, from v4 on transaction 4 one with type names.
func goldenTxs(version string) []*pgq.Transaction {
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
		case 3:
			if version >= "v3" {
				tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "m", Columns: typmodCols,
					New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueText, Data: []byte("1.500")},
						{Kind: pgq.ValueText, Data: []byte("2024-01-01 00:00:00.123")}, {Kind: pgq.ValueText, Data: []byte("2024-01-01 00:00:00")}, {Kind: pgq.ValueNull}}})
			}
		case 4:
			if version >= "v4" {
				tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "h", Columns: typeNameCols,
					New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueText, Data: []byte(`"a"=>"b"`)},
						{Kind: pgq.ValueText, Data: []byte(`{"\"c\"=>\"d\""}`)}, {Kind: pgq.ValueText, Data: []byte("1.500")}}})
			}
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
		dir := goldenDirs[currentGolden]
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		j, err := Open(Options{Dir: dir, SegmentSize: 512, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append(goldenTxs(currentGolden)); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, LockFile)); err != nil {
			t.Fatal(err)
		}
	}
	for name, dir := range goldenDirs {
		t.Run(name, func(t *testing.T) { checkGolden(t, dir, name) })
	}
}

func checkGolden(t *testing.T, goldenDir, version string) {
	want := goldenTxs(version)
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
		// The record read back has the size of the record stored: the
		// Version 1 frame in v1, the compact form after.
		v1 := len(record.Append(nil, w))
		if (version == "v1" && size != v1) || (version != "v1" && (size <= 0 || size >= v1)) {
			t.Fatalf("record %d: %d bytes stored; Version 1 is %d", i+1, size, v1)
		}
		if !got.CommitTime.Equal(w.CommitTime) {
			t.Fatalf("record %d time %v, want %v", i+1, got.CommitTime, w.CommitTime)
		}
		w.CommitTime = got.CommitTime
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("record %d\n got %+v\nwant %+v", i+1, got, w)
		}
		checkGoldenTypmods(t, got, version)
		checkGoldenTypeNames(t, got, version)
	}
}

// checkGoldenTypeNames: in journals written before type names every
// column reads with none; from v4 on, table h's columns read with
// theirs.
func checkGoldenTypeNames(t *testing.T, tx *pgq.Transaction, version string) {
	t.Helper()
	for _, c := range tx.Changes {
		for k, col := range c.Columns {
			want := ""
			if version >= "v4" && c.Table == "h" {
				want = typeNameCols[k].TypeName
			}
			if col.TypeName != want {
				t.Fatalf("%s: record %d, %s.%s: type name %q, want %q", version, tx.Offset, c.Table, col.Name, col.TypeName, want)
			}
		}
	}
}

// checkGoldenTypmods: in journals written before type modifiers every
// column reads with typmod -1 (unknown); from v3 on, table m's columns
// read with theirs.
func checkGoldenTypmods(t *testing.T, tx *pgq.Transaction, version string) {
	t.Helper()
	for _, c := range tx.Changes {
		for k, col := range c.Columns {
			want := int32(-1)
			if version >= "v3" && c.Table == "m" {
				want = typmodCols[k].Typmod()
			}
			if c.Table == "h" {
				want = typeNameCols[k].Typmod()
			}
			if col.Typmod() != want {
				t.Fatalf("%s: record %d, %s.%s: typmod %d, want %d", version, tx.Offset, c.Table, col.Name, col.Typmod(), want)
			}
		}
	}
}
