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

// wakeEnv is a Manager over a fresh journal (fsynced) and index; fed:
// with ManagerOptions.WakeFromAppends, appendTx then feeding it as the
// server's after-append hook does.
func wakeEnv(t *testing.T, fed bool) (*Manager, *journal.Journal) {
	t.Helper()
	return managerOver(t, journal.Options{}, index.Options{}, ManagerOptions{WakeFromAppends: fed}, nil)
}

// forWakeSources runs test with the registry reading the journal and
// with it fed by Appended.
func forWakeSources(t *testing.T, test func(t *testing.T, fed bool)) {
	for _, fed := range []bool{false, true} {
		t.Run(map[bool]string{false: "read", true: "fed"}[fed], func(t *testing.T) { test(t, fed) })
	}
}

var wakeXid uint32

// appendTx appends one transaction in parts (wakeTx), each part alone,
// and hands each to m.Appended with its index entry, as the server's
// after-append hook does.
func appendTx(t *testing.T, m *Manager, parts ...string) {
	t.Helper()
	for _, tx := range wakeTx(parts...) {
		recs := journal.Records([]*pgq.Transaction{tx})
		if err := m.j.AppendRecords(recs); err != nil {
			t.Fatal(err)
		}
		m.Appended(recs, []index.Entry{index.EntryOf(tx, recs[0].Bytes, len(tx.Changes))})
	}
}

// wakeTx returns the parts of a new transaction: one insert into each
// table of parts per part.
func wakeTx(parts ...string) []*pgq.Transaction {
	wakeXid++
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	lsn := pgq.LSN(wakeXid) * 100
	var txs []*pgq.Transaction
	for p, table := range parts {
		txs = append(txs, &pgq.Transaction{Xid: wakeXid, CommitLSN: lsn, EndLSN: lsn + 10, CommitTime: time.Now().UTC().Truncate(time.Microsecond),
			Part: uint32(p), Final: p == len(parts)-1, FirstOrdinal: uint32(p),
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: table, Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}})
	}
	return txs
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
func TestWakeOnlyMatchingWaiters(t *testing.T) { forWakeSources(t, testWakeOnlyMatchingWaiters) }

func testWakeOnlyMatchingWaiters(t *testing.T, fed bool) {
	m, j := wakeEnv(t, fed)
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
	appendTx(t, m, "none") // the journal is not empty when the polls start
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
		appendTx(t, m, "none")
	}
	appendTx(t, m, "t5", "none", "t6") // parts of other tables
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
	appendTx(t, m, "t7", "none", "none")
	settle(t, m, j, exact+globs-3)
	if a := <-answers; a.group != name(7) || a.recs != 1 || a.err != nil {
		t.Fatalf("after a transaction on t7: %+v", a)
	}
	appendTx(t, m, "x1")
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
func TestWakeLateRegistration(t *testing.T) { forWakeSources(t, testWakeLateRegistration) }

