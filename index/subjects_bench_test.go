package index

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// BenchmarkIndexBatch measures what the committer's hook does per journal
// batch of 64 records of 3 row changes each: EntryOf and Add, with the
// subject sets (what ingest pays since they exist) and without (the
// Entry built as before them), and Selector.Count over 100,000
// records afresh and moved forward by one batch (a group's lag).
//
//	go test -run '^$' -bench 'IndexBatch|SelectorCount' -benchmem ./index
func BenchmarkIndexBatch(b *testing.B) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	txs := make([]*pgq.Transaction, 64)
	for i := range txs {
		tb := fmt.Sprintf("t%d", i%5)
		ch := pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: tb, Columns: cols}
		txs[i] = &pgq.Transaction{CommitLSN: 1, EndLSN: 2, CommitTime: t0, Changes: []pgq.Change{ch, ch, ch}}
	}
	for _, sets := range []bool{true, false} {
		b.Run(fmt.Sprintf("sets=%v", sets), func(b *testing.B) {
			ix, err := Open(Options{Dir: b.TempDir(), Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			defer ix.Close()
			off := pgq.Offset(1)
			es := make([]Entry, len(txs))
			for b.Loop() {
				for i, tx := range txs {
					tx.Offset, tx.CommitLSN, tx.EndLSN = off, pgq.LSN(off*100), pgq.LSN(off*100+50)
					tx.CommitTime = t0.Add(time.Duration(off) * time.Millisecond)
					if sets {
						es[i] = EntryOf(tx, 200, len(tx.Changes))
					} else { // EntryOf as it was
						es[i] = Entry{Offset: tx.Offset, CommitLSN: tx.CommitLSN, EndLSN: tx.EndLSN, CommitTime: tx.CommitTime, Bytes: 200, Changes: len(tx.Changes)}
					}
					off++
				}
				if err := ix.Add(es); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(off-1), "ns/record")
		})
	}
}

func BenchmarkSelectorCount(b *testing.B) {
	const n = 100_000
	ix, err := Open(Options{Dir: b.TempDir(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	for from := pgq.Offset(1); from <= n; from += 1000 {
		mustAddB(b, ix, subjectEntries(from, 1000))
	}
	calls := 0
	b.Run("afresh", func(b *testing.B) {
		for b.Loop() {
			if _, err := ix.NewSelector(ordersPred(&calls)).Count(1, n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("forward", func(b *testing.B) {
		s := ix.NewSelector(ordersPred(&calls))
		from, to := pgq.Offset(1), pgq.Offset(n/2)
		for b.Loop() {
			if _, err := s.Count(from, to); err != nil {
				b.Fatal(err)
			}
			from, to = from+64, to+64
			if to > n {
				from, to = 1, n/2
			}
		}
	})
	// A reader that keeps up: its cursor a few records behind the end,
	// both moving by a batch between two lags (a status document's
	// per-group lag with a thousand such groups).
	b.Run("caught-up", func(b *testing.B) {
		s := ix.NewSelector(ordersPred(&calls))
		from, to := pgq.Offset(1), pgq.Offset(10)
		for b.Loop() {
			if _, err := s.Count(from, to); err != nil {
				b.Fatal(err)
			}
			from, to = from+64, to+64
			if to > n {
				from, to = 1, 10
			}
		}
	})
}

func mustAddB(b *testing.B, ix *Index, es []Entry) {
	b.Helper()
	if err := ix.Add(es); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEntryOfStored measures reading the subjects of a spilled part
// (10,000 row changes of one table, 5 columns) from its encoded bytes.
func BenchmarkEntryOfStored(b *testing.B) {
	cols := make([]pgq.Column, 5)
	vals := make([]pgq.Value, 5)
	for i := range cols {
		cols[i] = pgq.Column{Name: fmt.Sprintf("c%d", i), TypeOID: 25}
		vals[i] = pgq.Value{Kind: pgq.ValueText, Data: []byte("some text value")}
	}
	tx := &pgq.Transaction{CommitLSN: 1, EndLSN: 2, Final: true}
	for range 10_000 {
		tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "big", Columns: cols, New: vals})
	}
	rec := record.Append(nil, tx)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if e := EntryOfStored(tx, rec, len(rec), len(tx.Changes), nil); !e.Subjects.Known() {
			b.Fatal("unknown")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tx.Changes)), "ns/change")
}
