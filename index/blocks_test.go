package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pgq-dev/pgq"
)

// model is the brute-force answer to every lookup.
type model struct {
	es    []Entry // every entry added, in offset order (from es[0].Offset)
	first pgq.Offset
}

func (m *model) seek(reached func(Entry) bool) pgq.Offset {
	for _, e := range m.es {
		if reached(e) {
			// The running maximum reaches x at e: the first retained
			// offset at or after it answers.
			return max(e.Offset, m.first)
		}
	}
	return 0
}

// checkModel compares every lookup of ix with the model.
func checkModel(t *testing.T, ix *Index, m *model, rng *rand.Rand) {
	t.Helper()
	last := m.es[len(m.es)-1].Offset
	if ix.LastOffset() != last {
		t.Fatalf("LastOffset = %d, want %d", ix.LastOffset(), last)
	}
	first, err := ix.FirstOffset()
	want := m.first
	if want > last {
		want = 0
	}
	if err != nil || first != want {
		t.Fatalf("FirstOffset = %d, %v; want %d", first, err, want)
	}
	var cum int64
	for _, e := range m.es {
		if e.Offset < m.first {
			if _, err := ix.EntryAt(e.Offset); !errors.Is(err, ErrNotFound) {
				t.Fatalf("EntryAt(%d) below the floor %d = %v", e.Offset, m.first, err)
			}
			continue
		}
		got, err := ix.EntryAt(e.Offset)
		if err != nil || got != e {
			t.Fatalf("EntryAt(%d) = %+v, %v; want %+v", e.Offset, got, err, e)
		}
		cum += int64(e.Bytes)
		if e.Offset%17 == 0 || e.Offset == last {
			if b, err := ix.BytesBetween(m.first, e.Offset); err != nil || b != cum {
				t.Fatalf("BytesBetween(%d, %d) = %d, %v; want %d", m.first, e.Offset, b, err, cum)
			}
		}
	}
	for range 200 {
		e := m.es[rng.IntN(len(m.es))]
		lsn := e.CommitLSN + pgq.LSN(rng.IntN(3)) - 1
		got, err := ix.SeekLSN(lsn)
		wantSeek(t, fmt.Sprintf("SeekLSN(%d)", lsn), got, err, m.seek(func(x Entry) bool { return x.CommitLSN >= lsn }))
		at := e.CommitTime.Add(time.Duration(rng.IntN(3)-1) * time.Microsecond)
		got, err = ix.SeekTime(at)
		wantSeek(t, fmt.Sprintf("SeekTime(%s)", at), got, err, m.seek(func(x Entry) bool { return !x.CommitTime.Before(at) }))
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestBlocksMatchModel adds entries whose LSNs repeat and whose times go
// backwards now and then, in batches of random sizes across many blocks,
// truncates the front, closes and reopens in the middle of a block, and
// checks every lookup against a brute-force model after each step.
func TestBlocksMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	ix := open(t, dir)
	defer func() { _ = ix.Close() }()
	m := &model{first: 1}
	off := pgq.Offset(1)
	lsn := pgq.LSN(1 << 30)
	at := t0
	for step := range 30 {
		n := 1 + rng.IntN(90)
		batch := make([]Entry, n)
		for i := range batch {
			if rng.IntN(5) != 0 { // parts share a commit LSN
				lsn += pgq.LSN(1 + rng.IntN(1000))
			}
			at = at.Add(time.Duration(rng.IntN(2000)-200) * time.Microsecond) // sometimes backwards
			batch[i] = Entry{Offset: off, CommitLSN: lsn, EndLSN: lsn + pgq.LSN(rng.IntN(100)),
				CommitTime: at, Bytes: rng.IntN(5000), Changes: rng.IntN(10), End: End(rng.IntN(3))}
			off++
		}
		mustAdd(t, ix, batch)
		m.es = append(m.es, batch...)
		switch step % 7 {
		case 3:
			cut := m.first + pgq.Offset(rng.IntN(int(off-m.first)))
			if err := ix.TruncateFront(cut); err != nil {
				t.Fatal(err)
			}
			m.first = max(m.first, cut)
		case 5:
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			ix = open(t, dir)
		}
		checkModel(t, ix, m, rng)
	}
}

// TestBlockBytesPerEntry: a stored entry takes a few bytes, not the 73-byte
// value plus three keys of the first format.
func TestBlockBytesPerEntry(t *testing.T) {
	es := make([]stored, blockLen)
	var prev stored
	for i := range es {
		e := Entry{Offset: pgq.Offset(1 + i), CommitLSN: pgq.LSN(0x1_6B37_4D28 + 180*i), EndLSN: pgq.LSN(0x1_6B37_4D28 + 180*i + 48),
			CommitTime: t0.Add(time.Duration(i) * 700 * time.Microsecond), Bytes: 160, Changes: 1, End: endOf(i%4 == 3)}
		es[i] = next(prev, i > 0, e)
		prev = es[i]
	}
	v := encodeBlock(es)
	if per := float64(len(v)) / blockLen; per > 12 {
		t.Fatalf("%.1f bytes per entry, want at most 12", per)
	}
	got, err := decodeBlock(1, v)
	if err != nil || len(got) != len(es) {
		t.Fatalf("decode: %d entries, %v", len(got), err)
	}
	for i := range es {
		if got[i] != es[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], es[i])
		}
	}
	for cut := range v {
		if _, err := decodeBlock(1, v[:cut]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("block cut at %d bytes: %v, want ErrCorrupt", cut, err)
		}
	}
}

// TestDropsFirstFormat: an index written by the first format (an "o" entry
// per offset) opens empty, so that CatchUp rebuilds it, and keeps its
// groups.
func TestDropsFirstFormat(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	if err := ix.PutGroup("g", []byte("cursor")); err != nil {
		t.Fatal(err)
	}
	b := ix.db.NewBatch()
	old := make([]byte, 9)
	old[0] = prefixOffsetV1
	old[8] = 1
	for _, k := range [][]byte{old, lsnKey(100, 1), timeKey(5, 1)} {
		if err := b.Set(k, make([]byte, 73), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := putU64(b, keyLast, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = open(t, dir)
	defer func() { _ = ix.Close() }()
	if ix.LastOffset() != 0 {
		t.Fatalf("LastOffset = %d after opening the first format, want 0", ix.LastOffset())
	}
	if _, err := ix.SeekLSN(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SeekLSN = %v, want ErrNotFound", err)
	}
	if v, err := ix.GetGroup("g"); err != nil || string(v) != "cursor" {
		t.Fatalf("group after the format change = %q, %v", v, err)
	}
	mustAdd(t, ix, entries(1, 3))
	if got, err := ix.SeekLSN(150); err != nil || got != 2 {
		t.Fatalf("SeekLSN(150) = %d, %v; want 2", got, err)
	}
}
