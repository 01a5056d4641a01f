package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// The readers rows (issue 34 item 2): many long-polling readers while
// ingest journals a steady rate. Exclusive group i filters table
// rt<i mod tables>, one insert per transaction goes round the tables, and
// one unfiltered shared group has sharedMembers members, so each
// transaction wakes the groups of its table and the shared group's
// members. Phases without and with readers alternate; each phase writes
// rate transactions/s for readersFor and measures what pgq journaled.
// Every reader holds one connection of its own (its own transport), so
// the bench raises --http-max-conns above the readers and its own open
// file limit (which pgq inherits) to the hard limit.

// ReadersConfig sizes the readers rows; zero fields take the defaults
// of the issue (1,000 groups, 100 shared members, 1,000 tx/s, 20 s).
type ReadersConfig struct {
	Groups, Shared, Rate, Tables int
	For                          time.Duration
}

func (c ReadersConfig) withDefaults() ReadersConfig {
	if c.Groups == 0 {
		c.Groups = 1000
	}
	if c.Shared == 0 {
		c.Shared = 100
	}
	if c.Rate == 0 {
		c.Rate = 1000
	}
	if c.Tables == 0 {
		c.Tables = c.Groups
	}
	if c.For == 0 {
		c.For = 20 * time.Second
	}
	return c
}

const readersSlot = "pgqbench_readers"

// readersRows runs the readers measurement.
func (e *env) readersRows(ctx context.Context) []Row {
	c := e.cfg.Readers.withDefaults()
	const metric = "ingest with readers vs without"
	target := "≥ 0.95×"
	fail := func(err error) []Row { return []Row{notMeasured(metric, target, trimErr(err))} }
	fdLimit, err := raiseFileLimit()
	if err != nil {
		return fail(err)
	}
	if err := e.readersSchema(ctx, c.Tables); err != nil {
		return fail(err)
	}
	conns := c.Groups + c.Shared + 64
	p, err := e.startPGQ(ctx, "pgq-readers", readersSlot, "--create-slot", "--http-max-conns", fmt.Sprint(conns))
	if err != nil {
		return fail(err)
	}
	defer func() {
		_ = p.stop()
		e.dropSlot(context.Background(), readersSlot)
	}()
	if _, _, err := p.waitJournaled(ctx, 0, time.Minute); err != nil {
		return fail(err)
	}
	cl, err := client.New(p.addr, client.Options{})
	if err != nil {
		return fail(err)
	}
	for i := range c.Groups {
		req := api.CreateRequest{Name: fmt.Sprintf("r%04d", i), Tables: []string{fmt.Sprintf("public.rt%d", i%c.Tables)}}
		if _, err := cl.CreateGroup(ctx, req); err != nil {
			return fail(fmt.Errorf("create group %s: %w", req.Name, err))
		}
	}
	if _, err := cl.CreateGroup(ctx, api.CreateRequest{Name: "rshared", Mode: "shared"}); err != nil {
		return fail(fmt.Errorf("create shared group: %w", err))
	}
	peakRSS := p.samplePeakRSS(100 * time.Millisecond)
	peakFDs := sampleFDs(p.cmd.Process.Pid)
	var alone, with []float64
	var journaled, durable []bucket // pgq's histograms over the phases with readers
	rd := &readers{addr: p.addr, c: c}
	for round := range 2 {
		for _, withReaders := range []bool{false, true} {
			if withReaders {
				if err := rd.skipBacklog(ctx, cl); err != nil {
					return fail(fmt.Errorf("round %d: %w", round, err))
				}
			}
			var before pgqSnapshot
			if withReaders {
				before = p.snapshot(ctx)
				rd.start(ctx)
			}
			rate, err := e.readersPhase(ctx, p, c)
			if withReaders {
				rd.stop()
				after := p.snapshot(ctx)
				journaled = addDelta(journaled, before.journaled, after.journaled)
				durable = addDelta(durable, before.durable, after.durable)
			}
			if err != nil {
				return fail(fmt.Errorf("round %d: %w", round, err))
			}
			if withReaders {
				with = append(with, rate)
			} else {
				alone = append(alone, rate)
			}
		}
	}
	rss, fds := peakRSS(), peakFDs()
	lat, latSh, fetches, errs := rd.results()
	a, w := median(alone), median(with)
	ing := Row{Metric: metric, Unit: "tx/s", PGQ: f64(w), Reference: f64(a), RefName: "no readers", Ratio: f64(w / a), Target: target,
		Note: fmt.Sprintf("%d exclusive groups (one table each of %d, one connection each) + %d members of one shared group, long-polling; %d tx/s offered for %s per phase, phases alternate 2×; --http-max-conns %d, open-file limit %d; journaled tx/s alone %s, with readers %s",
			c.Groups, c.Tables, c.Shared, c.Rate, c.For, conns, fdLimit, fmtRates(alone), fmtRates(with))}
	ing.check(w/a >= 0.95)
	latRows := readersLatency(lat, latSh, fetches, errs, journaled, durable)
	rssRow := Row{Metric: "pgq peak RSS, 1,000+ readers", Unit: "MiB", PGQ: f64(float64(rss) / (1 << 20)), Target: "≤ 256 MiB"}
	rssRow.check(rss <= 256<<20)
	fdRow := Row{Metric: "pgq peak open files, 1,000+ readers", PGQ: f64(float64(fds)), Reference: f64(float64(fdLimit)), RefName: "open-file limit",
		Ratio: f64(float64(fds) / float64(fdLimit)), Target: "within the limit", Note: "/proc/<pid>/fd, sampled every 100 ms"}
	fdRow.check(fds > 0 && uint64(fds) < fdLimit)
	return append(append([]Row{ing}, latRows...), rssRow, fdRow)
}

