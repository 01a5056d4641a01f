package record

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
)

// typmodTx is a transaction of three tables: one with type modifiers
// (numeric(10,3): ((10<<16)|3)+4, timestamp(3): 3, text: none), one
// with both a domain and a type modifier, one with neither.
func typmodTx() *pgq.Transaction {
	mod := []pgq.Column{
		pgq.Column{Name: "id", TypeOID: 23, Key: true}.WithTypmod(-1),
		pgq.Column{Name: "amount", TypeOID: 1700}.WithTypmod(10<<16 | 3 + 4),
		pgq.Column{Name: "at", TypeOID: 1114}.WithTypmod(3),
		pgq.Column{Name: "at0", TypeOID: 1114}.WithTypmod(0),
		{Name: "note", TypeOID: 25},
	}
	both := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, pgq.Column{Name: "price", TypeOID: 16385, BaseTypeOID: 1700}.WithTypmod(8<<16 | 2 + 4)}
	plain := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	return &pgq.Transaction{Xid: 7, CommitLSN: 100, EndLSN: 200, CommitTime: time.UnixMicro(1_700_000_000_000_000).UTC(), Final: true,
		Changes: []pgq.Change{
			{Op: pgq.OpInsert, Schema: "public", Table: "m", Columns: mod, New: []pgq.Value{text("1"), text("1.500"), text("2024-01-01 00:00:00.123"), text("2024-01-01 00:00:00"), {Kind: pgq.ValueNull}}},
			{Op: pgq.OpInsert, Schema: "public", Table: "b", Columns: both, New: []pgq.Value{text("1"), text("9.99")}},
			{Op: pgq.OpInsert, Schema: "public", Table: "p", Columns: plain, New: []pgq.Value{text("2")}},
		}}
}

// TestRecordTypmods: type modifiers survive Append and Decode (and a
// BodyDecoder's cache, Compact and Expand); a relation without one keeps
// the form older pgq wrote.
func TestRecordTypmods(t *testing.T) {
	tx := typmodTx()
	got := roundTrip(t, tx)
	checkEqual(t, tx, got)
	cols := got.Changes[0].Columns
	for i, want := range []int32{-1, 10<<16 | 3 + 4, 3, 0, -1} {
		if m := cols[i].Typmod(); m != want {
			t.Errorf("typmod of %s = %d, want %d", cols[i].Name, m, want)
		}
	}
	if c := got.Changes[1].Columns[1]; c.BaseTypeOID != 1700 || c.Typmod() != 8<<16|2+4 {
		t.Errorf("domain column %+v", c)
	}

	rec := Append(nil, tx)
	rels := relationTable(t, rec)
	for i, want := range []int{5, 5, 3} {
		if n := len(rels[i].([]any)); n != want {
			t.Errorf("relation %d has %d elements, want %d", i, n, want)
		}
	}
	if b := rels[0].([]any)[3]; b != nil {
		t.Errorf("relation without domains: base types %v, want nil", b)
	}

	checkCachedAndCompact(t, tx, rec)
}

// relationTable is record rec's relation table as msgpack decodes it:
// one array of elements per relation.
func relationTable(t *testing.T, rec []byte) []any {
	t.Helper()
	var generic []any
	if err := msgpack.Unmarshal(rec[HeaderSize:], &generic); err != nil {
		t.Fatal(err)
	}
	return generic[7].([]any)
}

// checkCachedAndCompact: rec, tx's record, decodes to tx through a
// BodyDecoder twice (the second time from its cache), its relations are
// well-formed catalog entries, and Expand(Compact) gives it back.
func checkCachedAndCompact(t *testing.T, tx *pgq.Transaction, rec []byte) {
	t.Helper()
	var bd BodyDecoder
	for range 2 {
		var t2 pgq.Transaction
		if err := bd.Decode(rec[HeaderSize:], &t2); err != nil {
			t.Fatal(err)
		}
		checkEqual(t, tx, &t2)
	}
	var c catalog
	comp, err := Compact(nil, rec, c.intern)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range c.rels {
		if err := CheckRelation(rel); err != nil {
			t.Fatal(err)
		}
	}
	back, err := Expand(nil, comp, c.lookup)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, rec) {
		t.Fatalf("Expand(Compact) differs from the record")
	}
}

// oldTypmodsUnknown: every column of a record journaled before type
// modifiers (TestOldRecordDecodes) has typmod -1, as a Column built
// without one.
func oldTypmodsUnknown(t *testing.T, cols []pgq.Column) {
	t.Helper()
	for _, c := range cols {
		if c.Typmod() != -1 {
			t.Errorf("column %s: typmod %d, want -1", c.Name, c.Typmod())
		}
	}
	if m := (&pgq.Column{}).Typmod(); m != -1 {
		t.Errorf("zero Column typmod %d, want -1", m)
	}
}

// TestRecordTypmodsMalformed: a fifth element of the wrong length or
// kind, or a typmod out of int32's range, is refused as corrupt.
func TestRecordTypmodsMalformed(t *testing.T) {
	good := Append(nil, typmodTx())
	body := good[HeaderSize:]
	// The first relation's base types (nil) and typmods: -1, 655367, 3, 0, -1.
	old := []byte{0xc0, 0x95, 0xff, 0xce, 0x00, 0x0a, 0x00, 0x07, 0x03, 0x00, 0xff}
	i := bytes.Index(body, old)
	if i < 0 {
		t.Fatalf("typmods not found in %x", body)
	}
	for name, patch := range map[string][]byte{
		"short":    {0xc0, 0x94, 0xff, 0xce, 0x00, 0x0a, 0x00, 0x07, 0x03, 0x00},
		"str":      {0xc0, 0xa5, 0xff, 0xce, 0x00, 0x0a, 0x00, 0x07, 0x03, 0x00, 0xff},
		"range":    {0xc0, 0x95, 0xff, 0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0xff},
		"basetype": {0xa0, 0x95, 0xff, 0xce, 0x00, 0x0a, 0x00, 0x07, 0x03, 0x00, 0xff},
	} {
		bad := append(append(append([]byte(nil), body[:i]...), patch...), body[i+len(old):]...)
		var tx pgq.Transaction
		if err := Decode(reframe(bad), &tx); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: Decode = %v, want ErrCorruptRecord", name, err)
		}
		var bd BodyDecoder
		if err := bd.Decode(bad, &tx); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: BodyDecoder = %v, want ErrCorruptRecord", name, err)
		}
	}
}
