// Package backoff holds the two pieces every retry loop of pgq shares
// (ingest's reconnect, the client's retries, the bridge's publish): a
// jittered wait and a sleep that ends with its context. It imports only
// the standard library, so the client may use it. Both functions are safe
// for concurrent use.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter draws a wait from [d/2, d], so that many processes that failed
// together do not retry in lockstep.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Sleep waits d, or until ctx ends (returning its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
