package consumers

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// journalDeliveryOf returns the count and sum of
// pgq_journal_to_delivery_seconds.
func journalDeliveryOf(t *testing.T, m *Manager) (uint64, float64) {
	t.Helper()
	var d dto.Metric
	if err := m.journalDelivery.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
}

// TestJournalToDeliveryHistogram: pgq_journal_to_delivery_seconds
// observes journaling (Appended, the batch's fsync) → the answer handing
// the transaction out: once per transaction of an exclusive answer (at
// its final part, so a two-part transaction counts once), once per
// message of a shared group's first delivery, with the time the record
// waited in the journal, and nothing for an answer that delivers nothing.
func TestJournalToDeliveryHistogram(t *testing.T) {
	m, _ := wakeEnv(t, true)
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "ex"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, CreateRequest{Name: "sh", Mode: "shared"}); err != nil {
		t.Fatal(err)
	}
	appendTx(t, m, "a")
	appendTx(t, m, "b", "c") // one transaction in two parts
	const waited = 40 * time.Millisecond
	time.Sleep(waited)
	start := time.Now()
	res, err := m.Fetch(ctx, "ex", FetchRequest{Member: "m"})
	if err != nil || len(res.Transactions) != 3 {
		t.Fatalf("fetch: %v, %d records", err, len(res.Transactions))
	}
	bound := time.Since(start) + waited
	n, sum := journalDeliveryOf(t, m)
	if n != 2 {
		t.Fatalf("%d observations after an answer of two transactions, want 2", n)
	}
	if sum < 2*waited.Seconds() || sum > 2*(bound+time.Second).Seconds() {
		t.Fatalf("sum %.3fs, want about 2 × %s", sum, waited)
	}
	if _, err := m.Fetch(ctx, "ex", FetchRequest{Member: "m", Wait: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if n2, _ := journalDeliveryOf(t, m); n2 != n {
		t.Fatalf("an empty answer observed %d", n2-n)
	}
	msgs, err := m.FetchShared(ctx, "sh", FetchRequest{Member: "m"})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("shared fetch: %v, %d messages", err, len(msgs))
	}
	if n3, sum3 := journalDeliveryOf(t, m); n3 != n+3 || sum3-sum < 3*waited.Seconds() {
		t.Fatalf("shared: %d observations (want 3), sum %.3fs", n3-n, sum3-sum)
	}
}

// noteRange notes the records from..to, each of size bytes, as one
// batch with no index entries.
func noteRange(jb *journaledBytes, from, to pgq.Offset, size int) {
	var batch []*journal.Record
	for off := from; off <= to; off++ {
		batch = append(batch, &journal.Record{Tx: &pgq.Transaction{Offset: off}, Bytes: size})
	}
	jb.note(batch, nil)
}

// TestJournaledBytesRing: the bytes between two offsets are known only
// while the ring holds both ends, and count an index entry's size where
// the batch came with one.
func TestJournaledBytesRing(t *testing.T) {
	jb := new(journaledBytes)
	if _, ok := jb.between(1, 1); ok {
		t.Fatal("an empty ring knows offset 1")
	}
	noteRange(jb, 5, 9, 10)
	jb.note([]*journal.Record{{Tx: &pgq.Transaction{Offset: 10}, Bytes: 999}},
		[]index.Entry{{Offset: 10, Bytes: 7}}) // the index entry's size counts
	for _, c := range []struct {
		from, to pgq.Offset
		n        int64
		ok       bool
	}{{6, 10, 47, true}, {6, 9, 40, true}, {7, 7, 10, true}, {5, 9, 0, false}, {6, 11, 0, false}} {
		if n, ok := jb.between(c.from, c.to); n != c.n || ok != c.ok {
			t.Errorf("bytes %d..%d: %d, %v; want %d, %v", c.from, c.to, n, ok, c.n, c.ok)
		}
	}
	noteRange(jb, 11, 10+journaledRing, 1) // overwrites 5..10
	if _, ok := jb.between(7, 20); ok {
		t.Error("bytes from an overwritten offset known")
	}
	if n, ok := jb.between(100, 199); !ok || n != 100 {
		t.Errorf("bytes 100..199: %d, %v; want 100", n, ok)
	}
	noteRange(jb, 5, 5, 1) // not dense: starts over
	if _, ok := jb.between(100, 199); ok {
		t.Error("bytes known across a restart")
	}
}
