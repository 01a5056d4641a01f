package record

import (
	"bytes"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestOrdinals: a record carries its changes' ordinals within the whole
// transaction (a later part's first, a filtered record's list), through
// Append/Decode, Restamp, Compact/Expand and DecodeBody, while a record
// whose ordinals are 0, 1, 2, ... keeps its 9 or 10 elements byte for
// byte.
func TestOrdinals(t *testing.T) {
	later := benchTx(3)
	later.Part, later.FirstOrdinal = 2, 7
	filtered := benchTx(3)
	filtered.FirstOrdinal, filtered.Ordinals = 1, []uint32{1, 4, 9}
	bfLater := benchTx(2)
	bfLater.Backfill, bfLater.FirstOrdinal = "bf-1", 300
	var c catalog
	for name, tc := range map[string]struct {
		tx   *pgq.Transaction
		want []uint32
	}{
		"later part":           {later, []uint32{7, 8, 9}},
		"filtered":             {filtered, []uint32{1, 4, 9}},
		"backfill and ordinal": {bfLater, []uint32{300, 301}},
	} {
		rec := Append(nil, tc.tx)
		var got pgq.Transaction
		if err := Decode(rec, &got); err != nil {
			t.Fatalf("%s: Decode: %v", name, err)
		}
		if o := ordinalsOf(&got); !slices.Equal(o, tc.want) {
			t.Fatalf("%s: ordinals %v, want %v", name, o, tc.want)
		}
		if got.Backfill != tc.tx.Backfill {
			t.Fatalf("%s: backfill %q, want %q", name, got.Backfill, tc.tx.Backfill)
		}
		comp, err := Compact(nil, rec, c.intern)
		if err != nil {
			t.Fatalf("%s: Compact: %v", name, err)
		}
		back, err := Expand(nil, comp, c.lookup)
		if err != nil || !bytes.Equal(back, rec) {
			t.Fatalf("%s: Expand(Compact) = %v, differs: %v", name, err, !bytes.Equal(back, rec))
		}
		var body pgq.Transaction
		if err := DecodeBody(rec[HeaderSize:], &body); err != nil || !slices.Equal(ordinalsOf(&body), tc.want) {
			t.Fatalf("%s: DecodeBody = %v, ordinals %v", name, err, ordinalsOf(&body))
		}
	}

	// Ordinals 0, 1, 2, ...: nothing is added.
	plain := benchTx(2)
	rec := Append(nil, plain)
	if rec[HeaderSize] != 0x99 {
		t.Fatalf("a first part's body array header is %#x, want 9 elements", rec[HeaderSize])
	}
	plain.Backfill = "bf"
	if rec := Append(nil, plain); rec[HeaderSize] != 0x9a {
		t.Fatalf("a backfill record's body array header is %#x, want 10 elements", rec[HeaderSize])
	}

	// A spilled chunk (ordinals from 0) restamped as a later part gets the
	// part's first ordinal; restamping it again keeps it.
	chunk := Append(nil, benchTx(2))
	hdr := &pgq.Transaction{Xid: 9, CommitLSN: 100, EndLSN: 120, Part: 1, FirstOrdinal: 5}
	re, n, err := Restamp(nil, chunk, hdr)
	if err != nil || n != 2 {
		t.Fatalf("Restamp = %d, %v", n, err)
	}
	hdr.Final, hdr.FirstOrdinal = true, 0
	re2, _, err := Restamp(nil, re, hdr)
	if err != nil {
		t.Fatalf("Restamp again: %v", err)
	}
	for _, r := range [][]byte{re, re2} {
		var got pgq.Transaction
		if err := Decode(r, &got); err != nil || !slices.Equal(ordinalsOf(&got), []uint32{5, 6}) || got.Part != 1 || got.Backfill != "" {
			t.Fatalf("restamped chunk: %v, ordinals %v part %d backfill %q", err, ordinalsOf(&got), got.Part, got.Backfill)
		}
	}

	// A list that does not match the changes is corrupt, not a panic.
	bad := benchTx(2)
	bad.Ordinals = []uint32{1}
	var got pgq.Transaction
	if err := Decode(Append(nil, bad), &got); err == nil {
		t.Fatal("Decode of 1 ordinal for 2 changes succeeded")
	}
}

func ordinalsOf(tx *pgq.Transaction) []uint32 {
	out := make([]uint32, len(tx.Changes))
	for i := range out {
		out[i] = tx.Ordinal(i)
	}
	return out
}
