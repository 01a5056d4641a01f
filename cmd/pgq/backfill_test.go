package main

import (
	"testing"

	"github.com/pgq-dev/pgq/client"
)

func TestProgressLine(t *testing.T) {
	eta := 6.2
	for _, c := range []struct {
		b    client.Backfill
		want string
	}{
		{client.Backfill{ID: "bf1", State: "running", Table: "public.orders", Rows: 52000, RowsEstimate: 100000, Rate: 8100.4, ETA: &eta},
			"[###############...............]  52% bf1 public.orders 52000/100000 rows 8100/s ETA 6s"},
		{client.Backfill{ID: "bf2", State: "running", Table: "t", Rows: 10, RowsEstimate: 100, Rate: 9.6, MaxRate: 10},
			"[###...........................]  10% bf2 t 10/100 rows 10/s (cap 10/s)"},
		{client.Backfill{ID: "bf3", State: "done", Table: "t", Rows: 7, RowsEstimate: 0},
			"[##############################] 100% bf3 t 7/0 rows done"},
	} {
		if got := progressLine(c.b); got != c.want {
			t.Errorf("progressLine(%s):\n got %q\nwant %q", c.b.ID, got, c.want)
		}
	}
}
