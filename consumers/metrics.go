package consumers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// collector exports per-group gauges computed at scrape time.
type collector struct {
	m                               *Manager
	records, bytes, seconds, cursor *prometheus.Desc
	outOfRange                      *prometheus.Desc
}

// tailDeliveryBuckets are the bounds (seconds) of
// pgq_tail_delivery_seconds: 0.25 ms growing by 1.5× to about 2.8 s.
var tailDeliveryBuckets = prometheus.ExponentialBuckets(0.00025, 1.5, 24)

// journalDeliveryBuckets are the bounds (seconds) of
// pgq_journal_to_delivery_seconds: 0.5 ms growing by 1.2× to about 5 s,
// fine around the 1–100 ms a live reader's wait takes (at 50 ms a bucket
// is 8 ms wide).
var journalDeliveryBuckets = prometheus.ExponentialBuckets(0.0005, 1.2, 51)

// observeJournalDelivery observes journaled → now of the record at off,
// when its journaling time is known.
func (m *Manager) observeJournalDelivery(off pgq.Offset) {
	if t, ok := m.j.WrittenAt(off); ok {
		m.journalDelivery.Observe(time.Since(t).Seconds())
	}
}

// Collector returns a Prometheus collector of the groups' lag:
// pgq_group_lag_records, pgq_group_lag_bytes, pgq_group_lag_seconds,
// pgq_group_committed_offset, pgq_group_out_of_range and
// pgq_retention_lost_records_total and pgq_fetch_aborted_total,
// labelled by group, and the
// histograms pgq_tail_delivery_seconds (commit → fetch answer of the
// transactions long polls waited for) and pgq_journal_to_delivery_seconds
// (journaling, journal.WrittenAt → fetch answer).
func (m *Manager) Collector() prometheus.Collector {
	l := []string{"group"}
	return &collector{
		m:          m,
		records:    prometheus.NewDesc("pgq_group_lag_records", "Journal records after the group's committed offset.", l, nil),
		bytes:      prometheus.NewDesc("pgq_group_lag_bytes", "Encoded bytes of the journal records after the group's committed offset.", l, nil),
		seconds:    prometheus.NewDesc("pgq_group_lag_seconds", "Now minus the commit time of the group's next undelivered record (0 when caught up).", l, nil),
		cursor:     prometheus.NewDesc("pgq_group_committed_offset", "The group's committed offset.", l, nil),
		outOfRange: prometheus.NewDesc("pgq_group_out_of_range", "1 when the group's cursor is below the journal start.", l, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.m.retentionLost.Describe(ch)
	c.m.tailDelivery.Describe(ch)
	c.m.journalDelivery.Describe(ch)
	c.m.fetchAborted.Describe(ch)
	c.m.hold.gauge.Describe(ch)
	ch <- c.records
	ch <- c.bytes
	ch <- c.seconds
	ch <- c.cursor
	ch <- c.outOfRange
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	groups := c.m.List(context.Background())
	// Every group has its retention-loss series from the first scrape on,
	// at 0 until a cap drops its records: increase() in the alert rule
	// (deploy/prometheus) sees a first loss only after a zero sample.
	for _, gi := range groups {
		c.m.retentionLost.WithLabelValues(gi.Name)
	}
	c.m.retentionLost.Collect(ch)
	c.m.tailDelivery.Collect(ch)
	c.m.journalDelivery.Collect(ch)
	c.m.fetchAborted.Collect(ch)
	c.m.hold.gauge.Collect(ch)
	for _, gi := range groups {
		oor := 0.0
		if gi.Lag.OutOfRange {
			oor = 1
		}
		for _, v := range []struct {
			d *prometheus.Desc
			v float64
		}{
			{c.records, float64(gi.Lag.Records)},
			{c.bytes, float64(gi.Lag.Bytes)},
			{c.seconds, gi.Lag.Seconds},
			{c.cursor, float64(gi.CommittedOffset)},
			{c.outOfRange, oor},
		} {
			if mt, err := prometheus.NewConstMetric(v.d, prometheus.GaugeValue, v.v, gi.Name); err == nil {
				ch <- mt
			}
		}
	}
}

// Status returns the "groups" object of /v1/status: group name → its
// committed offset, lease holder and lag (and, when a corrupt record
// stops it, where and why).
func (m *Manager) Status() map[string]api.GroupStatus {
	out := map[string]api.GroupStatus{}
	for _, gi := range m.List(context.Background()) {
		out[gi.Name] = api.GroupStatus{CommittedOffset: gi.CommittedOffset, Member: gi.Member, Lag: gi.Lag,
			StuckAt: gi.StuckAt, JournalError: gi.JournalError}
	}
	return out
}
