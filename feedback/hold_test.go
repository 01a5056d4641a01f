package feedback

import (
	"testing"

	"github.com/pgq-dev/pgq"
)

// holder is a settable hold floor, as consumers publishes it.
type holder struct {
	floor pgq.LSN
	ok    bool
}

func (h *holder) get() (pgq.LSN, bool) { return h.floor, h.ok }

// TestHoldFloorCapsEveryBranch: with a holding group the confirmable LSN
// is the smaller of the durable rule and the floor, in the durable, the
// completed and the idle (keepalive WAL end) branches; it follows the
// floor up, never goes back, and without a holder it is today's rule.
func TestHoldFloorCapsEveryBranch(t *testing.T) {
	h := &holder{floor: 150, ok: true}
	tr := NewTracker(100)
	tr.SetHold(h.get)
	tr.Submitted(200)
	tr.Durable(200)
	if got := tr.Confirmable(); got != 150 {
		t.Fatalf("durable 200, floor 150: confirmable %v, want 150", got)
	}
	tr.Skipped(300) // completed branch
	tr.ServerWALEnd(900)
	if got := tr.Confirmable(); got != 150 {
		t.Fatalf("idle, WAL end 900, floor 150: confirmable %v (the idle advance passed the floor)", got)
	}
	h.floor = 250
	if got := tr.Confirmable(); got != 250 {
		t.Fatalf("floor up to 250: confirmable %v", got)
	}
	h.floor = 120 // a holding group reset backwards: the slot cannot follow
	if got := tr.Confirmable(); got != 250 {
		t.Fatalf("floor back to 120: confirmable %v, want 250 (never backwards)", got)
	}
	h.ok = false // nobody holds (past --hold-slot-max-lag, or unmarked)
	if got := tr.Confirmable(); got != 900 {
		t.Fatalf("no holder: confirmable %v, want the WAL end 900", got)
	}
}

// TestHoldFloorAtStart: a restart whose journal coverage is past the
// holding groups does not confirm its coverage; the slot's own position
// (SlotAt) is the lowest it goes, and a floor of 0 (nothing committed
// yet) keeps the slot where it is.
func TestHoldFloorAtStart(t *testing.T) {
	h := &holder{floor: 0, ok: true}
	tr := NewTracker(500)
	tr.SetHold(h.get)
	if got := tr.Confirmable(); got != 0 {
		t.Fatalf("nothing committed, slot unknown: confirmable %v, want 0 (nothing sent)", got)
	}
	tr.SlotAt(300)
	tr.ServerWALEnd(800)
	if got := tr.Confirmable(); got != 300 {
		t.Fatalf("slot at 300, floor 0: confirmable %v, want the slot's 300", got)
	}
	h.floor = 450
	if got := tr.Confirmable(); got != 450 {
		t.Fatalf("floor 450 below coverage 500: confirmable %v", got)
	}
}
