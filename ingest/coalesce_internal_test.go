package ingest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/journal"
)

// fakeSocket records the low-water marks a coalescer sets.
type fakeSocket struct {
	marks   []int
	refuse  bool
	windows int
}

func (f *fakeSocket) coalescer(wait time.Duration) *coalescer {
	return &coalescer{wait: wait, windows: func() { f.windows++ },
		setLowWater: func(b int) error {
			if f.refuse {
				return errors.New("refused")
			}
			f.marks = append(f.marks, b)
			return nil
		}}
}

func TestCoalescerSwitchesOnAtFullSpeedOnly(t *testing.T) {
	f := &fakeSocket{}
	c := f.coalescer(500 * time.Microsecond)
	t0 := time.Unix(1000, 0)
	// A trickle: one message every 100µs (10k/s) never switches it on.
	for i := range 200 {
		c.received(t0.Add(time.Duration(i) * 100 * time.Microsecond))
	}
	if c.on || len(f.marks) != 0 || !c.deadline(t0.Add(time.Second)).IsZero() {
		t.Fatalf("coalescing at 10k messages/s: on=%v marks=%v", c.on, f.marks)
	}
	// A burst: coalesceBurst messages within a millisecond.
	t1 := t0.Add(time.Minute)
	for i := range coalesceBurst {
		if c.on {
			t.Fatalf("on after %d messages of the burst, want %d", i, coalesceBurst)
		}
		c.received(t1.Add(time.Duration(i) * time.Microsecond))
	}
	if !c.on || len(f.marks) != 1 || f.marks[0] != coalesceLowWater || f.windows != 1 {
		t.Fatalf("after a burst: on=%v marks=%v windows=%d", c.on, f.marks, f.windows)
	}
	on := t1.Add(time.Duration(coalesceBurst-1) * time.Microsecond)
	if d := c.deadline(on.Add(100 * time.Microsecond)); !d.Equal(on.Add(500 * time.Microsecond)) {
		t.Fatalf("deadline inside the first window = %v, want its end %v", d, on.Add(500*time.Microsecond))
	}
	// The window brought enough messages: the next one starts.
	for i := range coalesceBurst {
		c.received(on.Add(time.Duration(i) * 10 * time.Microsecond))
	}
	end := on.Add(600 * time.Microsecond)
	if d := c.deadline(end); !d.Equal(end.Add(500*time.Microsecond)) || f.windows != 2 {
		t.Fatalf("next window: deadline %v (want %v), windows %d", d, end.Add(500*time.Microsecond), f.windows)
	}
	// A window with fewer messages ends coalescing: the mark goes back to 1.
	c.received(end.Add(time.Microsecond))
	if d := c.deadline(end.Add(time.Millisecond)); !d.IsZero() || c.on || f.marks[len(f.marks)-1] != 1 {
		t.Fatalf("after a slow window: deadline %v, on=%v, marks %v", d, c.on, f.marks)
	}
}

func TestCoalescerOffOrRefused(t *testing.T) {
	t0 := time.Unix(1000, 0)
	burst := func(c *coalescer) {
		for i := range 4 * coalesceBurst {
			c.received(t0.Add(time.Duration(i) * time.Microsecond))
		}
	}
	f := &fakeSocket{}
	off := f.coalescer(0)
	burst(off)
	if off.on || len(f.marks) != 0 {
		t.Fatalf("wait 0 coalesced: marks %v", f.marks)
	}
	r := &fakeSocket{refuse: true}
	c := r.coalescer(time.Millisecond)
	burst(c)
	if c.on || r.windows != 0 || !c.deadline(t0.Add(time.Millisecond)).IsZero() {
		t.Fatalf("a socket refusing SO_RCVLOWAT coalesced: on=%v windows=%d", c.on, r.windows)
	}
}

func TestReceiveCoalesceOption(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	base := Options{PGURL: "postgres://x", Slot: "s", Publication: "p", Journal: j, Committer: journal.NewCommitter(j, journal.CommitterOptions{})}
	for in, want := range map[time.Duration]time.Duration{0: DefaultReceiveCoalesce, -1: -1, 2 * time.Millisecond: 2 * time.Millisecond, MaxReceiveCoalesce: MaxReceiveCoalesce} {
		o := base
		o.ReceiveCoalesce = in
		if err := o.Validate(); err != nil || o.ReceiveCoalesce != want {
			t.Errorf("ReceiveCoalesce %s: validated to %s, %v; want %s", in, o.ReceiveCoalesce, err, want)
		}
	}
	o := base
	o.ReceiveCoalesce = MaxReceiveCoalesce + 1
	if err := o.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Options.ReceiveCoalesce") {
		t.Fatalf("ReceiveCoalesce above the maximum: %v", err)
	}
}
