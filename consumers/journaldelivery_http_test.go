package consumers_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/internal/serverparts"
)

// TestJournalToDeliveryOverHTTP: a running pgq's /metrics exports
// pgq_journal_to_delivery_seconds, and a transaction PostgreSQL commits,
// pgq journals and an HTTP fetch receives a while later is observed
// once, with at least the time it lay in the journal.
func TestJournalToDeliveryOverHTTP(t *testing.T) {
	e := start(t, nil)
	ctx := t.Context()
	metric := func(name string) float64 {
		code, body := e.call(t, "GET", "/metrics", "")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatalf("%s not exported", name)
		return 0
	}
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "jd", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	n0, s0 := metric("pgq_journal_to_delivery_seconds_count"), metric("pgq_journal_to_delivery_seconds_sum")
	j := serverparts.Of(e.S).Journal
	last := j.LastOffset()
	e.DB.Exec(t, "INSERT INTO t (v) VALUES ('journaled')")
	deadline := time.Now().Add(30 * time.Second)
	for j.LastOffset() == last { // journaled
		if time.Now().After(deadline) {
			t.Fatal("not journaled within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	const lay = 150 * time.Millisecond
	time.Sleep(lay)
	res, err := e.C.Fetch(ctx, "jd", client.FetchRequest{Member: "m", Wait: 5 * time.Second})
	if err != nil || len(res.Transactions) != 1 {
		t.Fatalf("fetch: %v, %d transactions", err, len(res.Transactions))
	}
	n1, s1 := metric("pgq_journal_to_delivery_seconds_count"), metric("pgq_journal_to_delivery_seconds_sum")
	if n1-n0 != 1 {
		t.Fatalf("%v observations for one transaction delivered", n1-n0)
	}
	if d := s1 - s0; d < lay.Seconds() || d > 30 {
		t.Fatalf("observed %.3fs, want at least the %s it lay in the journal", d, lay)
	}
}
