package consumers

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgq-dev/pgq"
)

// TestHoldFloor: the hold floor is the end LSN of the last complete
// transaction at or below the oldest committed position among holding
// groups: 0 before any commit, A's end after A, still A's while the
// position sits inside B's parts (a shared group's low-water mark can),
// the slower of two holders; a group that does not hold is ignored, and
// the mark survives a restart.
func TestHoldFloor(t *testing.T) {
	m, _ := partsJournal(t) // A at 1 (end 110), B at 2..7 (end 210), C at 8 (end 310)
	ctx := context.Background()
	if _, ok := m.HoldFloor(); ok {
		t.Fatal("no holding group, yet HoldFloor holds")
	}
	if _, err := m.Create(ctx, CreateRequest{Name: "free", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	if err := m.HoldSlotFor(ctx, []string{"h", "free"}); err != nil {
		t.Fatal(err)
	}
	if f, ok := m.HoldFloor(); !ok || f != 0 {
		t.Fatalf("holders at the start: floor %v %v, want 0 true", f, ok)
	}
	gi, err := m.Info(ctx, "h")
	if err != nil || !gi.HoldSlot || gi.From != "earliest" || gi.Mode != "exclusive" {
		t.Fatalf("created holder: %+v %v", gi, err)
	}
	commit := func(name string, off pgq.Offset) {
		t.Helper()
		if _, err := m.Fetch(ctx, name, FetchRequest{Member: "a", Max: 10, Wait: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Commit(ctx, name, "a", off, 0); err != nil {
			t.Fatal(err)
		}
		m.RefreshHold()
	}
	commit("h", 1)
	if f, ok := m.HoldFloor(); !ok || f != 0 {
		t.Fatalf("h at 1, free at 0: floor %v %v, want 0 (the slower holder)", f, ok)
	}
	commit("free", 8)
	if f, _ := m.HoldFloor(); f != 110 {
		t.Fatalf("h at 1: floor %v, want 110", f)
	}
	// A low-water mark inside B (part 2 of 6): B is not complete there.
	g, _ := m.get("h")
	g.mu.Lock()
	g.st.Cursor = 4
	g.mu.Unlock()
	m.RefreshHold()
	if f, _ := m.HoldFloor(); f != 110 {
		t.Fatalf("h inside B: floor %v, want A's end 110", f)
	}
	g.mu.Lock()
	g.st.Cursor = 7
	g.mu.Unlock()
	m.RefreshHold()
	if f, _ := m.HoldFloor(); f != 210 {
		t.Fatalf("h at B's final part: floor %v, want 210", f)
	}
	// Not a holder: a group without hold_slot behind everyone.
	if _, err := m.Create(ctx, CreateRequest{Name: "slow", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	m.RefreshHold()
	if f, _ := m.HoldFloor(); f != 210 {
		t.Fatalf("a non-holding group moved the floor to %v", f)
	}
	// The mark is stored: a restarted manager holds for both.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(ManagerOptions{Journal: m.j, Index: m.ix})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if f, ok := m2.HoldFloor(); !ok || f != 110 {
		t.Fatalf("after a restart: floor %v %v, want 110 (h's stored cursor 1)", f, ok)
	}
}

// TestHoldSlotMaxLag: a holder more than HoldSlotMaxLag bytes of WAL
// behind the journal's end stops holding (HoldFloor ignores it, its info
// says hold_released, the gauge is 1) and holds again once back within
// the bound.
func TestHoldSlotMaxLag(t *testing.T) {
	m, _ := partsJournal(t)
	m.o.HoldSlotMaxLag = 150 // end 310: a holder at A (110) lags 200
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "h", From: "earliest", HoldSlot: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fetch(ctx, "h", FetchRequest{Member: "a", Max: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, "h", "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	m.RefreshHold()
	if f, ok := m.HoldFloor(); ok {
		t.Fatalf("holder 200 bytes behind with a 150-byte bound: still holding at %v", f)
	}
	if gi, _ := m.Info(ctx, "h"); !gi.HoldSlot || !gi.HoldReleased {
		t.Fatalf("info %+v: want hold_slot and hold_released", gi)
	}
	if v := gaugeValue(t, m, "h"); v != 1 {
		t.Fatalf("pgq_hold_slot_released = %v, want 1", v)
	}
	if _, err := m.Fetch(ctx, "h", FetchRequest{Member: "a", Max: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, "h", "a", 8, 0); err != nil {
		t.Fatal(err)
	}
	m.RefreshHold()
	if f, ok := m.HoldFloor(); !ok || f != 310 {
		t.Fatalf("holder caught up: floor %v %v, want 310 true", f, ok)
	}
	if gi, _ := m.Info(ctx, "h"); gi.HoldReleased || gaugeValue(t, m, "h") != 0 {
		t.Fatalf("caught up, still released: %+v", gi)
	}
}

func gaugeValue(t *testing.T, m *Manager, group string) float64 {
	t.Helper()
	g, err := m.hold.gauge.GetMetricWithLabelValues(group)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.ToFloat64(g)
}
