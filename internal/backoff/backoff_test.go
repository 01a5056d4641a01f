package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestJitterSpreadsBackoff(t *testing.T) {
	const d = 800 * time.Millisecond
	seen := map[time.Duration]bool{}
	for range 200 {
		j := Jitter(d)
		if j < d/2 || j > d {
			t.Fatalf("Jitter(%s) = %s, want within [%s, %s]", d, j, d/2, d)
		}
		seen[j] = true
	}
	if len(seen) < 10 {
		t.Fatalf("Jitter(%s) took only %d distinct values in 200 draws", d, len(seen))
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
}

// TestRetryGrowsWithoutProgress: failures without progress double the
// wait up to Max and end in GiveUp; one with progress starts afresh, and
// the time before it does not count towards GiveUp.
func TestRetryGrowsWithoutProgress(t *testing.T) {
	r := Retry{Min: 100 * time.Millisecond, Max: time.Second, GiveUp: 10 * time.Second}
	now := time.Unix(1000, 0)
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		// An attempt that got as far as streaming before the same error:
		// no progress, so no reset (the old loop reset here every time).
		wait, giveUp := r.Failed(now, false)
		w *= time.Millisecond
		if giveUp || wait < w/2 || wait > w {
			t.Fatalf("failure %d: wait %s giveUp %v, want within [%s, %s]", i+1, wait, giveUp, w/2, w)
		}
		now = now.Add(time.Second)
	}
	if got := r.Failing(now); got != 6*time.Second {
		t.Fatalf("Failing = %s, want 6s", got)
	}
	now = now.Add(4 * time.Second)
	if _, giveUp := r.Failed(now, false); !giveUp {
		t.Fatalf("no give-up after %s of failures without progress", r.Failing(now))
	}

	// Progress: the wait is back at Min and the give-up clock restarts.
	now = now.Add(time.Hour)
	wait, giveUp := r.Failed(now, true)
	if giveUp || wait > 100*time.Millisecond {
		t.Fatalf("after progress: wait %s giveUp %v, want ≤ 100ms and no give-up", wait, giveUp)
	}
	for i := range 3 {
		now = now.Add(4 * time.Second)
		if _, giveUp := r.Failed(now, false); giveUp != (i == 2) {
			t.Fatalf("%s after progress: giveUp %v", r.Failing(now), giveUp)
		}
	}

	// GiveUp zero: never.
	r = Retry{Min: time.Millisecond, Max: time.Millisecond}
	for range 100 {
		now = now.Add(time.Hour)
		if _, giveUp := r.Failed(now, false); giveUp {
			t.Fatal("gave up with GiveUp zero")
		}
	}
}
