package ingest

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
)

// TestCommitToDurableAtFsync: pgq_commit_to_durable_seconds measures to
// the fsync of the transaction's record (the time the journal noted for
// it), not to ingest's confirmation hook, which runs after the batch's
// durable-point marker. Real journal, real fsync.
func TestCommitToDurableAtFsync(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := journal.NewCommitter(j, journal.CommitterOptions{})
	in, err := New(Options{PGURL: "postgres://x", Slot: "s", Publication: "p", Journal: j, Committer: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	commit := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	tx := &pgq.Transaction{Xid: 7, CommitLSN: 92, EndLSN: 100, CommitTime: commit, Final: true,
		Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t",
			Columns: []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}}
	s := &session{in: in}
	in.tracker.Begin()
	if err := s.submit(ctx, tx, 10); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := in.o.Metrics.CommitToDurable.Write(&m); err != nil {
			t.Fatal(err)
		}
		if m.GetHistogram().GetSampleCount() == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 1 {
		t.Fatalf("commit_to_durable observed %d times, want 1", n)
	}
	at, ok := j.WrittenAt(j.LastOffset())
	if !ok {
		t.Fatal("the journal knows no write time of the record it just appended")
	}
	if got, want := m.GetHistogram().GetSampleSum(), at.Sub(commit).Seconds(); got != want {
		t.Fatalf("commit_to_durable = %.9f s, want %.9f s (commit to the record's fsync)", got, want)
	}
}
