package ingest

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestWatermarkVisible checks PostgreSQL's snapshot rules on the 32-bit
// xids pgoutput carries, across the wraparound of the full xids' low bits.
func TestWatermarkVisible(t *testing.T) {
	const epoch = 1 << 32
	for _, tc := range []struct {
		name string
		wm   Watermark
		xid  uint32
		want bool
	}{
		{"below xmin", Watermark{Xmin: 100, Xmax: 110}, 99, true},
		{"between, not in xip", Watermark{Xmin: 100, Xmax: 110, Xip: []uint64{100, 105}}, 104, true},
		{"in xip", Watermark{Xmin: 100, Xmax: 110, Xip: []uint64{100, 105}}, 105, false},
		{"xmin itself in xip", Watermark{Xmin: 100, Xmax: 110, Xip: []uint64{100}}, 100, false},
		{"at xmax", Watermark{Xmin: 100, Xmax: 110}, 110, false},
		{"above xmax, not listed", Watermark{Xmin: 100, Xmax: 110}, 111, false},
		{"xmax wrapped, xid before it", Watermark{Xmin: epoch - 5, Xmax: epoch + 3}, 1, true},
		{"xmax wrapped, xid at it", Watermark{Xmin: epoch - 5, Xmax: epoch + 3}, 3, false},
		{"xmax wrapped, xid in xip", Watermark{Xmin: epoch - 5, Xmax: epoch + 3, Xip: []uint64{epoch + 1}}, 1, false},
		{"xmin wrapped, xid older", Watermark{Xmin: 2*epoch + 2, Xmax: 2*epoch + 9}, ^uint32(0), true},
	} {
		if got := tc.wm.visible(tc.xid); got != tc.want {
			t.Errorf("%s: visible(%d) to %+v = %v, want %v", tc.name, tc.xid, tc.wm, got, tc.want)
		}
	}
}

// TestOwnWatermark: a message with the watermark prefix is a watermark
// only with the key of its chunk id under this registry's secret: the
// right id without a key, with a wrong key, or with the key of another
// registry (another pgq) stays in the transaction as a message and
// changes no chunk; the chunk's own key makes it a watermark, also once
// the chunk is closed.
func TestOwnWatermark(t *testing.T) {
	b, other := NewBackfills(), NewBackfills()
	w := b.Watch("public", "t", []string{"id"})
	ch := w.Open("bf1.n.1", "bf1")
	ow := other.Watch("public", "t", []string{"id"})
	och := ow.Open("bf1.n.1", "bf1")
	if ch.Key() == och.Key() || len(ch.Key()) != 32 {
		t.Fatalf("keys %q, %q", ch.Key(), och.Key())
	}
	log := slog.New(slog.DiscardHandler)
	msg := func(content string) pgq.Change {
		return pgq.Change{Op: pgq.OpMessage, Prefix: WatermarkPrefix, Transactional: true, Content: []byte(content)}
	}
	for _, content := range []string{
		`{"id":"bf1.n.1","kind":"low"}`,
		`{"id":"bf1.n.1","kind":"low","key":"` + strings.Repeat("0", 32) + `"}`,
		`{"id":"bf1.n.1","kind":"low","key":"` + och.Key() + `"}`,
		`{"id":"bf1.n.1","kind":"low","key":"` + ch.Key()[:31] + `"}`,
		`{"id":"bf1.n.2","kind":"low","key":"` + ch.Key() + `"}`,
		`{`,
	} {
		tx := &pgq.Transaction{Changes: []pgq.Change{msg(content)}}
		b.mu.Lock()
		highs, _ := b.takeWatermarks(tx, log)
		b.mu.Unlock()
		if len(tx.Changes) != 1 || string(tx.Changes[0].Content) != content || ch.lowSeen || len(highs) != 0 {
			t.Fatalf("%s: changes %v, lowSeen %v, highs %d", content, tx.Changes, ch.lowSeen, len(highs))
		}
	}
	tx := &pgq.Transaction{Changes: []pgq.Change{msg(`{"id":"bf1.n.1","kind":"low","key":"` + ch.Key() + `"}`)}}
	b.mu.Lock()
	b.takeWatermarks(tx, log)
	b.mu.Unlock()
	if len(tx.Changes) != 0 || !ch.lowSeen {
		t.Fatalf("own watermark: changes %v, lowSeen %v", tx.Changes, ch.lowSeen)
	}
	ch.Close()
	tx = &pgq.Transaction{Changes: []pgq.Change{msg(`{"id":"bf1.n.1","kind":"high","key":"` + ch.Key() + `"}`)}}
	b.mu.Lock()
	highs, _ := b.takeWatermarks(tx, log)
	b.mu.Unlock()
	if len(tx.Changes) != 0 || len(highs) != 0 {
		t.Fatalf("closed chunk's own watermark: changes %v, highs %d", tx.Changes, len(highs))
	}
}

// TestSetChangesEncodes: the deprecated SetChanges hands ingest the
// record of the changes it is given, which decodes back to them.
func TestSetChangesEncodes(t *testing.T) {
	w := NewBackfills().Watch("public", "t", []string{"id"})
	ch := w.Open("bf1.n.1", "bf1")
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}
	var changes []pgq.Change
	for _, v := range []string{"1", "2", "3"} {
		changes = append(changes, pgq.Change{Op: pgq.OpRead, Schema: "public", Table: "t", Columns: cols,
			New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(v)}, {Kind: pgq.ValueNull}}})
	}
	ch.SetChanges(nil, changes, nil)
	got, err := ch.decode()
	if err != nil || len(got) != len(changes) {
		t.Fatalf("decoded %d changes, %v; want %d", len(got), err, len(changes))
	}
	for i := range got {
		if fmt.Sprint(got[i]) != fmt.Sprint(changes[i]) {
			t.Errorf("change %d: %+v, want %+v", i, got[i], changes[i])
		}
	}
}
