package console

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Sample is one point of the console's charts.
type Sample struct {
	Time time.Time `json:"time"`
	// Connected: ingest held a replication connection.
	Connected bool `json:"connected"`
	// SlotLagBytes is the server's WAL end minus the confirmed LSN (as
	// pgq_slot_lag_bytes).
	SlotLagBytes uint64 `json:"slot_lag_bytes"`
	// JournalBytes is the journal's size on disk.
	JournalBytes int64 `json:"journal_bytes"`
	// ChangesWritten counts changes in fsynced records since pgq started
	// (the page draws its rate).
	ChangesWritten uint64 `json:"changes_written"`
}

// StatusHistory is the body of GET /v1/status/history (httpapi/openapi.json,
// schema StatusHistory). Its fields, and Retention's, are in alphabetical
// order of their keys: the order the document has always been written in.
type StatusHistory struct {
	// Interval is the time between samples (a Go duration, "5s").
	Interval string `json:"interval"`
	// Retention is the journal's retention: "0s" or 0 means no such bound.
	Retention HistoryRetention `json:"retention"`
	// Samples are oldest first.
	Samples []Sample `json:"samples"`
	// Window is how far back samples are kept (a Go duration).
	Window string `json:"window"`
}

// HistoryRetention is StatusHistory's retention: the journal's bounds
// (durations as Go durations, "24h0m0s").
type HistoryRetention struct {
	MaxAge   string `json:"max_age"`
	MaxBytes int64  `json:"max_bytes"`
	MinAge   string `json:"min_age"`
}

// HistoryOptions configures a History.
type HistoryOptions struct {
	// Interval between samples; zero: 5s.
	Interval time.Duration
	// Window kept; zero: one hour.
	Window time.Duration
}

// Validate rejects negative values and fills defaults.
func (o *HistoryOptions) Validate() error {
	if o.Interval < 0 || o.Window < 0 {
		return errors.New("console: negative history interval or window")
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Second
	}
	if o.Window == 0 {
		o.Window = time.Hour
	}
	if o.Window < o.Interval {
		return errors.New("console: history window below its interval")
	}
	return nil
}

// History keeps the last Window of Samples in a fixed ring.
type History struct {
	o    HistoryOptions
	mu   sync.Mutex
	ring []Sample
	next int  // where the next sample goes
	full bool // the ring has wrapped
}

// NewHistory returns an empty History.
func NewHistory(o HistoryOptions) (*History, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &History{o: o, ring: make([]Sample, int(o.Window/o.Interval))}, nil
}

// Interval is the time between samples.
func (h *History) Interval() time.Duration { return h.o.Interval }

// Window is how far back samples are kept.
func (h *History) Window() time.Duration { return h.o.Window }

// Add appends s, dropping the oldest sample once the window is full.
func (h *History) Add(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = s
	h.next++
	if h.next == len(h.ring) {
		h.next, h.full = 0, true
	}
}

// Snapshot returns the samples oldest first (a copy).
func (h *History) Snapshot() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.full {
		return append([]Sample(nil), h.ring[:h.next]...)
	}
	return append(append([]Sample(nil), h.ring[h.next:]...), h.ring[:h.next]...)
}

// Run adds sample() at once and then every Interval until ctx ends.
func (h *History) Run(ctx context.Context, sample func() Sample) {
	h.Add(sample())
	t := time.NewTicker(h.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Add(sample())
		}
	}
}
