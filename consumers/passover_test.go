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

// passOverEnv is two Managers over one journal of multi-part transactions
// whose parts touch different tables: one with the journal indexed, one
// with an index that never saw it (so its fetches decode every record).
func passOverEnv(t *testing.T, txs ...[]string) (indexed, unindexed *Manager, j *journal.Journal) {
	t.Helper()
	indexed, j = managerOver(t, journal.Options{}, index.Options{}, ManagerOptions{}, appendParts(txs...))
	ix, err := index.Open(index.Options{Dir: filepath.Join(t.TempDir(), "index")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	unindexed, err = NewManager(ManagerOptions{Journal: j, Index: ix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unindexed.Close() })
	return indexed, unindexed, j
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
	// Offsets:               1      2 3 4       5 6      7      8 9     10 11 12
	indexed, unindexed, j := passOverEnv(t, []string{"a"}, []string{"b", "b", "a"}, []string{"a", "b"}, []string{"b"}, []string{"c", "a"}, []string{"b", "c", "b"})
	g := &group{name: "probe"}
	f := Filter{Tables: []string{"public.a"}}.compiled()
	rej := indexed.rejected(g, f, 1, j.LastOffset(), nil)
	want := []bool{false, true, true, false, false, true, true, true, false, true, true, true}
	if !slices.Equal(rej, want) {
		t.Fatalf("rejected %v, want %v", rej, want)
	}
	if r := unindexed.rejected(&group{name: "probe"}, f, 1, j.LastOffset(), nil); slices.Contains(r, true) {
		t.Fatalf("an index that never saw the journal rejects %v", r)
	}
	for _, max := range []int{1, 100} {
		a, b := drain(t, indexed, max), drain(t, unindexed, max)
		if !slices.Equal(a, b) {
			t.Fatalf("max %d: passing over delivered\n%v\ndecoding every record delivered\n%v", max, a, b)
		}
		wantAll := "[1:p0 4:p2 5:p0 9:p1] next 13"
		if max == 100 && (len(a) != 1 || a[0] != wantAll) {
			t.Fatalf("one fetch delivered %v, want %s", a, wantAll)
		}
		for _, m := range []*Manager{indexed, unindexed} {
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
	indexed, unindexed, j := passOverEnv(t, txs...)
	if j.LastOffset() <= 2*rejectWindow {
		t.Fatalf("test setup: %d records, not past two windows", j.LastOffset())
	}
	for _, max := range []int{50, 1000} {
		a, b := drain(t, indexed, max), drain(t, unindexed, max)
		if !slices.Equal(a, b) {
			t.Fatalf("max %d: passing over delivered\n%v\ndecoding every record delivered\n%v", max, a, b)
		}
		for _, m := range []*Manager{indexed, unindexed} {
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
			ix, err := index.Open(index.Options{Dir: filepath.Join(dir, name)})
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
				res, _, _, _, err := m.collect(g, 1, FetchRequest{Max: 1000, MaxBytes: 1 << 30})
				if err != nil || len(res.recs) != 4 {
					b.Fatalf("collect: %v, %d records", err, len(res.recs))
				}
			}
		})
	}
}
