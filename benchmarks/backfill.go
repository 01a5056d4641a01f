package benchmarks

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// backfillRow (issue 12): a table of rows that predate the slot is
// backfilled into the load pgq's journal (10,000-row chunks, watermarks
// through the slot, streaming going on), and the rate is compared with
// PostgreSQL's own COPY (SELECT * FROM t) TO STDOUT of the same table on
// the same server, in the same run.
func (e *env) backfillRow(ctx context.Context, p *pgqProc) Row {
	const metric, target = "backfill vs COPY TO STDOUT of the same table", "≥ 0.5× COPY"
	rows := 200_000
	if e.cfg.Full {
		rows = 5_000_000
	}
	if _, err := e.conn.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS bench_backfill;
		CREATE TABLE bench_backfill (id bigint PRIMARY KEY, account int, amount numeric(12,2), note text, created timestamptz);
		INSERT INTO bench_backfill SELECT g, g %% 1000, (g %% 10000) / 100.0, 'backfilled row ' || g, now() FROM generate_series(1, %d) g;
		ANALYZE bench_backfill`, rows)); err != nil {
		return notMeasured(metric, target, "create the table: "+trimErr(err))
	}
	start := time.Now()
	if _, err := e.conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT * FROM bench_backfill) TO STDOUT"); err != nil {
		return notMeasured(metric, target, "COPY: "+trimErr(err))
	}
	copyTook := time.Since(start)

	cl, err := client.Dial(p.addr, client.Options{Retry: client.RetryOptions{GiveUp: -1}})
	if err != nil {
		return notMeasured(metric, target, "client: "+trimErr(err))
	}
	start = time.Now()
	bf, err := cl.StartBackfill(ctx, api.BackfillRequest{Tables: []string{"public.bench_backfill"}, ChunkSize: 10_000})
	if err != nil {
		return notMeasured(metric, target, "start: "+trimErr(err))
	}
	for !bf.Finished() {
		time.Sleep(20 * time.Millisecond)
		if bf, err = cl.Backfill(ctx, bf.ID); err != nil {
			return notMeasured(metric, target, "status: "+trimErr(err))
		}
		if time.Since(start) > 30*time.Minute {
			return notMeasured(metric, target, "the backfill did not finish in 30 minutes")
		}
	}
	took := time.Since(start)
	if bf.State != "done" {
		why := bf.State
		if bf.Error != nil {
			why += ": " + *bf.Error
		}
		return notMeasured(metric, target, "backfill "+why)
	}
	v, ref := float64(rows)/took.Seconds(), float64(rows)/copyTook.Seconds()
	r := Row{Metric: metric, Unit: "rows/s", PGQ: f64(v), Reference: f64(ref), RefName: "COPY TO STDOUT", Ratio: f64(v / ref), Target: target}
	r.check(v/ref >= 0.5)
	r.Note = fmt.Sprintf("%d rows: backfill %.2fs (%d chunks, %d redone, %d dropped by the window) vs COPY %.2fs; streaming went on", rows, took.Seconds(), bf.Chunks, bf.Redone, bf.Dropped, copyTook.Seconds())
	return r
}
