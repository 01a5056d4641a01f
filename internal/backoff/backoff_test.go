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
