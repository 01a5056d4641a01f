package consumers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// TestWokenFetchSkipAhead: a filtered long poll woken by the registry
// starts collecting at the first part of the transaction that woke it
// (wakeStart), and answers exactly what a cold fetch from its cursor
// answers over the same journal: the same records, the same NextOffset,
// and commits of each offset in between accepted or refused alike (a
// non-final part of a multi-part transaction is refused). The
// transactions it passes over arrive after it registered; in "multi" a
// rejected transaction of two parts is among them, which disables the
// skip; in "max-bytes" the answer is cut by MaxBytes, which counts the
// bytes of the records passed over as a cold collect does. The skip is
// proven taken where it may be by the journal reads the woken fetch
// makes (fewer than the cold one's).
func TestWokenFetchSkipAhead(t *testing.T) {
	for _, c := range []struct {
		name     string
		between  [][]string // transactions appended while the poll waits, rejected
		wake     []string   // the transaction that wakes it (passes: public.t)
		after    [][]string // appended with it, in the same batch
		maxBytes int64
		skips    bool
	}{
		{name: "single", between: [][]string{{"x"}, {"y"}, {"x"}, {"z"}, {"x"}}, wake: []string{"t"}, after: [][]string{{"x"}, {"t"}}, skips: true},
		{name: "multi-part wake", between: [][]string{{"x"}, {"y"}}, wake: []string{"t", "x", "t"}, after: [][]string{{"y"}}, skips: true},
		{name: "multi", between: [][]string{{"x"}, {"x", "y"}, {"z"}}, wake: []string{"t", "t"}, skips: false},
		{name: "max-bytes", between: [][]string{{"x"}, {"x"}, {"x"}, {"x"}}, wake: []string{"t"}, after: [][]string{{"t"}, {"t"}}, maxBytes: 150, skips: true},
	} {
		t.Run(c.name, func(t *testing.T) { testWokenSkip(t, c.between, c.wake, c.after, c.maxBytes, c.skips) })
	}
}

func testWokenSkip(t *testing.T, between [][]string, wake []string, after [][]string, maxBytes int64, skips bool) {
	m, j := wakeEnv(t, true)
	ctx := context.Background()
	tables := []string{"public.t"}
	if _, err := m.Create(ctx, CreateRequest{Name: "w", Tables: tables, From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	appendTx(t, m, "t")
	appendTx(t, m, "x", "y") // an open transaction's parts are read before the wait too
	res, err := m.Fetch(ctx, "w", FetchRequest{Member: "m"})
	if err != nil || len(res.Transactions) != 1 {
		t.Fatalf("first fetch: %v, %d records", err, len(res.Transactions))
	}
	from := res.NextOffset

	type answer struct {
		res *FetchResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := m.Fetch(ctx, "w", FetchRequest{Member: "m", Wait: time.Minute, MaxBytes: maxBytes})
		got <- answer{r, err}
	}()
	settle(t, m, j, 1) // registered
	for _, parts := range between {
		appendTx(t, m, parts...)
	}
	settle(t, m, j, 1) // still waiting: none of them passes
	reads := m.j.Reads()
	appendBatch(t, m, append([][]string{wake}, after...)) // all journaled before the wake
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	wokenReads := m.j.Reads() - reads

	// The cold fetch: a new group from the same cursor, no wait.
	if _, err := m.Create(ctx, CreateRequest{Name: "c", Tables: tables, From: fmt.Sprintf("offset:%d", from)}); err != nil {
		t.Fatal(err)
	}
	reads = m.j.Reads()
	cold, err := m.Fetch(ctx, "c", FetchRequest{Member: "m", MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	coldReads := m.j.Reads() - reads
	if len(cold.Transactions) == 0 {
		t.Fatal("the cold fetch delivered nothing")
	}
	if !slices.Equal(txOffsets(a.res.Transactions), txOffsets(cold.Transactions)) || a.res.NextOffset != cold.NextOffset {
		t.Fatalf("woken fetch: %v, next %d; cold fetch: %v, next %d",
			txOffsets(a.res.Transactions), a.res.NextOffset, txOffsets(cold.Transactions), cold.NextOffset)
	}
	for i := range a.res.Transactions {
		if w, c := a.res.Transactions[i], cold.Transactions[i]; w.Part != c.Part || len(w.Changes) != len(c.Changes) {
			t.Fatalf("record %d: woken part %d with %d changes, cold part %d with %d", w.Offset, w.Part, len(w.Changes), c.Part, len(c.Changes))
		}
	}
	if skips != (wokenReads < coldReads) {
		t.Errorf("journal reads: woken %d, cold %d; want the skip taken: %v", wokenReads, coldReads, skips)
	}
	for off := from; off < cold.NextOffset; off++ {
		_, errW := m.Commit(ctx, "w", "m", off, 0)
		_, errC := m.Commit(ctx, "c", "m", off, 0)
		if errors.Is(errW, ErrInvalidCommit) != errors.Is(errC, ErrInvalidCommit) || (errW == nil) != (errC == nil) {
			t.Fatalf("commit %d: woken group %v, cold group %v", off, errW, errC)
		}
	}
}

func txOffsets(txs []*pgq.Transaction) []pgq.Offset {
	out := make([]pgq.Offset, len(txs))
	for i, tx := range txs {
		out[i] = tx.Offset
	}
	return out
}

// appendBatch appends transactions (wakeTx: a part per table) in one
// batch and hands it to m.Appended with its index entries, as the
// server's after-append hook does.
func appendBatch(t *testing.T, m *Manager, txs [][]string) {
	t.Helper()
	var all []*pgq.Transaction
	for _, parts := range txs {
		all = append(all, wakeTx(parts...)...)
	}
	recs := journal.Records(all)
	if err := m.j.AppendRecords(recs); err != nil {
		t.Fatal(err)
	}
	entries := make([]index.Entry, len(recs))
	for i, r := range recs {
		entries[i] = index.EntryOf(all[i], r.Bytes, len(all[i].Changes))
	}
	m.Appended(recs, entries)
}
