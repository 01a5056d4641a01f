package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t *testing.T, dir string) *Index {
	t.Helper()
	ix, err := Open(Options{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return ix
}

func openTemp(t *testing.T) *Index {
	t.Helper()
	ix := open(t, t.TempDir())
	t.Cleanup(func() {
		if err := ix.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ix
}

// entries builds n entries from offset `from`: commit LSN 100*off, time
// t0 + off seconds, bytes 10*off.
func entries(from pgq.Offset, n int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		off := from + pgq.Offset(i)
		out[i] = Entry{
			Offset:     off,
			CommitLSN:  pgq.LSN(100 * off),
			EndLSN:     pgq.LSN(100*off + 50),
			CommitTime: t0.Add(time.Duration(off) * time.Second),
			Bytes:      int(10 * off),
			Changes:    int(off % 7),
		}
	}
	return out
}

func mustAdd(t *testing.T, ix *Index, es []Entry) {
	t.Helper()
	if err := ix.Add(es); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

func wantSeek(t *testing.T, name string, got pgq.Offset, err error, want pgq.Offset) {
	t.Helper()
	if want == 0 {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s = %d, %v; want ErrNotFound", name, got, err)
		}
		return
	}
	if err != nil || got != want {
		t.Errorf("%s = %d, %v; want %d", name, got, err, want)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Validate(zero) = %v, want ErrInvalidOptions", err)
	}
	if _, err := Open(Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open(zero) = %v, want ErrInvalidOptions", err)
	}
}

func TestSeekLSNAndTime(t *testing.T) {
	ix := openTemp(t)
	if ix.LastOffset() != 0 {
		t.Fatalf("LastOffset of empty = %d", ix.LastOffset())
	}
	_, err := ix.SeekLSN(0)
	wantSeek(t, "SeekLSN on empty", 0, err, 0)

	mustAdd(t, ix, entries(1, 10)) // LSNs 100..1000, times t0+1s..t0+10s
	if ix.LastOffset() != 10 {
		t.Fatalf("LastOffset = %d, want 10", ix.LastOffset())
	}
	for _, c := range []struct {
		lsn  pgq.LSN
		want pgq.Offset
	}{
		{0, 1}, {1, 1}, {100, 1}, // before first, exact first
		{101, 2}, {199, 2}, {200, 2}, // between, exact
		{500, 5}, {1000, 10}, // exact last
		{1001, 0}, {1 << 60, 0}, // past the end
	} {
		got, err := ix.SeekLSN(c.lsn)
		wantSeek(t, fmt.Sprintf("SeekLSN(%d)", c.lsn), got, err, c.want)
	}
	for _, c := range []struct {
		t    time.Time
		want pgq.Offset
	}{
		{time.Time{}, 1}, {t0, 1}, {t0.Add(time.Second), 1},
		{t0.Add(1500 * time.Millisecond), 2}, {t0.Add(2 * time.Second), 2},
		{t0.Add(time.Second + time.Nanosecond), 2}, // sub-µs rounds up
		{t0.Add(10 * time.Second), 10},
		{t0.Add(10*time.Second + time.Microsecond), 0},
		{t0.Add(time.Hour), 0},
	} {
		got, err := ix.SeekTime(c.t)
		wantSeek(t, fmt.Sprintf("SeekTime(%s)", c.t.Sub(t0)), got, err, c.want)
	}

	e, err := ix.EntryAt(4)
	if err != nil {
		t.Fatalf("EntryAt(4): %v", err)
	}
	if want := entries(4, 1)[0]; e != want || e.CommitTime.Location() != time.UTC {
		t.Fatalf("EntryAt(4) = %+v, want %+v", e, want)
	}
	if _, err := ix.EntryAt(11); !errors.Is(err, ErrNotFound) {
		t.Fatalf("EntryAt(11) = %v, want ErrNotFound", err)
	}
	if _, err := ix.EntryAt(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("EntryAt(0) = %v, want ErrNotFound", err)
	}
}

func TestMultiPartAndOutOfOrderTimes(t *testing.T) {
	ix := openTemp(t)
	// Offsets 1..6: 2,3,4 are parts of one transaction (same commit LSN and
	// time); offset 5's commit time is earlier than 4's (another clock).
	es := []Entry{
		{Offset: 1, CommitLSN: 100, CommitTime: t0.Add(1 * time.Second)},
		{Offset: 2, CommitLSN: 200, CommitTime: t0.Add(2 * time.Second)},
		{Offset: 3, CommitLSN: 200, CommitTime: t0.Add(2 * time.Second)},
		{Offset: 4, CommitLSN: 200, CommitTime: t0.Add(2 * time.Second)},
		{Offset: 5, CommitLSN: 300, CommitTime: t0.Add(1500 * time.Millisecond)},
		{Offset: 6, CommitLSN: 400, CommitTime: t0.Add(5 * time.Second)},
	}
	mustAdd(t, ix, es[:3])
	mustAdd(t, ix, es[3:]) // the group spans two Add calls
	for _, c := range []struct {
		lsn  pgq.LSN
		want pgq.Offset
	}{{150, 2}, {200, 2}, {201, 5}, {300, 5}, {400, 6}, {401, 0}} {
		got, err := ix.SeekLSN(c.lsn)
		wantSeek(t, fmt.Sprintf("SeekLSN(%d)", c.lsn), got, err, c.want)
	}
	for _, c := range []struct {
		d    time.Duration
		want pgq.Offset
	}{
		{1 * time.Second, 1},
		{1200 * time.Millisecond, 2}, // not 5: 2 comes first in offset order
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 2},
		{3 * time.Second, 6},
		{6 * time.Second, 0},
	} {
		got, err := ix.SeekTime(t0.Add(c.d))
		wantSeek(t, fmt.Sprintf("SeekTime(%s)", c.d), got, err, c.want)
	}
}

// refused checks that a failed Add made the index stale, then clears the
// mark as a heal would (the rules of Add are tested here, healing in
// health_test.go).
func refused(t *testing.T, ix *Index, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v, want %v", what, err, want)
	}
	if !ix.Stats().Stale || !errors.Is(ix.Err(), ErrStale) {
		t.Fatalf("%s did not make the index stale: %+v", what, ix.Stats())
	}
	if err := ix.Add(entries(ix.LastOffset()+1, 1)); !errors.Is(err, ErrStale) {
		t.Fatalf("Add while stale = %v, want ErrStale", err)
	}
	ix.wmu.Lock()
	ix.markFresh()
	ix.wmu.Unlock()
}

func TestAddRules(t *testing.T) {
	ix := openTemp(t)
	if err := ix.Add(nil); err != nil {
		t.Fatalf("Add(nil) = %v", err)
	}
	refused(t, ix, "Add(offset 0)", ix.Add([]Entry{{Offset: 0}}), ErrInvalidEntry)
	refused(t, ix, "Add(bytes -1)", ix.Add([]Entry{{Offset: 1, Bytes: -1}}), ErrInvalidEntry)
	refused(t, ix, "Add(1,3)", ix.Add([]Entry{{Offset: 1}, {Offset: 3}}), ErrGap)
	if ix.LastOffset() != 0 {
		t.Fatalf("a failed Add moved LastOffset to %d", ix.LastOffset())
	}
	// An empty index starts at any offset (a journal truncated at the front).
	mustAdd(t, ix, entries(50, 3))
	refused(t, ix, "Add(54) after 52", ix.Add(entries(54, 1)), ErrGap)
	// Already indexed offsets are skipped, the rest appended.
	mustAdd(t, ix, entries(51, 4))
	if ix.LastOffset() != 54 {
		t.Fatalf("LastOffset = %d, want 54", ix.LastOffset())
	}
	if n, err := ix.BytesBetween(50, 54); err != nil || n != 10*(50+51+52+53+54) {
		t.Fatalf("BytesBetween(50,54) = %d, %v", n, err)
	}
	if st := ix.Stats(); st.FailedAdds != 4 || st.SkippedAdds != 4 || st.Heals != 4 || st.Stale || st.Failed {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestBytesBetween(t *testing.T) {
	ix := openTemp(t)
	mustAdd(t, ix, entries(1, 5)) // bytes 10,20,30,40,50
	mustAdd(t, ix, entries(6, 5)) // 60..100
	for _, c := range []struct {
		from, to pgq.Offset
		want     int64
	}{
		{1, 1, 10}, {1, 10, 550}, {3, 7, 30 + 40 + 50 + 60 + 70}, {10, 10, 100}, {6, 5, 0}, {11, 10, 0},
	} {
		got, err := ix.BytesBetween(c.from, c.to)
		if err != nil || got != c.want {
			t.Errorf("BytesBetween(%d,%d) = %d, %v; want %d", c.from, c.to, got, err, c.want)
		}
	}
	if _, err := ix.BytesBetween(1, 11); !errors.Is(err, ErrNotFound) {
		t.Errorf("BytesBetween(1,11) = %v, want ErrNotFound", err)
	}
	if err := ix.TruncateFront(4); err != nil {
		t.Fatal(err)
	}
	if got, err := ix.BytesBetween(4, 10); err != nil || got != 550-60 {
		t.Errorf("after truncate BytesBetween(4,10) = %d, %v; want %d", got, err, 550-60)
	}
	if _, err := ix.BytesBetween(3, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("BytesBetween(3,10) after truncate = %v, want ErrNotFound", err)
	}
}

func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	defer func() { _ = ix.Close() }()
	es := entries(1, 10)
	es[4].CommitLSN, es[5].CommitLSN = 500, 500 // offsets 5 and 6 share an LSN
	mustAdd(t, ix, es)
	if err := ix.TruncateFront(1); err != nil { // no-op
		t.Fatal(err)
	}
	if err := ix.TruncateFront(6); err != nil {
		t.Fatal(err)
	}
	if first, err := ix.FirstOffset(); err != nil || first != 6 {
		t.Fatalf("FirstOffset = %d, %v; want 6", first, err)
	}
	if _, err := ix.EntryAt(5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("EntryAt(5) after truncate = %v", err)
	}
	check := func(ix *Index) {
		t.Helper()
		for _, c := range []struct {
			lsn  pgq.LSN
			want pgq.Offset
		}{{0, 6}, {500, 6}, {501, 7}, {1000, 10}, {1001, 0}} {
			got, err := ix.SeekLSN(c.lsn)
			wantSeek(t, fmt.Sprintf("SeekLSN(%d)", c.lsn), got, err, c.want)
		}
		for _, c := range []struct {
			d    time.Duration
			want pgq.Offset
		}{{0, 6}, {6 * time.Second, 6}, {6500 * time.Millisecond, 7}, {11 * time.Second, 0}} {
			got, err := ix.SeekTime(t0.Add(c.d))
			wantSeek(t, fmt.Sprintf("SeekTime(%s)", c.d), got, err, c.want)
		}
		if ix.LastOffset() != 10 {
			t.Fatalf("LastOffset = %d, want 10", ix.LastOffset())
		}
	}
	check(ix)
	// Survives reopen (derived writes are NoSync but Close flushes).
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = open(t, dir)
	check(ix)
	mustAdd(t, ix, entries(11, 2))
	if got, err := ix.SeekLSN(1001); err != nil || got != 11 {
		t.Fatalf("SeekLSN(1001) = %d, %v", got, err)
	}

	// Truncating past the end drops every entry; the tail position stays
	// and the running values start afresh.
	if err := ix.TruncateFront(100); err != nil {
		t.Fatal(err)
	}
	if first, err := ix.FirstOffset(); err != nil || first != 0 {
		t.Fatalf("FirstOffset after full truncate = %d, %v", first, err)
	}
	if _, err := ix.SeekLSN(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SeekLSN after full truncate = %v", err)
	}
	if ix.LastOffset() != 12 {
		t.Fatalf("LastOffset after full truncate = %d", ix.LastOffset())
	}
	mustAdd(t, ix, entries(13, 2))
	if got, err := ix.BytesBetween(13, 14); err != nil || got != 270 {
		t.Fatalf("BytesBetween(13,14) = %d, %v", got, err)
	}
	if got, err := ix.SeekTime(t0); err != nil || got != 13 {
		t.Fatalf("SeekTime(t0) = %d, %v", got, err)
	}
}

func TestResetKeepsGroups(t *testing.T) {
	ix := openTemp(t)
	mustAdd(t, ix, entries(1, 5))
	if err := ix.PutGroup("g1", []byte("cursor")); err != nil {
		t.Fatal(err)
	}
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	if ix.LastOffset() != 0 {
		t.Fatalf("LastOffset after Reset = %d", ix.LastOffset())
	}
	if _, err := ix.EntryAt(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("EntryAt after Reset = %v", err)
	}
	if _, err := ix.SeekTime(time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SeekTime after Reset = %v", err)
	}
	if v, err := ix.GetGroup("g1"); err != nil || string(v) != "cursor" {
		t.Fatalf("GetGroup after Reset = %q, %v", v, err)
	}
	mustAdd(t, ix, entries(3, 2))
	if got, err := ix.SeekLSN(0); err != nil || got != 3 {
		t.Fatalf("SeekLSN after re-add = %d, %v", got, err)
	}
}

func TestGroupsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	for _, name := range []string{"a", "b", "c/with/slashes", "ünï"} {
		if err := ix.PutGroup(name, []byte("v-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.PutGroup("b", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := ix.PutGroup("empty", nil); err != nil {
		t.Fatal(err)
	}
	if err := ix.DeleteGroup("a"); err != nil {
		t.Fatal(err)
	}
	if err := ix.DeleteGroup("never-existed"); err != nil {
		t.Fatalf("DeleteGroup(missing) = %v", err)
	}
	if err := ix.PutGroup("", []byte("x")); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("PutGroup(\"\") = %v", err)
	}
	mustAdd(t, ix, entries(1, 3))
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := ix.GetGroup("b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetGroup after Close = %v", err)
	}
	if _, err := ix.SeekLSN(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("SeekLSN after Close = %v", err)
	}

	ix = open(t, dir)
	defer func() { _ = ix.Close() }()
	if ix.LastOffset() != 3 {
		t.Fatalf("LastOffset after reopen = %d", ix.LastOffset())
	}
	want := map[string]string{"b": "v2", "c/with/slashes": "v-c/with/slashes", "ünï": "v-ünï", "empty": ""}
	got, err := ix.Groups()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Groups = %q, want %q", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || string(g) != v {
			t.Fatalf("Groups[%q] = %q, %v; want %q", k, g, ok, v)
		}
	}
	if _, err := ix.GetGroup("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetGroup(deleted) = %v", err)
	}
	v, err := ix.GetGroup("b")
	if err != nil || string(v) != "v2" {
		t.Fatalf("GetGroup(b) = %q, %v", v, err)
	}
	v[0] = 'X' // a copy: must not change what is stored
	if v, _ := ix.GetGroup("b"); string(v) != "v2" {
		t.Fatalf("GetGroup returned aliased memory: %q", v)
	}
}

func TestSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	_, err := Open(Options{Dir: dir, Logger: quiet()})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix2, err := Open(Options{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	_ = ix2.Close()
}

// fakeSource is an in-memory journal: offsets first..first+len(txs)-1.
type fakeSource struct {
	mu    sync.Mutex
	first pgq.Offset
	txs   []*pgq.Transaction
	reads int
	// onRead, when set, runs after each read (outside mu).
	onRead func()
}

func newFakeSource(first pgq.Offset, n int, lsnBase pgq.LSN) *fakeSource {
	s := &fakeSource{first: first}
	for i := range n {
		off := first + pgq.Offset(i)
		s.txs = append(s.txs, &pgq.Transaction{
			Offset:     off,
			CommitLSN:  lsnBase + pgq.LSN(100*off),
			EndLSN:     lsnBase + pgq.LSN(100*off+50),
			CommitTime: t0.Add(time.Duration(off) * time.Millisecond),
			Final:      true,
			Changes:    make([]pgq.Change, int(off%3)+1),
		})
	}
	return s
}

func (s *fakeSource) FirstOffset() pgq.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.txs) == 0 {
		return 0
	}
	return s.first
}

func (s *fakeSource) LastOffset() pgq.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.txs) == 0 {
		return 0
	}
	return s.first + pgq.Offset(len(s.txs)) - 1
}

