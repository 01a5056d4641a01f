package consumers

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
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
