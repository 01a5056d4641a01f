package consumers

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// wakeEnv is a Manager over a fresh journal (fsynced) and index.
func wakeEnv(t *testing.T) (*Manager, *journal.Journal) {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	ix, err := index.Open(index.Options{Dir: filepath.Join(dir, "index")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	m, err := NewManager(ManagerOptions{Journal: j, Index: ix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, j
}

var wakeXid uint32

// appendTx appends one transaction in parts, one insert into each table
// of parts per part.
func appendTx(t *testing.T, j *journal.Journal, parts ...string) {
	t.Helper()
	wakeXid++
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	lsn := pgq.LSN(wakeXid) * 100
	for p, table := range parts {
		tx := &pgq.Transaction{Xid: wakeXid, CommitLSN: lsn, EndLSN: lsn + 10, CommitTime: time.Now().UTC().Truncate(time.Microsecond),
			Part: uint32(p), Final: p == len(parts)-1, FirstOrdinal: uint32(p),
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: table, Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}}
		if err := j.Append([]*pgq.Transaction{tx}); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits until the registry has read the whole journal with want
// waiters registered.
func settle(t *testing.T, m *Manager, j *journal.Journal, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m.wk.mu.Lock()
		n, processed := m.wk.n, m.wk.processed
		m.wk.mu.Unlock()
		if n == want && (n == 0 || processed == j.LastOffset()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry: %d waiters (want %d), read up to %d of %d", n, want, processed, j.LastOffset())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWakeOnlyMatchingWaiters: with 1,000 filtered long polls waiting (990
// on a table each, 10 on a glob), transactions none of them passes wake
// none; a transaction wakes exactly the polls its tables pass, a
// multi-part one at its final part, and each woken poll gets its data.
func TestWakeOnlyMatchingWaiters(t *testing.T) {
	m, j := wakeEnv(t)
	ctx := context.Background()
	const exact, globs = 990, 10
	name := func(i int) string { return fmt.Sprintf("g%04d", i) }
	for i := range exact + globs {
		tables := []string{fmt.Sprintf("public.t%d", i)}
		if i >= exact {
			tables = []string{"public.x*"}
		}
		if _, err := m.Create(ctx, CreateRequest{Name: name(i), Tables: tables}); err != nil {
			t.Fatal(err)
		}
	}
	appendTx(t, j, "none") // the journal is not empty when the polls start
	type answer struct {
		group string
		recs  int
		err   error
	}
	answers := make(chan answer, exact+globs)
	var wg sync.WaitGroup
	for i := range exact + globs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Fetch(ctx, name(i), FetchRequest{Member: "m", Wait: time.Minute})
			n := 0
			if res != nil {
				n = len(res.Transactions)
			}
			answers <- answer{name(i), n, err}
		}()
	}
	settle(t, m, j, exact+globs)

	for range 200 {
		appendTx(t, j, "none")
	}
	appendTx(t, j, "t5", "none", "t6") // parts of other tables
	settle(t, m, j, exact+globs-2)
	if w := m.wk.Wakes.Load(); w != 2 {
		t.Fatalf("after transactions on unwatched tables and t5+t6: %d wake-ups, want 2", w)
	}
	got := map[string]answer{}
	for range 2 {
		a := <-answers
		got[a.group] = a
	}
	for _, g := range []string{name(5), name(6)} {
		if a := got[g]; a.err != nil || a.recs != 1 {
			t.Fatalf("group %s answered %+v, want the part of its table", g, a)
		}
	}

	// A multi-part transaction wakes at its final part only.
	appendTx(t, j, "t7", "none", "none")
	settle(t, m, j, exact+globs-3)
	if a := <-answers; a.group != name(7) || a.recs != 1 || a.err != nil {
		t.Fatalf("after a transaction on t7: %+v", a)
	}
	appendTx(t, j, "x1")
	settle(t, m, j, exact-3)
	if w := m.wk.Wakes.Load(); w != 3+globs {
		t.Fatalf("after a transaction on x1: %d wake-ups, want %d", w, 3+globs)
	}
	for range globs {
		if a := <-answers; a.recs != 1 || a.err != nil {
			t.Fatalf("glob group answered %+v, want the x1 transaction", a)
		}
	}
	select {
	case a := <-answers:
		t.Fatalf("group %s answered with nothing for it: %+v", a.group, a)
	default:
	}
	m.Close()
	wg.Wait()
}

// TestWakeLateRegistration: a poll that registers after the registry read
// a transaction it passes (its fetch looked before the append) is woken at
// once; one that passes none of them waits.
func TestWakeLateRegistration(t *testing.T) {
	m, j := wakeEnv(t)
	appendTx(t, j, "a")
	seen := j.LastOffset()
	other := &Filter{Tables: []string{"public.z"}}
	w0 := m.wk.register(other, seen) // keeps the registry reading
	defer m.wk.unregister(w0)
	appendTx(t, j, "b", "c")
	appendTx(t, j, "d")
	settle(t, m, j, 1)

	for _, c := range []struct {
		table string
		woken bool
	}{{"public.c", true}, {"public.d", true}, {"public.a", false}, {"public.*", true}, {"other.b", false}} {
		f := Filter{Tables: []string{c.table}}.compiled()
		w := m.wk.register(&f, seen)
		select {
		case <-w.ch:
			if !c.woken {
				t.Errorf("%s: woken by transactions it does not pass", c.table)
			}
		default:
			if c.woken {
				t.Errorf("%s: not woken by a transaction read before it registered", c.table)
			}
		}
		m.wk.unregister(w)
	}
	select {
	case <-w0.ch:
		t.Fatal("public.z woken")
	default:
	}
}