func (s *fakeSource) ReadSized(off pgq.Offset) (*pgq.Transaction, int, error) {
	s.mu.Lock()
	s.reads++
	onRead := s.onRead
	if off < s.first || off >= s.first+pgq.Offset(len(s.txs)) {
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("fake: offset %d out of range", off)
	}
	tx := *s.txs[off-s.first]
	s.mu.Unlock()
	if onRead != nil {
		onRead()
	}
	return &tx, txSize(&tx), nil
}

func (s *fakeSource) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

func txSize(tx *pgq.Transaction) int { return 1000 + len(tx.Changes) }

// checkCovers asserts the index matches src exactly.
func checkCovers(t *testing.T, ix *Index, src *fakeSource) {
	t.Helper()
	first, last := src.FirstOffset(), src.LastOffset()
	if ix.LastOffset() != last {
		t.Fatalf("LastOffset = %d, want %d", ix.LastOffset(), last)
	}
	if got, err := ix.FirstOffset(); err != nil || got != first {
		t.Fatalf("FirstOffset = %d, %v; want %d", got, err, first)
	}
	var sum int64
	for off := first; off <= last; off++ {
		tx, _, _ := src.ReadSized(off)
		want := EntryOf(tx, txSize(tx), len(tx.Changes))
		got, err := ix.EntryAt(off)
		if err != nil || got != want {
			t.Fatalf("EntryAt(%d) = %+v, %v; want %+v", off, got, err, want)
		}
		if o, err := ix.SeekLSN(tx.CommitLSN); err != nil || o != off {
			t.Fatalf("SeekLSN(%s) = %d, %v; want %d", tx.CommitLSN, o, err, off)
		}
		if o, err := ix.SeekTime(tx.CommitTime); err != nil || o != off {
			t.Fatalf("SeekTime(%s) = %d, %v; want %d", tx.CommitTime, o, err, off)
		}
		sum += int64(want.Bytes)
	}
	if first > 0 {
		if got, err := ix.BytesBetween(first, last); err != nil || got != sum {
			t.Fatalf("BytesBetween(%d,%d) = %d, %v; want %d", first, last, got, err, sum)
		}
	}
}

