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

// Retry is the schedule of a retry loop whose attempts can get something
// done before they fail (ingest's reconnects: a session may stream for a
// while). The wait doubles from Min up to Max while attempts fail without
// progress, and GiveUp (zero: never) ends the loop once they have done so
// for that long. Only an attempt that made progress starts the schedule
// afresh: an error that comes back every time, however late in each
// attempt, must neither keep the wait at Min nor hold off GiveUp. Not safe
// for concurrent use; the zero value needs Min and Max set.
type Retry struct {
	Min, Max, GiveUp time.Duration
	delay            time.Duration
	since            time.Time // when the current run of failures began (zero: none)
}

// Failed records an attempt that failed at now; progress says whether it
// got something done first. It returns the jittered wait before the next
// attempt, or giveUp once attempts have failed without progress for
// GiveUp.
func (r *Retry) Failed(now time.Time, progress bool) (wait time.Duration, giveUp bool) {
	if progress || r.since.IsZero() {
		r.since, r.delay = now, r.Min
	}
	if r.GiveUp > 0 && now.Sub(r.since) >= r.GiveUp {
		return 0, true
	}
	wait = Jitter(r.delay)
	r.delay = min(r.delay*2, r.Max)
	return wait, false
}

// Failing is how long attempts have been failing without progress (zero:
// none failed yet).
func (r *Retry) Failing(now time.Time) time.Duration {
	if r.since.IsZero() {
		return 0
	}
	return now.Sub(r.since)
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
