package consumers

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRetentionLostSeriesFromCreation: a group's
// pgq_retention_lost_records_total is exported at 0 before any loss, so
// that increase() in the alert rules sees the first loss.
func TestRetentionLostSeriesFromCreation(t *testing.T) {
	e := newSharedEnv(t, 200)
	if _, err := e.m.Create(context.Background(), CreateRequest{Name: "fresh", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pgq_retention_lost_records_total Journal records an age or size cap dropped before the group consumed them.
# TYPE pgq_retention_lost_records_total counter
pgq_retention_lost_records_total{group="fresh"} 0
`
	if err := testutil.CollectAndCompare(e.m.Collector(), strings.NewReader(want), "pgq_retention_lost_records_total"); err != nil {
		t.Error(err)
	}
}