func TestCatchUpFromEmpty(t *testing.T) {
	ix := openTemp(t)
	src := newFakeSource(1, 1300, 0) // more than two batches
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	checkCovers(t, ix, src)
}

func TestCatchUpAfterPartial(t *testing.T) {
	ix := openTemp(t)
	src := newFakeSource(1, 700, 0)
	var es []Entry
	for off := pgq.Offset(1); off <= 250; off++ {
		tx, _, _ := src.ReadSized(off)
		es = append(es, EntryOf(tx, txSize(tx), len(tx.Changes)))
	}
	mustAdd(t, ix, es)
	before := src.readCount()
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	// Only the tail plus the one verification read of offset 250.
	if reads := src.readCount() - before; reads != 700-250+1 {
		t.Fatalf("CatchUp read %d records, want %d", reads, 700-250+1)
	}
	checkCovers(t, ix, src)

	// Nothing new: a no-op apart from the verification read.
	before = src.readCount()
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if reads := src.readCount() - before; reads != 1 {
		t.Fatalf("idle CatchUp read %d records, want 1", reads)
	}
}

func TestCatchUpFollowsFrontTruncation(t *testing.T) {
	ix := openTemp(t)
	src := newFakeSource(1, 100, 0)
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	// Retention removed 1..39; 20 more records were appended.
	src.mu.Lock()
	src.txs = src.txs[39:]
	src.first = 40
	src.mu.Unlock()
	more := newFakeSource(101, 20, 0)
	src.mu.Lock()
	src.txs = append(src.txs, more.txs...)
	src.mu.Unlock()
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	checkCovers(t, ix, src)
}

