package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
)

// TestResendDropped: PostgreSQL re-sending transactions the journal already
// holds (end LSN at or below the newest journaled one, e.g. after a crash
// between fsync and confirmation) adds no record, yet lets the slot
// advance; later transactions are journaled once each. Real journal, real
// fsync; the replication connection is not involved.
func TestResendDropped(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	row := []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t",
		Columns: []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}
	tx := func(end pgq.LSN) *pgq.Transaction {
		return &pgq.Transaction{Xid: uint32(end), CommitLSN: end - 8, EndLSN: end, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true, Changes: row}
	}
	// A previous run journaled the transactions ending at 100 and 200.
	if err := j.Append([]*pgq.Transaction{tx(100), tx(200)}); err != nil {
		t.Fatal(err)
	}
	c := journal.NewCommitter(j, journal.CommitterOptions{})
	in, err := New(Options{PGURL: "postgres://x", Slot: "s", Publication: "p", Journal: j, Committer: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	s := &session{in: in}
	for _, end := range []pgq.LSN{100, 200, 300, 200, 400} { // 100, 200 re-sent; 200 again after 300
		in.tracker.Begin()
		if err := s.submit(ctx, tx(end), 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var ends []pgq.LSN
	for off := j.FirstOffset(); off <= j.LastOffset(); off++ {
		rec, err := j.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, rec.EndLSN)
	}
	if len(ends) != 4 || ends[0] != 100 || ends[1] != 200 || ends[2] != 300 || ends[3] != 400 {
		t.Fatalf("journal end LSNs %v, want [100 200 300 400]", ends)
	}
	if got := testutil.ToFloat64(in.o.Metrics.TxSkipped.WithLabelValues("duplicate")); got != 3 {
		t.Fatalf("duplicates skipped = %v, want 3", got)
	}
	if got := in.tracker.Confirmable(); got != 400 {
		t.Fatalf("confirmable %v, want 0/190", got)
	}
}
