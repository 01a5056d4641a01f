package record

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// typeNameTx is a transaction of four tables: one with an hstore column
// only (its base types and type modifiers nil), one with an hstore[]
// (read as text[]: a base type) and a numeric(10,3) beside the type
// name, one with a type modifier only (5 elements, as before type
// names), one with none (3).
func typeNameTx() *pgq.Transaction {
	hs := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "hs", TypeOID: 16390, TypeName: "hstore"}}
	all := []pgq.Column{{Name: "id", TypeOID: 23, Key: true},
		{Name: "hsarr", TypeOID: 16395, BaseTypeOID: 1009, TypeName: "hstore[]"},
		pgq.Column{Name: "amount", TypeOID: 1700}.WithTypmod(10<<16 | 3 + 4)}
	mod := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, pgq.Column{Name: "at", TypeOID: 1114}.WithTypmod(3)}
	plain := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	return &pgq.Transaction{Xid: 8, CommitLSN: 100, EndLSN: 200, CommitTime: time.UnixMicro(1_700_000_000_000_000).UTC(), Final: true,
		Changes: []pgq.Change{
			{Op: pgq.OpInsert, Schema: "public", Table: "h", Columns: hs, New: []pgq.Value{text("1"), text(`"a"=>"b"`)}},
			{Op: pgq.OpUpdate, Schema: "public", Table: "a", Columns: all, New: []pgq.Value{text("1"), {Kind: pgq.ValueUnchangedTOAST}, text("1.500")}},
			{Op: pgq.OpInsert, Schema: "public", Table: "m", Columns: mod, New: []pgq.Value{text("1"), text("2024-01-01 00:00:00.123")}},
			{Op: pgq.OpInsert, Schema: "public", Table: "p", Columns: plain, New: []pgq.Value{text("2")}},
		}}
}

// TestRecordTypeNames: type names survive Append and Decode (and a
// BodyDecoder's cache, Compact and Expand) in a sixth relation element,
// the fourth and fifth nil when they hold nothing; a relation without a
// type name keeps the form an older pgq wrote.
func TestRecordTypeNames(t *testing.T) {
	tx := typeNameTx()
	got := roundTrip(t, tx)
	checkEqual(t, tx, got)
	if c := got.Changes[0].Columns[1]; c.TypeName != "hstore" || c.BaseTypeOID != 0 || c.Typmod() != -1 {
		t.Errorf("hstore column %+v", c)
	}
	if c := got.Changes[1].Columns; c[1].TypeName != "hstore[]" || c[1].BaseTypeOID != 1009 || c[2].TypeName != "" || c[2].Typmod() != 10<<16|3+4 {
		t.Errorf("hstore[] and numeric columns %+v", c)
	}

	rec := Append(nil, tx)
	rels := relationTable(t, rec)
	for i, want := range []int{6, 6, 5, 3} {
		if n := len(rels[i].([]any)); n != want {
			t.Errorf("relation %d has %d elements, want %d", i, n, want)
		}
	}
	if r := rels[0].([]any); r[3] != nil || r[4] != nil {
		t.Errorf("relation with type names only: base types %v, typmods %v, want nil", r[3], r[4])
	}
	if names := rels[1].([]any)[5].([]any); len(names) != 3 || names[1] != "hstore[]" || names[0] != "" {
		t.Errorf("type names %v", names)
	}
	checkCachedAndCompact(t, tx, rec)
}

// TestRecordTypeNamesMalformed: a sixth element of the wrong length or
// kind is refused as corrupt, as are seven elements.
func TestRecordTypeNamesMalformed(t *testing.T) {
	good := Append(nil, typeNameTx())
	body := good[HeaderSize:]
	// The first relation's base types and typmods (nil) and type names.
	old := []byte{0xc0, 0xc0, 0x92, 0xa0, 0xa6, 'h', 's', 't', 'o', 'r', 'e'}
	i := bytes.Index(body, old)
	if i < 0 {
		t.Fatalf("type names not found in %x", body)
	}
	for name, patch := range map[string][]byte{
		"short":  {0xc0, 0xc0, 0x91, 0xa0},
		"uint":   {0xc0, 0xc0, 0x92, 0xa0, 0x05},
		"nil":    {0xc0, 0xc0, 0xc0},
		"typmod": {0xc0, 0xa0, 0x92, 0xa0, 0xa6, 'h', 's', 't', 'o', 'r', 'e'},
	} {
		bad := append(append(append([]byte(nil), body[:i]...), patch...), body[i+len(old):]...)
		checkCorrupt(t, name, bad)
	}
	// Seven elements: the first relation's header is fixarray 6 (0x96).
	j := bytes.Index(body, []byte{0x96, 0xa6, 'p', 'u', 'b', 'l', 'i', 'c', 0xa1, 'h'})
	if j < 0 {
		t.Fatalf("relation header not found in %x", body)
	}
	bad := append([]byte(nil), body...)
	bad[j] = 0x97
	checkCorrupt(t, "seven", bad)
}

// checkCorrupt: body is refused as corrupt by Decode, a BodyDecoder and
// Compact.
func checkCorrupt(t *testing.T, name string, body []byte) {
	t.Helper()
	var tx pgq.Transaction
	if err := Decode(reframe(body), &tx); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("%s: Decode = %v, want ErrCorruptRecord", name, err)
	}
	var bd BodyDecoder
	if err := bd.Decode(body, &tx); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("%s: BodyDecoder = %v, want ErrCorruptRecord", name, err)
	}
	var c catalog
	if _, err := Compact(nil, reframe(body), c.intern); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("%s: Compact = %v, want ErrCorruptRecord", name, err)
	}
}
