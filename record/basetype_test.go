package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// domainTx is a transaction of two tables: one with domain columns (a
// domain over int4, one over a domain over int8), one without.
func domainTx() *pgq.Transaction {
	dom := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "qty", TypeOID: 16385, BaseTypeOID: 23}, {Name: "big", TypeOID: 16390, BaseTypeOID: 20}, {Name: "note", TypeOID: 25}}
	plain := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	return &pgq.Transaction{Xid: 7, CommitLSN: 100, EndLSN: 200, CommitTime: time.UnixMicro(1_700_000_000_000_000).UTC(), Final: true,
		Changes: []pgq.Change{
			{Op: pgq.OpInsert, Schema: "public", Table: "d", Columns: dom, New: []pgq.Value{text("1"), text("5"), text("9000000000"), {Kind: pgq.ValueNull}}},
			{Op: pgq.OpInsert, Schema: "public", Table: "p", Columns: plain, New: []pgq.Value{text("2")}},
		}}
}

// TestRecordBaseTypes: base types of domain columns survive Append and
// Decode (and a BodyDecoder's cache, Compact and Expand); a relation
// without a domain keeps the three-element form older pgq wrote.
func TestRecordBaseTypes(t *testing.T) {
	tx := domainTx()
	got := roundTrip(t, tx)
	checkEqual(t, tx, got)
	if b := got.Changes[0].Columns[2].BaseTypeOID; b != 20 {
		t.Fatalf("base type of big = %d, want 20", b)
	}

	rec := Append(nil, tx)
	rels := relationTable(t, rec)
	if n := len(rels[0].([]any)); n != 4 {
		t.Errorf("relation with domains has %d elements, want 4", n)
	}
	if n := len(rels[1].([]any)); n != 3 {
		t.Errorf("relation without domains has %d elements, want 3 (as before base types)", n)
	}

	checkCachedAndCompact(t, tx, rec)
}

// oldRecord is a record as pgq wrote it before base types: insert into
// public.d (id int4 key, qty of a domain with OID 16385) values (1, 5).
const oldRecord = "01" + "00000000" + // version, CRC filled in by the test
	"99" + "07" + "64" + "cc c8" + "00" + "a0" + "00" + "c3" + // xid 7, LSNs 100/200, time 0, origin "", part 0, final
	"91" + "93" + "a6 7075626c6963" + "a1 64" + "96" + "a2 6964 17 c3" + "a3 717479 cd 4001 c2" + // relation
	"91" + "95 01 00 00 92 a1 31 a1 35 c0" // insert, relation 0, no old, new ("1", "5")

// TestOldRecordDecodes: a record journaled before base types (and type
// modifiers) decodes, its domain column without a base type (rendered as
// text, as before), every column without a type modifier.
func TestOldRecordDecodes(t *testing.T) {
	raw, err := hex.DecodeString(string(bytes.ReplaceAll([]byte(oldRecord), []byte(" "), nil)))
	if err != nil {
		t.Fatal(err)
	}
	rec := reframe(raw[HeaderSize:])
	var tx pgq.Transaction
	if err := Decode(rec, &tx); err != nil {
		t.Fatal(err)
	}
	cols := tx.Changes[0].Columns
	oldTypmodsUnknown(t, cols)
	if len(cols) != 2 || cols[1].Name != "qty" || cols[1].TypeOID != 16385 || cols[1].BaseTypeOID != 0 || cols[1].ValueType() != 16385 {
		t.Fatalf("columns %+v", cols)
	}
	// Encoding it again gives the same bytes: nothing changed for tables
	// without a known base type.
	tx.Offset = 0
	if again := Append(nil, &tx); !bytes.Equal(again, rec) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", again, rec)
	}
}

// TestRecordBaseTypesMalformed: a fourth element of the wrong length or
// kind is refused as corrupt, never read past.
func TestRecordBaseTypesMalformed(t *testing.T) {
	good := Append(nil, domainTx())
	body := good[HeaderSize:]
	// The base-type array of the first relation: 0x94 (4 columns) after
	// the columns; shorten it to 3 and to a string.
	i := bytes.Index(body, []byte{0x94, 0x00, 0x17, 0x14, 0x00})
	if i < 0 {
		t.Fatalf("base types not found in %x", body)
	}
	for name, patch := range map[string][]byte{"short": {0x93, 0x00, 0x17, 0x14}, "str": {0xa4, 0x00, 0x17, 0x14, 0x00}} {
		bad := append(append(append([]byte(nil), body[:i]...), patch...), body[i+5:]...)
		var tx pgq.Transaction
		if err := Decode(reframe(bad), &tx); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: Decode = %v, want ErrCorruptRecord", name, err)
		}
	}
}
