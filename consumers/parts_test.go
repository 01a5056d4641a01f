package consumers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// partsJournal writes: tx A (one record), tx B in 6 parts, tx C (one
// record), with segments small enough that a segment starts inside B.
func partsJournal(t *testing.T) (*Manager, *journal.Journal) {
	t.Helper()
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "pad", TypeOID: 25}}
	row := func(i int) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{
			{Kind: pgq.ValueText, Data: []byte(fmt.Sprint(i))}, {Kind: pgq.ValueText, Data: make([]byte, 150)}}}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []*pgq.Transaction
	batch = append(batch, &pgq.Transaction{Xid: 1, CommitLSN: 100, EndLSN: 110, CommitTime: base, Final: true, Changes: []pgq.Change{row(0)}})
	for p := 0; p < 6; p++ {
		batch = append(batch, &pgq.Transaction{Xid: 2, CommitLSN: 200, EndLSN: 210, CommitTime: base.Add(time.Second),
			Part: uint32(p), Final: p == 5, Changes: []pgq.Change{row(10 + 2*p), row(11 + 2*p)}})
	}
	batch = append(batch, &pgq.Transaction{Xid: 3, CommitLSN: 300, EndLSN: 310, CommitTime: base.Add(2 * time.Second), Final: true, Changes: []pgq.Change{row(99)}})
	return managerOver(t, journal.Options{SegmentSize: 600, NoSync: true}, index.Options{}, ManagerOptions{}, func(j *journal.Journal) error {
		for _, tx := range batch {
			if err := j.Append([]*pgq.Transaction{tx}); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestMultiPartDelivery: a fetch hands out a multi-part transaction whole,
// even past max, and a commit inside it is rejected.
func TestMultiPartDelivery(t *testing.T) {
	m, _ := partsJournal(t)
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Fetch(ctx, "g", FetchRequest{Member: "a", Max: 1})
	if err != nil || len(res.Transactions) != 1 || res.Transactions[0].Xid != 1 {
		t.Fatalf("first fetch: %v %+v", err, res)
	}
	res, err = m.Fetch(ctx, "g", FetchRequest{Member: "a", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Transactions) != 6 || res.NextOffset != 8 {
		t.Fatalf("second fetch: %d records, next %d; want the 6 parts of xid 2, next 8", len(res.Transactions), res.NextOffset)
	}
	for p, tx := range res.Transactions {
		if tx.Xid != 2 || tx.Part != uint32(p) || tx.Final != (p == 5) {
			t.Fatalf("record %d: xid %d part %d final %v", p, tx.Xid, tx.Part, tx.Final)
		}
	}
	if _, err := m.Commit(ctx, "g", "a", 4, 0); !errors.Is(err, ErrInvalidCommit) {
		t.Fatalf("commit inside a multi-part transaction: %v, want ErrInvalidCommit", err)
	}
	if _, err := m.Commit(ctx, "g", "a", 7, 0); err != nil {
		t.Fatalf("commit at the final part: %v", err)
	}
}

// TestRetentionKeepsWholeTransactions: a size cap whose segment boundary
// falls inside a multi-part transaction keeps it from its part 0.
func TestRetentionKeepsWholeTransactions(t *testing.T) {
	m, j := partsJournal(t)
	segs, err := j.Segments()
	if err != nil {
		t.Fatal(err)
	}
	// Cap the size at the bytes from the first segment that starts inside
	// the transaction (after part 0, offset 2) to the end.
	capBytes := int64(0)
	for i, s := range segs {
		if s.FirstOffset > 2 && s.FirstOffset <= 7 {
			for _, rest := range segs[i:] {
				capBytes += rest.Bytes
			}
			break
		}
	}
	if capBytes == 0 {
		t.Fatalf("test setup: no segment starts inside the multi-part transaction: %+v", segs)
	}
	res, err := m.Retain(context.Background(), RetentionOptions{MaxBytes: capBytes})
	if err != nil {
		t.Fatal(err)
	}
	if res.Target <= 2 || res.Target > 7 {
		t.Fatalf("test setup: retention target %d is not inside the transaction", res.Target)
	}
	first := j.FirstOffset()
	tx, err := j.Read(first)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Part != 0 {
		t.Fatalf("journal now starts at offset %d, part %d of xid %d: inside a transaction", first, tx.Part, tx.Xid)
	}
	if first == 1 {
		t.Fatal("the size cap dropped nothing")
	}
}