func testWakeLateRegistration(t *testing.T, fed bool) {
	m, j := wakeEnv(t, fed)
	appendTx(t, m, "a")
	seen := j.LastOffset()
	other := &Filter{Tables: []string{"public.z"}}
	w0 := m.wk.register(other, seen) // keeps the registry reading
	defer m.wk.unregister(w0)
	appendTx(t, m, "b", "c")
	appendTx(t, m, "d")
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

// TestWakeFedReadsNoRecord: a fed registry takes a record's subjects from
// the index entry it is handed, never from the record: an entry naming
// t5 for a record on another table wakes t5's poll, one naming another
// table for a record on t6 does not wake t6's, and an unknown set wakes
// every poll.
func TestWakeFedReadsNoRecord(t *testing.T) {
	m, j := wakeEnv(t, true)
	appendTx(t, m, "none")
	seen := j.LastOffset()
	register := func(table string) *waiter {
		f := Filter{Tables: []string{table}}.compiled()
		w := m.wk.register(&f, seen)
		t.Cleanup(func() { m.wk.unregister(w) })
		return w
	}
	t5, t6 := register("public.t5"), register("public.t6")
	woken := func(w *waiter) bool {
		select {
		case <-w.ch:
			return true
		default:
			return false
		}
	}
	feed := func(table string, claimed index.SubjectSet) {
		wakeXid++
		lsn := pgq.LSN(wakeXid) * 100
		tx := &pgq.Transaction{Xid: wakeXid, CommitLSN: lsn, EndLSN: lsn + 10, Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: table, Columns: []pgq.Column{{Name: "id", TypeOID: 23, Key: true}},
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}}
		recs := journal.Records([]*pgq.Transaction{tx})
		if err := j.AppendRecords(recs); err != nil {
			t.Fatal(err)
		}
		e := index.EntryOf(tx, recs[0].Bytes, 1)
		e.Subjects = claimed
		m.Appended(recs, []index.Entry{e})
	}
	feed("t6", index.NewSubjectSet([]index.Subject{{Op: pgq.OpInsert, Schema: "public", Table: "other"}}))
	if woken(t5) || woken(t6) {
		t.Fatal("a record whose entry names another table woke a poll: the record was read")
	}
	feed("none", index.NewSubjectSet([]index.Subject{{Op: pgq.OpInsert, Schema: "public", Table: "t5"}}))
	if !woken(t5) || woken(t6) {
		t.Fatalf("entry naming t5: t5 woken %v, t6 woken %v; want only t5", woken(t5), woken(t6))
	}
	feed("none", "")
	if !woken(t6) {
		t.Fatal("a record of unknown subjects did not wake t6")
	}
}

// BenchmarkWakeFiltered is the wakers registry's cost per journaled
// transaction with 1,000 filtered long polls waiting (990 on a literal
// table each, 10 on a glob) and transactions none of them passes: the
// registry reading and decoding each record (path=read, the Manager
// without WakeFromAppends) against it taking the subjects from the index
// entry the after-append hook made (path=fed). The records are appended
// before the timer starts; each iteration takes one in.
func BenchmarkWakeFiltered(b *testing.B) {
	for _, fed := range []bool{false, true} {
		b.Run("path="+map[bool]string{false: "read", true: "fed"}[fed], func(b *testing.B) {
			benchWake(b, fed)
		})
	}
}

func benchWake(b *testing.B, fed bool) {
	dir := b.TempDir()
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal"), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	const records = 4096
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "note", TypeOID: 25}}
	var recs []*journal.Record
	for i := range records {
		lsn := pgq.LSN(i+1) * 100
		tx := &pgq.Transaction{Xid: uint32(i + 1), CommitLSN: lsn, EndLSN: lsn + 10, Final: true}
		for k := range 3 {
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "unwatched", Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: fmt.Appendf(nil, "%d", k)}, {Kind: pgq.ValueText, Data: []byte("a small transaction's row")}}})
		}
		recs = append(recs, &journal.Record{Tx: tx})
	}
	if err := j.AppendRecords(recs); err != nil {
		b.Fatal(err)
	}
	entries := make([]index.Entry, len(recs))
	for i, r := range recs {
		entries[i] = index.EntryOf(r.Tx, r.Bytes, len(r.Tx.Changes))
	}
	wk := newWakers(j, fed, make(chan struct{})) // its goroutine is not started: the loop drives it
	for i := range 1000 {
		f := Filter{Tables: []string{fmt.Sprintf("public.t%d", i)}}
		if i >= 990 {
			f.Tables = []string{"public.x*"}
		}
		f = f.compiled()
		wk.register(&f, 0)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % records
		if k == 0 && i > 0 {
			// Round again: the registry starts over at offset 1.
			wk.mu.Lock()
			wk.processed, wk.recentFrom = 0, 1
			wk.mu.Unlock()
		}
		if fed {
			wk.feed(recs[k:k+1], entries[k:k+1])
		} else {
			wk.readOne(pgq.Offset(k + 1))
		}
		i++
	}
	b.StopTimer()
	if w := wk.Wakes.Load(); w != 0 {
		b.Fatalf("%d wake-ups for transactions no poll passes", w)
	}
}