func TestCatchUpRebuilds(t *testing.T) {
	cases := []struct {
		name string
		src  *fakeSource
	}{
		// The index (1..500) is ahead of a shorter journal.
		{"ahead", newFakeSource(1, 300, 0)},
		// Same length, different content (journal replaced).
		{"replaced", newFakeSource(1, 600, 1<<40)},
		// The journal starts after the index ends.
		{"gap", newFakeSource(800, 50, 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := openTemp(t)
			if err := ix.PutGroup("keep", []byte("me")); err != nil {
				t.Fatal(err)
			}
			if err := ix.CatchUp(context.Background(), newFakeSource(1, 500, 0)); err != nil {
				t.Fatal(err)
			}
			if err := ix.CatchUp(context.Background(), c.src); err != nil {
				t.Fatal(err)
			}
			checkCovers(t, ix, c.src)
			if v, err := ix.GetGroup("keep"); err != nil || string(v) != "me" {
				t.Fatalf("group lost in rebuild: %q, %v", v, err)
			}
		})
	}
}

func TestCatchUpEmptyJournal(t *testing.T) {
	ix := openTemp(t)
	mustAdd(t, ix, entries(1, 5))
	if err := ix.CatchUp(context.Background(), &fakeSource{first: 1}); err != nil {
		t.Fatal(err)
	}
	if ix.LastOffset() != 0 {
		t.Fatalf("LastOffset = %d after catching up with an empty journal", ix.LastOffset())
	}
}