// readersLatency makes the latency rows of the readers phases. The
// goal's row is journaling → reader: pgq's histogram
// pgq_journal_to_delivery_seconds (the fsync of the transaction's record
// → the fetch answer handing it out: exclusive answers once written,
// shared ones once chosen), over every delivery of the phases with
// readers, bucket-interpolated; the readers' own commit_time → receipt,
// exact per delivery but including commit → journal (the walsender and
// the fsync, pgq's ingest latency), stays as the second row, as before.
func readersLatency(lat, latSh []float64, fetches, errs int, journaled, durable []bucket) []Row {
	jRow := Row{Metric: "journaling → reader p99, 1,000+ readers", Unit: "ms", Target: "≤ 50 ms"}
	p50, ok50 := quantile(zeroed(journaled), journaled, 0.5)
	p99, ok99 := quantile(zeroed(journaled), journaled, 0.99)
	d50, _ := quantile(zeroed(durable), durable, 0.5)
	d99, _ := quantile(zeroed(durable), durable, 0.99)
	if !ok50 || !ok99 {
		jRow = notMeasured(jRow.Metric, jRow.Target, "pgq_journal_to_delivery_seconds observed nothing in the phases with readers")
	} else {
		n := 0.0
		if len(journaled) > 0 {
			n = journaled[len(journaled)-1].n
		}
		jRow.PGQ = f64(ms(p99))
		jRow.Note = fmt.Sprintf("pgq_journal_to_delivery_seconds over the phases with readers: %.0f deliveries, p50 %s, p99 %s (buckets ×1.2 apart, interpolated: ±10 %%); commit → journal fsync (pgq_commit_to_durable_seconds, same phases) p50 %s, p99 %s",
			n, fmtQ(p50, journaled), fmtQ(p99, journaled), fmtQ(d50, durable), fmtQ(d99, durable))
		jRow.check(ms(p99) <= 50 && errs == 0)
	}
	c99 := pct(lat, 99) * 1000
	cRow := Row{Metric: "commit → reader p99, 1,000+ readers", Unit: "ms", PGQ: f64(c99), Status: Info,
		Note: fmt.Sprintf("%d deliveries in %d fetches (%d failed calls), commit_time → receipt (includes commit → journal) of the transactions committed while the readers ran (each phase with readers starts with every group moved to the journal's end); p50 %.1f ms; shared group's members alone p50 %.1f ms, p99 %.1f ms", len(lat), fetches, errs, pct(lat, 50)*1000, pct(latSh, 50)*1000, pct(latSh, 99)*1000)}
	if len(lat) == 0 || errs > 0 {
		cRow.Status = Fail
	}
	return []Row{jRow, cRow}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fmtQ writes a quantile of histogram h (cumulative buckets, +Inf
// last) in ms: "≥ X ms" when it lies past the last finite bound, where
// quantile can only answer that bound; "n/a" without observations.
func fmtQ(d time.Duration, h []bucket) string {
	if len(h) < 2 || h[len(h)-1].n == 0 {
		return "n/a"
	}
	if top := h[len(h)-2].le; d.Seconds() >= top {
		return fmt.Sprintf("≥ %.0f ms (past the last bucket)", top*1000)
	}
	return fmt.Sprintf("%.1f ms", ms(d))
}

func fmtRates(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, ", ")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// readersSchema creates the tables rt0.. and adds them to the publication.
func (e *env) readersSchema(ctx context.Context, tables int) error {
	var b strings.Builder
	names := make([]string, tables)
	for i := range tables {
		names[i] = fmt.Sprintf("rt%d", i)
		fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (id bigserial PRIMARY KEY, v int NOT NULL);\n", names[i])
	}
	if _, err := e.conn.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("readers tables: %w", err)
	}
	if _, err := e.conn.Exec(ctx, "ALTER PUBLICATION "+publication+" ADD TABLE "+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("readers publication: %w", err)
	}
	return nil
}

// readersPhase writes c.Rate single-insert transactions per second for
// c.For, round the tables, and returns the transactions pgq journaled per
// second over the phase (records_written from the first to the moment the
// last one is journaled).
func (e *env) readersPhase(ctx context.Context, p *pgqProc, c ReadersConfig) (float64, error) {
	st0, err := p.status(ctx)
	if err != nil {
		return 0, err
	}
	const workers = 8
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- writeAtRate(ctx, e.url, c, workers, start, &next)
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return 0, err
		}
	}
	end, err := e.closingCommit(ctx)
	if err != nil {
		return 0, err
	}
	// The end is when the slot's confirmed LSN reaches the closing
	// commit, asked of PostgreSQL every 10 ms: pgq confirms within its
	// durable-point marker's delay (≤ 25 ms) and ingest's 10 ms status
	// interval of journaling it, the same late in both phases (≤ 0.2 %
	// of a phase, against pgq). Polling pgq's /v1/status instead (every
	// 50 ms, as runs before this one did) made pgq compute a thousand
	// groups' lags each time, about 30 ms of CPU, while the readers it
	// measured ran: 6 % of its CPU in a profile of the phases.
	if err := e.waitConfirmedEvery(ctx, readersSlot, end, time.Minute, 10*time.Millisecond); err != nil {
		return 0, err
	}
	done := time.Now()
	st1, err := p.status(ctx) // every record of the phase is journaled by now
	if err != nil {
		return 0, err
	}
	return float64(st1.RecordsWritten-st0.RecordsWritten) / done.Sub(start).Seconds(), nil
}

