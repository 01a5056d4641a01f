package feedback

import (
	"math/rand"
	"sync"
	"testing"

	"github.com/pgq-dev/pgq"
)

func TestNeverPastDurableWhilePending(t *testing.T) {
	tr := NewTracker(100)
	tr.Begin()
	tr.ServerWALEnd(500)
	if got := tr.Confirmable(); got != 100 {
		t.Fatalf("inside a transaction: confirmable %v, want 0/64", got)
	}
	tr.Submitted(200)
	tr.ServerWALEnd(600)
	if got := tr.Confirmable(); got != 100 {
		t.Fatalf("submitted but not durable: confirmable %v, want 0/64", got)
	}
	tr.Skipped(300) // empty tx after a pending one must wait too
	if got := tr.Confirmable(); got != 100 {
		t.Fatalf("empty tx behind a pending one: confirmable %v, want 0/64", got)
	}
	tr.Durable(200)
	if got := tr.Confirmable(); got != 600 {
		t.Fatalf("all durable and idle: confirmable %v, want WAL end 0/258", got)
	}
}

func TestEmptyTransactionsAdvance(t *testing.T) {
	tr := NewTracker(0)
	tr.Begin()
	tr.Skipped(42)
	if got := tr.Confirmable(); got != 42 {
		t.Fatalf("confirmable %v, want 0/2A", got)
	}
}

func TestOpenStreamHoldsWALEnd(t *testing.T) {
	tr := NewTracker(10)
	tr.StreamStarted()
	tr.ServerWALEnd(1000)
	if got := tr.Confirmable(); got != 10 {
		t.Fatalf("open stream: confirmable %v, want 0/A", got)
	}
	tr.StreamEnded()
	if got := tr.Confirmable(); got != 1000 {
		t.Fatalf("stream closed: confirmable %v, want 0/3E8", got)
	}
}

func TestNeverBackwards(t *testing.T) {
	tr := NewTracker(0)
	tr.ServerWALEnd(1000)
	if got := tr.Confirmable(); got != 1000 {
		t.Fatalf("got %v", got)
	}
	tr.Reset()
	tr.Submitted(2000)
	if got := tr.Confirmable(); got != 1000 {
		t.Fatalf("went backwards or ahead: %v", got)
	}
}

// TestConcurrentInvariant drives the tracker from an ingest-like goroutine
// and a committer-like goroutine and checks, on every read, that the
// confirmable LSN never reaches a transaction that is not yet durable.
func TestConcurrentInvariant(t *testing.T) {
	tr := NewTracker(0)
	var mu sync.Mutex
	pending := map[pgq.LSN]bool{} // submitted, not yet durable
	subs := make(chan pgq.LSN, 1024)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // committer: makes submissions durable in order
		defer wg.Done()
		for end := range subs {
			mu.Lock()
			tr.Durable(end)
			delete(pending, end)
			mu.Unlock()
		}
	}()
	var lsn pgq.LSN = 1
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		tr.Begin()
		tr.ServerWALEnd(lsn + 50)
		lsn += pgq.LSN(r.Intn(100) + 1)
		mu.Lock()
		minPending := pgq.LSN(1<<64 - 1)
		for p := range pending {
			minPending = min(minPending, p)
		}
		c := tr.Confirmable()
		mu.Unlock()
		if c >= minPending {
			t.Fatalf("confirmable %v reached non-durable transaction ending %v", c, minPending)
		}
		if r.Intn(4) == 0 {
			tr.Skipped(lsn)
		} else {
			mu.Lock()
			pending[lsn] = true
			mu.Unlock()
			tr.Submitted(lsn)
			subs <- lsn
		}
	}
	close(subs)
	wg.Wait()
	if got := tr.Confirmable(); got < lsn {
		t.Fatalf("final confirmable %v, want at least %v", got, lsn)
	}
}