func TestCatchUpCancelled(t *testing.T) {
	ix := openTemp(t)
	src := newFakeSource(1, 2000, 0)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	src.onRead = func() {
		if n++; n == 600 {
			cancel()
		}
	}
	err := ix.CatchUp(ctx, src)
	src.onRead = nil
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("CatchUp = %v, want context.Canceled", err)
	}
	if last := ix.LastOffset(); last != 2*catchUpBatch {
		t.Fatalf("LastOffset after cancel = %d, want %d", last, 2*catchUpBatch)
	}
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	checkCovers(t, ix, src)
}

func TestCatchUpReadError(t *testing.T) {
	ix := openTemp(t)
	src := newFakeSource(1, 10, 0)
	bad := &failingSource{fakeSource: src, failAt: 7}
	err := ix.CatchUp(context.Background(), bad)
	if !errors.Is(err, errFake) {
		t.Fatalf("CatchUp = %v, want errFake", err)
	}
}

var errFake = errors.New("fake read failure")

type failingSource struct {
	*fakeSource
	failAt pgq.Offset
}

func (s *failingSource) ReadSized(off pgq.Offset) (*pgq.Transaction, int, error) {
	if off == s.failAt {
		return nil, 0, errFake
	}
	return s.fakeSource.ReadSized(off)
}

// TestConcurrentReadersAndAdder runs under -race in make test.
func TestConcurrentReadersAndAdder(t *testing.T) {
	ix := openTemp(t)
	const total = 2000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				last := ix.LastOffset()
				if last == 0 {
					continue
				}
				// Whatever LastOffset reports must be fully readable.
				e, err := ix.EntryAt(last)
				if err != nil {
					errc <- fmt.Errorf("reader %d: EntryAt(%d): %w", r, last, err)
					return
				}
				if off, err := ix.SeekLSN(e.CommitLSN); err != nil || off != last {
					errc <- fmt.Errorf("reader %d: SeekLSN(%s) = %d, %v; want %d", r, e.CommitLSN, off, err, last)
					return
				}
				if off, err := ix.SeekTime(e.CommitTime); err != nil || off != last {
					errc <- fmt.Errorf("reader %d: SeekTime = %d, %v; want %d", r, off, err, last)
					return
				}
				n, err := ix.BytesBetween(1, last)
				if want := int64(5 * last * (last + 1)); err != nil || n != want {
					errc <- fmt.Errorf("reader %d: BytesBetween(1,%d) = %d, %v; want %d", r, last, n, err, want)
					return
				}
				if r == 0 {
					if err := ix.PutGroup(fmt.Sprintf("g%d", last%5), []byte("x")); err != nil {
						errc <- err
						return
					}
					if _, err := ix.Groups(); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	for off := pgq.Offset(1); off <= total; off += 10 {
		if err := ix.Add(entries(off, 10)); err != nil {
			t.Fatalf("Add(%d): %v", off, err)
		}
	}
	cancel()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if ix.LastOffset() != total {
		t.Fatalf("LastOffset = %d", ix.LastOffset())
	}
}

// TestConcurrentAddAndCatchUp: an ingest Add racing CatchUp is skipped or
// appended, never an error.
func TestConcurrentAddAndCatchUp(t *testing.T) {
	ix := openTemp(t)
	src := newFakeSource(1, 1500, 0)
	var wg sync.WaitGroup
	wg.Add(1)
	var addErr error
	go func() {
		defer wg.Done()
		for ix.LastOffset() < 100 {
			time.Sleep(time.Millisecond)
		}
		// CatchUp holds the writer lock: this waits, then is skipped.
		tx, _, _ := src.ReadSized(1500)
		addErr = ix.Add([]Entry{EntryOf(tx, txSize(tx), len(tx.Changes))})
	}()
	if err := ix.CatchUp(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if addErr != nil {
		t.Fatalf("racing Add: %v", addErr)
	}
	checkCovers(t, ix, src)
}

func TestCloseWhileReading(t *testing.T) {
	ix, err := Open(Options{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, ix, entries(1, 100))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := ix.SeekLSN(500); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("SeekLSN: %v", err)
					}
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