// closingCommit commits one more row (into rt0) after the writers and
// returns an LSN inside that transaction: its commit ends past it, so the
// journal reaches it exactly when the last transaction is journaled.
// pg_current_wal_lsn after the writers may name a WAL record that is no
// transaction's (the running-xacts record PostgreSQL logs every 15 s
// under wal_level logical), where the journal never ends: the wait for
// it then timed out now and then.
func (e *env) closingCommit(ctx context.Context) (pgq.LSN, error) {
	var s string
	err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO rt0 (v) VALUES (-1)"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s)
	})
	if err != nil {
		return 0, fmt.Errorf("readers: closing commit: %w", err)
	}
	return pgq.ParseLSN(s)
}

// writeAtRate is one of workers writers sharing c.Rate: it inserts into
// the next table at its share of the rate until c.For has passed.
func writeAtRate(ctx context.Context, url string, c ReadersConfig, workers int, start time.Time, next *atomic.Int64) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("readers writer: %w", err)
	}
	defer conn.Close(context.Background())
	// On, as the other rows' writers: with it off (the throwaway
	// cluster's default) a commit reaches the walsender only at the WAL
	// writer's next flush, up to wal_writer_delay (200 ms) later, which
	// commit → reader would count.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		return err
	}
	every := time.Duration(float64(time.Second) * float64(workers) / float64(c.Rate))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for time.Since(start) < c.For {
		n := next.Add(1)
		q := fmt.Sprintf("INSERT INTO rt%d (v) VALUES (%d)", n%int64(c.Tables), n)
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("readers writer: %w", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// readers is the load generator's reading side.
type readers struct {
	addr string
	c    ReadersConfig

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// since is when the readers last started: only transactions
	// committed from then on count for the latency.
	since time.Time

	mu      sync.Mutex
	lat     []float64 // seconds, commit → receipt
	latSh   []float64 // the same, of the shared group's members alone
	fetches int
	errs    int
}

// skipBacklog moves every group to the journal's end before the readers
// start: what the phase without readers journaled is not theirs to read.
// Else each reader first drains 20 s of backlog, and commit → reader
// measures that backlog's age, not how fast a reader that keeps up is
// served (the rows before this were measured so: p50 of seconds).
func (r *readers) skipBacklog(ctx context.Context, cl *client.Client) error {
	names := []string{"rshared"}
	for i := range r.c.Groups {
		names = append(names, fmt.Sprintf("r%04d", i))
	}
	for _, n := range names {
		if _, err := cl.ResetGroup(ctx, n, "latest", false); err != nil {
			return fmt.Errorf("reset group %s to latest: %w", n, err)
		}
	}
	return nil
}

func (r *readers) start(ctx context.Context) {
	r.since = time.Now()
	ctx, r.cancel = context.WithCancel(ctx)
	for i := range r.c.Groups {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.exclusive(ctx, fmt.Sprintf("r%04d", i)) }()
	}
	for i := range r.c.Shared {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.shared(ctx, fmt.Sprintf("m%d", i)) }()
	}
}

