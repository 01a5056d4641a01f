package consumers

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// passOverEnv is three Managers over one journal of multi-part
// transactions whose parts touch different tables: one with the journal
// indexed, one with it indexed as an older pgq indexed it (no end flag:
// index.EndUnknown, what a version 3 block reads as), and one with an
// index that never saw it (so its fetches decode every record).
func passOverEnv(t *testing.T, txs ...[]string) (indexed, older, unindexed *Manager, j *journal.Journal) {
	t.Helper()
	indexed, j = managerOver(t, journal.Options{}, index.Options{}, ManagerOptions{}, appendParts(txs...))
	open := func(fill func(ix *index.Index)) *Manager {
		ix, err := index.Open(index.Options{Dir: filepath.Join(t.TempDir(), "index")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		fill(ix)
		m, err := NewManager(ManagerOptions{Journal: j, Index: ix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	older = open(func(ix *index.Index) {
		var es []index.Entry
		for off := j.FirstOffset(); off <= j.LastOffset(); off++ {
			tx, n, err := j.ReadSized(off)
			if err != nil {
				t.Fatal(err)
			}
			e := index.EntryOf(tx, n, len(tx.Changes))
			e.End = index.EndUnknown
			es = append(es, e)
		}
		if err := ix.Add(es); err != nil {
			t.Fatal(err)
		}
	})
	unindexed = open(func(*index.Index) {})
	return indexed, older, unindexed, j
}

// collectReads is one collect of group g (filtering table a) from offset
// 1 over the whole journal, and the journal reads it made.
func collectReads(t *testing.T, m *Manager) (recs int, reads uint64) {
	t.Helper()
	g, err := m.get("g")
	if err != nil {
		t.Fatal(err)
	}
	before := m.j.Reads()
	res, _, _, _, err := m.collect(g, 1, 0, FetchRequest{Max: 1000, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.recs), m.j.Reads() - before
}

// appendParts appends one transaction per txs (wakeTx: a part per table).
func appendParts(txs ...[]string) func(j *journal.Journal) error {
	return func(j *journal.Journal) error {
		for _, parts := range txs {
			for _, tx := range wakeTx(parts...) {
				if err := j.Append([]*pgq.Transaction{tx}); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// drain fetches group g (filtering table a) one transaction at a time,
// committing each, and returns what each fetch delivered and its next
// offset.
func drain(t *testing.T, m *Manager, max int) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "g", From: "earliest", Tables: []string{"public.a"}}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for range 20 {
		res, err := m.Fetch(ctx, "g", FetchRequest{Member: "m", Max: max})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tx := range res.Transactions {
			got = append(got, fmt.Sprintf("%d:p%d", tx.Offset, tx.Part))
		}
		out = append(out, fmt.Sprintf("%v next %d", got, res.NextOffset))
		if res.NextOffset > m.j.LastOffset() {
			return out
		}
		if _, err := m.Commit(ctx, "g", "m", res.NextOffset-1, 0); err != nil {
			t.Fatalf("commit %d: %v", res.NextOffset-1, err)
		}
	}
	t.Fatalf("not caught up after 20 fetches: %v", out)
	return nil
}

// TestFilteredFetchPassesOver: a filtered group's fetch passes over the
// records the index says it does not want by their header alone, and
// delivers exactly what decoding every record delivers: the same parts of
// the same transactions, the same next offsets, also where a rejected
// part ends a transaction whose earlier part passes or begins one whose
// later part passes.
func TestFilteredFetchPassesOver(t *testing.T) {
	// Offsets:                        1      2 3 4       5 6      7      8 9     10 11 12
	indexed, older, unindexed, j := passOverEnv(t, []string{"a"}, []string{"b", "b", "a"}, []string{"a", "b"}, []string{"b"}, []string{"c", "a"}, []string{"b", "c", "b"})
	f := Filter{Tables: []string{"public.a"}}.compiled()
	const R, P, F = "r", "", "f" // rejected part / rejected final / passes
	want := []string{"", R + P, R + P, "", "", R + F, R + F, R + P, "", R + P, R + P, R + F}
	verdicts := func(m *Manager) []string {
		var out []string
		for _, v := range m.verdicts(&group{name: "probe"}, f, 1, j.LastOffset(), verdictWindow, nil) {
			s := ""
			if v.Rejected {
				s = R + map[index.End]string{index.EndPart: P, index.EndFinal: F, index.EndUnknown: "?"}[v.End]
			}
			out = append(out, s)
		}
		return out
	}
	if got := verdicts(indexed); !slices.Equal(got, want) {
		t.Fatalf("verdicts %q, want %q", got, want)
	}
	// A record passed over unread counts for max_bytes with the index's
	// size: the stored size a header read (ReadInfo) reports.
	for i, v := range indexed.verdicts(&group{name: "probe"}, f, 1, j.LastOffset(), verdictWindow, nil) {
		_, size, err := j.ReadInfo(pgq.Offset(i + 1))
		if err != nil || int(v.Bytes) != size || size == 0 {
			t.Fatalf("offset %d: index size %d, ReadInfo %d, %v", i+1, v.Bytes, size, err)
		}
	}
	wantOlder := slices.Clone(want)
	for i, w := range wantOlder {
		if w != "" {
			wantOlder[i] = R + "?"
		}
	}
	if got := verdicts(older); !slices.Equal(got, wantOlder) {
		t.Fatalf("verdicts of an index without the end flag %q, want %q", got, wantOlder)
	}
	if got := verdicts(unindexed); slices.ContainsFunc(got, func(s string) bool { return s != "" }) {
		t.Fatalf("an index that never saw the journal rejects %q", got)
	}
	ms := []*Manager{indexed, older, unindexed}
	for _, max := range []int{1, 100} {
		a, b, c := drain(t, indexed, max), drain(t, older, max), drain(t, unindexed, max)
		if !slices.Equal(a, c) || !slices.Equal(b, c) {
			t.Fatalf("max %d: passing over unread delivered\n%v\nby the header\n%v\ndecoding every record delivered\n%v", max, a, b, c)
		}
		wantAll := "[1:p0 4:p2 5:p0 9:p1] next 13"
		if max == 100 && (len(a) != 1 || a[0] != wantAll) {
			t.Fatalf("one fetch delivered %v, want %s", a, wantAll)
		}
		if max == 100 {
			// The records a collect reads: every one but the rejected
			// ones whose end the index knows (8 of 12).
			for i, wantReads := range []uint64{4, 12, 12} {
				if n, reads := collectReads(t, ms[i]); n != 4 || reads != wantReads {
					t.Fatalf("manager %d: collect of %d records read %d records of the journal, want 4 and %d", i, n, reads, wantReads)
				}
			}
		}
		for _, m := range ms {
			if err := m.Delete(context.Background(), "g"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFilteredFetchPassOverWindows: over 750 records, more than two of
// the windows collect asks the index about, with multi-part transactions
// across the windows' bounds, passing over delivers what decoding does.
func TestFilteredFetchPassOverWindows(t *testing.T) {
	var txs [][]string
	for i := range 450 {
		switch i % 3 {
		case 0:
			txs = append(txs, []string{"b"})
		case 1:
			txs = append(txs, []string{"b", "a", "b"})
		default:
			txs = append(txs, []string{"c"})
		}
	}
	indexed, older, unindexed, j := passOverEnv(t, txs...)
	if j.LastOffset() <= 2*verdictWindow {
		t.Fatalf("test setup: %d records, not past two windows", j.LastOffset())
	}
	for _, max := range []int{50, 1000} {
		a, b, c := drain(t, indexed, max), drain(t, older, max), drain(t, unindexed, max)
		if !slices.Equal(a, c) || !slices.Equal(b, c) {
			t.Fatalf("max %d: passing over unread delivered\n%v\nby the header\n%v\ndecoding every record delivered\n%v", max, a, b, c)
		}
		if max == 1000 {
			// 450 transactions: 150 of 1 part b, 150 of b a b, 150 of c;
			// only the 150 a parts are read.
			if n, reads := collectReads(t, indexed); n != 150 || reads != 150 {
				t.Fatalf("collect of %d records read %d records of the journal, want 150 and 150", n, reads)
			}
		}
		for _, m := range []*Manager{indexed, older, unindexed} {
			if err := m.Delete(context.Background(), "g"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// BenchmarkFilteredCollect: one collect of a group filtering one table of
// 1,000 over 4,000 single-record transactions (4 of them its table's),
// with the journal indexed (rejected records passed over by their
// header) and without (every record decoded): the ratio is what the index
// saves each fetch of a thousand such groups.
func BenchmarkFilteredCollect(b *testing.B) {
	dir := b.TempDir()
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal"), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	tables := make([][]string, 4000)
	for i := range tables {
		tables[i] = []string{fmt.Sprintf("t%d", i%1000)}
	}
	if err := appendParts(tables...)(j); err != nil {
		b.Fatal(err)
	}
	for _, indexed := range []bool{true, false} {
		name := map[bool]string{true: "index", false: "decode"}[indexed]
		b.Run(name, func(b *testing.B) {
			ix, err := index.Open(index.Options{Dir: filepath.Join(b.TempDir(), name)}) // fresh per run: -count reruns b.Run
			if err != nil {
				b.Fatal(err)
			}
			defer ix.Close()
			if indexed {
				if err := ix.CatchUp(context.Background(), j); err != nil {
					b.Fatal(err)
				}
			}
			m, err := NewManager(ManagerOptions{Journal: j, Index: ix})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if _, err := m.Create(context.Background(), CreateRequest{Name: "g", From: "earliest", Tables: []string{"public.t7"}}); err != nil {
				b.Fatal(err)
			}
			g, err := m.get("g")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				res, _, _, _, err := m.collect(g, 1, 0, FetchRequest{Max: 1000, MaxBytes: 1 << 30})
				if err != nil || len(res.recs) != 4 {
					b.Fatalf("collect: %v, %d records", err, len(res.recs))
				}
			}
		})
	}
}
