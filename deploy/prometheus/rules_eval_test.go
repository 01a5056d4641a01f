package prometheus

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestAlertExpressions evaluates the rules' expressions with Prometheus's
// engine over series shaped like the situations they describe: each
// fires on its situation and stays quiet on the healthy one.
func TestAlertExpressions(t *testing.T) {
	groups, err := ruleFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	// 1-minute samples over 40 minutes; instance "bad" is in the
	// situation, "ok" is healthy.
	st := promqltest.LoadedStorage(t, `
load 1m
  pgq_slot_lag_bytes{instance="bad"} 300000000+10000000x40
  pgq_slot_lag_bytes{instance="ok"} 300000000+0x40
  pgq_server_wal_end_lsn{instance="bad"} 1000+1000x40
  pgq_covered_lsn{instance="bad"} 1000+0x40
  pgq_server_wal_end_lsn{instance="ok"} 1000+1000x40
  pgq_covered_lsn{instance="ok"} 1000+1000x40
  pgq_ingest_connected{instance="bad"} 0x40
  pgq_ingest_connected{instance="ok"} 1x40
  pgq_group_out_of_range{instance="bad", group="g"} 1x40
  pgq_group_out_of_range{instance="ok", group="g"} 0x40
  pgq_retention_lost_records_total{instance="bad", group="g"} 0x20 5+0x20
  pgq_retention_lost_records_total{instance="ok", group="g"} 0x40
  pgq_fsync_seconds_bucket{instance="bad", store="journal", le="0.1"} 0+0x40
  pgq_fsync_seconds_bucket{instance="bad", store="journal", le="1"} 0+100x40
  pgq_fsync_seconds_bucket{instance="bad", store="journal", le="+Inf"} 0+100x40
  pgq_fsync_seconds_bucket{instance="ok", store="journal", le="0.1"} 0+100x40
  pgq_fsync_seconds_bucket{instance="ok", store="journal", le="1"} 0+100x40
  pgq_fsync_seconds_bucket{instance="ok", store="journal", le="+Inf"} 0+100x40
  pgq_bridge_broker_up{instance="bad", group="g", broker="jetstream"} 0x40
  pgq_bridge_broker_up{instance="ok", group="g", broker="jetstream"} 1x40
  pgq_bridge_errors_total{instance="bad", group="g", broker="jetstream", kind="publish"} 0+10x40
  pgq_bridge_published_messages_total{instance="bad", group="g", broker="jetstream"} 500x40
  pgq_bridge_errors_total{instance="ok", group="g", broker="jetstream", kind="publish"} 0+1x40
  pgq_bridge_published_messages_total{instance="ok", group="g", broker="jetstream"} 0+100x40
`)
	t.Cleanup(func() { _ = st.Close() })
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 1e6)
	at := time.Unix(0, 0).Add(25 * time.Minute)
	if len(exprs) == 0 {
		t.Fatal("no alerts")
	}
	for alert, expr := range exprs {
		q, err := engine.NewInstantQuery(context.Background(), st, promql.NewPrometheusQueryOpts(false, 0, nil), expr, at)
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", alert, res.Err)
		}
		v, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		var instances []string
		for _, s := range v {
			instances = append(instances, s.Metric.Get("instance"))
		}
		if len(instances) != 1 || instances[0] != "bad" {
			t.Errorf("%s fires for %v, want [bad]: %s", alert, instances, expr)
		}
		q.Close()
	}
}