func (r *readers) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *readers) results() (lat, shared []float64, fetches, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lat, r.latSh, r.fetches, r.errs
}

func (r *readers) observe(lat []float64, shared bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetches++
	r.lat = append(r.lat, lat...)
	if shared {
		r.latSh = append(r.latSh, lat...)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		r.errs++
	}
}

// ownClient returns a client with a connection of its own.
func (r *readers) ownClient() (*client.Client, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
	return client.New(r.addr, client.Options{HTTPClient: hc, Retry: client.RetryOptions{GiveUp: -1}})
}

// exclusive long-polls group g and commits what it got.
func (r *readers) exclusive(ctx context.Context, g string) {
	cl, err := r.ownClient()
	if err != nil {
		r.observe(nil, false, err)
		return
	}
	for ctx.Err() == nil {
		res, err := cl.Fetch(ctx, g, client.FetchRequest{Member: "bench", Wait: 5 * time.Second})
		now := time.Now()
		var lat []float64
		if err == nil {
			for _, tx := range res.Transactions {
				if !tx.CommitTime.Before(r.since) {
					lat = append(lat, now.Sub(tx.CommitTime).Seconds())
				}
			}
			if len(res.Transactions) > 0 {
				_, err = cl.Commit(ctx, g, "bench", res.NextOffset-1, 0)
			}
		}
		r.observe(lat, false, err)
	}
}

// shared long-polls the shared group as member and acks what it got.
func (r *readers) shared(ctx context.Context, member string) {
	cl, err := r.ownClient()
	if err != nil {
		r.observe(nil, true, err)
		return
	}
	for ctx.Err() == nil {
		msgs, err := cl.FetchShared(ctx, "rshared", client.FetchRequest{Member: member, Max: 100, Wait: 5 * time.Second})
		now := time.Now()
		lat := make([]float64, 0, len(msgs))
		ids := make([]string, 0, len(msgs))
		for _, m := range msgs {
			if !m.CommitTime.Before(r.since) {
				lat = append(lat, now.Sub(m.CommitTime).Seconds())
			}
			ids = append(ids, m.AckID)
		}
		if err == nil && len(ids) > 0 {
			_, err = cl.Ack(ctx, "rshared", ids...)
		}
		r.observe(lat, true, err)
	}
}

// raiseFileLimit raises this process's open-file limit (which the pgq it
// starts inherits) to the hard limit and returns it.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("open-file limit: %w", err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("raise the open-file limit: %w", err)
	}
	return l.Cur, nil
}

// sampleFDs samples pid's open files every 100 ms until the returned
// function is called, which returns the largest count.
func sampleFDs(pid int) func() int64 {
	return samplePeak(100*time.Millisecond, func() (int64, bool) {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		return int64(len(ents)), err == nil
	})
}

// samplePeak calls sample every interval until the returned function is
// called, which returns the largest value sampled (0 if none).
func samplePeak(interval time.Duration, sample func() (int64, bool)) func() int64 {
	stop, done := make(chan struct{}), make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if v, ok := sample(); ok {
				peak = max(peak, v)
			}
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-done
	}
}
