package ingest

import (
	"net"
	"time"
)

// Receive coalescing. The walsender flushes its socket after every
// message, so a receiver that keeps up wakes, reads and parks once per
// message: at full speed that was most of pgq's CPU (one read syscall, one
// netpoll park and one wake-up per 150-byte message), CPU taken from the
// walsender on the same machine. While messages arrive faster than
// coalesceBurst per coalesceRateWindow, the loop raises the socket's
// receive low-water mark (SO_RCVLOWAT), so the kernel wakes it only once
// coalesceLowWater bytes wait, or when the gathering window (the read
// deadline) ends: one wake-up per window instead of one per message. A
// window that brings fewer than coalesceBurst messages ends coalescing, so
// a message waits at most one window, and only while the server streams at
// full speed; a trickle of transactions is read as it comes.

const (
	// DefaultReceiveCoalesce is Options.ReceiveCoalesce when zero.
	DefaultReceiveCoalesce = 500 * time.Microsecond
	// MaxReceiveCoalesce bounds Options.ReceiveCoalesce.
	MaxReceiveCoalesce = 10 * time.Millisecond

	coalesceBurst      = 32
	coalesceRateWindow = time.Millisecond
	coalesceLowWater   = 64 << 10
)

// coalescer is the receive loop's coalescing state. Only the session
// goroutine uses it.
type coalescer struct {
	wait time.Duration // the gathering window; 0: never coalesce
	// setLowWater sets the socket's receive low-water mark (1: off).
	setLowWater func(bytes int) error
	// windows counts gathering windows (the metric).
	windows func()

	on bool
	// since starts the current rate window (off) or gathering window (on),
	// n counts the messages received in it.
	since time.Time
	n     int
}

func newCoalescer(conn net.Conn, wait time.Duration, windows func()) *coalescer {
	c := &coalescer{wait: wait, windows: windows}
	if wait > 0 {
		c.setLowWater = lowWaterSetter(conn)
	}
	if c.setLowWater == nil {
		c.wait = 0 // not a socket this platform can tune
	}
	return c
}

// received counts one message; it switches coalescing on when the rate
// window saw coalesceBurst of them.
func (c *coalescer) received(now time.Time) {
	if c.wait == 0 {
		return
	}
	c.n++
	if c.on {
		return
	}
	if now.Sub(c.since) > coalesceRateWindow {
		c.since, c.n = now, 1
		return
	}
	if c.n >= coalesceBurst && c.setLowWater(coalesceLowWater) == nil {
		c.on, c.since, c.n = true, now, 0
		c.windows()
	}
}

// deadline is when the loop must wake while coalescing (zero: not
// coalescing). A gathering window that has passed starts the next one, or
// ends coalescing when it brought fewer than coalesceBurst messages.
func (c *coalescer) deadline(now time.Time) time.Time {
	if !c.on {
		return time.Time{}
	}
	end := c.since.Add(c.wait)
	if now.Before(end) {
		return end
	}
	if c.n < coalesceBurst {
		c.off(now)
		return time.Time{}
	}
	c.since, c.n = now, 0
	c.windows()
	return now.Add(c.wait)
}

// off ends coalescing. If the socket refuses, coalescing stays on (its
// windows still bound the wait).
func (c *coalescer) off(now time.Time) {
	if c.setLowWater(1) == nil {
		c.on, c.since, c.n = false, now, 0
	}
}
