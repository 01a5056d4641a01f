package bridge

import (
	"errors"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

func TestParseIDAndCompare(t *testing.T) {
	for _, id := range []string{"16/B374D848.3", "0/0.0", "FFFFFFFF/FFFFFFFF.4294967295", "0/1A2B3C8.bf-1.7", "0/1A2B3C8.bf.with.dots.2", "16/B374D848.3.1"} {
		p, err := ParseID(id)
		if err != nil || p.String() != id {
			t.Fatalf("ParseID(%q) = %+v, %v; String %q", id, p, err, p.String())
		}
	}
	for _, id := range []string{"", "101.3", "16/B374D848", "16/B374D848.x", "16/B374D848..3", "zz/1.0"} {
		if p, err := ParseID(id); !errors.Is(err, ErrNoPosition) {
			t.Fatalf("ParseID(%q) = %+v, %v; want ErrNoPosition", id, p, err)
		}
	}
	// In publish order: LSN, then a transaction's changes before a
	// backfill chunk's rows at one LSN, then ordinals (numerically), then
	// a change's events (EventID).
	if p, _ := ParseID("0/10.3.1"); p.Backfill != "" || p.Ordinal != 3 || p.Event != 1 {
		t.Fatalf("ParseID(0/10.3.1) = %+v, want ordinal 3 event 1", p)
	}
	order := []string{"0/10.0", "0/10.2", "0/10.2.1", "0/10.2.2", "0/10.10", "0/10.a.0", "0/10.a.11", "0/10.b.0", "0/11.0", "1/0.0"}
	for i := range order {
		for j := range order {
			p, _ := ParseID(order[i])
			q, _ := ParseID(order[j])
			if got, want := p.Compare(q), boolInt(i > j)-boolInt(i < j); got != want {
				t.Fatalf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCheckOwner(t *testing.T) {
	h, err := CheckOwner("0/10.4", "g", "g")
	if err != nil || !h.OK || h.Pos.String() != "0/10.4" {
		t.Fatalf("own message: %+v %v", h, err)
	}
	if h, err := CheckOwner("0/10.4", "", "g"); err != nil || !h.OK {
		t.Fatalf("message without the group header: %+v %v", h, err)
	}
	if h, err := CheckOwner("101.4", "", "g"); err != nil || h.OK {
		t.Fatalf("old id format: %+v %v (want nothing to resume from)", h, err)
	}
	if _, err := CheckOwner("0/10.4", "other", "g"); !errors.Is(err, ErrShared) {
		t.Fatalf("another group's message: %v", err)
	}
	if _, err := CheckOwner("", "", "g"); !errors.Is(err, ErrShared) {
		t.Fatalf("a message without a pgq id: %v", err)
	}
	m := Message{CommitLSN: 0x10, Ordinal: 4}
	if !h.Covers(&m) {
		t.Fatal("held 0/10.4 does not cover 0/10.4")
	}
	m.Ordinal = 5
	if h.Covers(&m) || (Held{}).Covers(&m) {
		t.Fatal("covers a later message, or the zero Held covers one")
	}
}

// legacyParts journals one transaction of 3 parts of n changes each as
// pgq did before the ordinals were recorded (every part's body has 9
// elements, its ordinals from 0) and decodes them again.
func legacyParts(t *testing.T, n int) []*pgq.Transaction {
	t.Helper()
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}}
	var out []*pgq.Transaction
	for part := range 3 {
		tx := &pgq.Transaction{Xid: 7, CommitLSN: 0x100, EndLSN: 0x110, Part: uint32(part), Final: part == 2}
		for i := range n {
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte{byte('a' + part), byte('0' + i)}}}})
		}
		rec := record.Append(nil, tx)
		if rec[record.HeaderSize] != 0x99 { // fixarray of 9: the old layout
			t.Fatalf("part %d: body array header %#x, want 0x99 (9 elements)", part, rec[record.HeaderSize])
		}
		var got pgq.Transaction
		if err := record.Decode(rec, &got); err != nil {
			t.Fatal(err)
		}
		if got.Ordinal(0) != 0 {
			t.Fatalf("part %d decodes with first ordinal %d, want 0 (the old layout)", part, got.Ordinal(0))
		}
		out = append(out, &got)
	}
	return out
}

// TestLegacyPartsCountAcross: the later parts of a transaction journaled
// in the old layout get ordinals counted across parts, so the message ids
// of the whole transaction are "<commit LSN>.0" to ".8", once each (they
// repeated ".0" to ".2" three times before); a part in the new layout and
// a filtered part keep theirs; a later part seen without its earlier ones
// is reported.
func TestLegacyPartsCountAcross(t *testing.T) {
	var pc partCounter
	var ids []string
	for _, tx := range legacyParts(t, 3) {
		fixed, unknown := pc.fix(tx)
		if unknown {
			t.Fatalf("part %d reported unknown", tx.Part)
		}
		for _, m := range AppendMessages(nil, fixed) {
			ids = append(ids, m.ID)
		}
	}
	want := []string{"0/100.0", "0/100.1", "0/100.2", "0/100.3", "0/100.4", "0/100.5", "0/100.6", "0/100.7", "0/100.8"}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}

	// The new layout: part 1 carries its first ordinal; nothing moves.
	parts := legacyParts(t, 3)
	parts[1].FirstOrdinal, parts[2].FirstOrdinal = 3, 6
	pc = partCounter{}
	for i, tx := range parts {
		if fixed, _ := pc.fix(tx); fixed != tx || fixed.Ordinal(0) != uint32(3*i) {
			t.Fatalf("new layout part %d changed: first ordinal %d", i, fixed.Ordinal(0))
		}
	}

	// A filtered old-layout part (ordinals listed, from 0 in the part)
	// goes on after the previous part's last.
	parts = legacyParts(t, 3)
	parts[0].Ordinals = []uint32{0, 1, 2}
	parts[1].Ordinals = []uint32{0, 1, 2}
	parts[1].Changes[0].Op = pgq.OpUpdate
	pc = partCounter{}
	pc.fix(parts[0])
	fixed, _ := pc.fix(parts[1])
	if got := []uint32{fixed.Ordinal(0), fixed.Ordinal(1), fixed.Ordinal(2)}; !slices.Equal(got, []uint32{3, 4, 5}) {
		t.Fatalf("filtered old part 1: ordinals %v", got)
	}
	if parts[1].Ordinals[0] != 0 {
		t.Fatal("fix changed the caller's transaction")
	}

	// A later part in the old layout without its earlier parts.
	pc = partCounter{}
	if _, unknown := pc.fix(legacyParts(t, 3)[1]); !unknown {
		t.Fatal("a later part without its earlier ones was not reported")
	}
}
