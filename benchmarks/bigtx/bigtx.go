// Package bigtx measures pgq's memory while one very large transaction
// passes through it: a throwaway PostgreSQL cluster, `pgq run` as a
// subprocess, one INSERT of N rows (~200 bytes each) in a single
// transaction, and the peak resident set (VmHWM) of the pgq process
// against the transaction's size. It is not run by `make test`.
//
// Measured (PostgreSQL 15, default logical_decoding_work_mem, so the
// transaction is streamed in progress; `pgq run` defaults: 16 MiB segments,
// one cached segment, 8 MiB committer pending bytes, spilled chunks of
// 128 KiB journaled as parts without re-encoding, 192 MiB soft memory
// limit; 2 vCPUs; a fresh pgq per size):
//
//	rows        pgoutput  records  baseline RSS  peak RSS  insert  commit → journaled
//	1,000,000    198 MiB     1524      28.2 MiB  170.4 MiB   4.5s  19.9s
//	5,000,000    996 MiB     7650      28.0 MiB  200.8 MiB  15.3s  1m1s
//	10,000,000  1992 MiB    15307      28.2 MiB  200.3 MiB  47.7s  2m2s
//
// Before chunks were restamped into parts (parts re-encoded from decoded
// changes, 32 MiB committer pending, two cached segments) the same run
// peaked at 229 MiB (5M) and 244 MiB (10M).
//
// With -fetch (make bench), the journaled transaction is then fetched whole through the
// HTTP API (exclusive group, max 1, JSON; the answer is written as the
// journal is read) and a COPY of the same rows is timed in the same run
// (pgq's VmHWM reset before the fetch, so it includes the RSS ingest left):
//
//	rows       answer   fetch  COPY   fetch/COPY  peak RSS during fetch
//	  300,000   81 MiB  0.81s  0.59s  1.4         208.9 MiB
//	1,000,000  272 MiB  1.91s  0.98s  2.0         193.3 MiB
//	2,000,000  546 MiB  3.59s  1.59s  2.3         211.1 MiB
//
// The same transaction is then consumed through the Go client (a
// client.Consumer of another group, max 1: the answer decoded part by part
// as it arrives, every change counted, committed after the last part),
// with this process's heap sampled and pgq's VmHWM reset again:
//
//	rows       fetch  COPY   Go consume  consume/COPY  client peak heap  pgq peak RSS
//	2,000,000  8.53s  5.92s  4.75s       0.8           +5.5 MiB          212.0 MiB
//
// (that run on a loaded machine, hence its fetch and COPY times; the Go
// client reads the records form, which skips the JSON rendering). Before,
// the client read the 546 MiB answer whole before returning its first part.
//
// Before, the answer was built whole: a 400,000-row transaction's fetch
// took pgq from 228 MiB to 850 MiB. Without the soft memory limit
// and with 64 MiB segments, a 1M-row transaction peaked at ~670 MiB:
// tidwall/wal holds the tail segment and cached segments in memory, and
// the garbage collector lets the heap double on top of the live set.
package bigtx

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// Options configure Run.
type Options struct {
	// PGQBin is the pgq binary (required).
	PGQBin string
	// Rows lists the transaction sizes to measure, in rows.
	Rows []int
	// WorkDir holds the pgq data directories and logs (required).
	WorkDir string
	// PadBytes is the text payload per row; zero → 180 (≈200 bytes of
	// pgoutput per row).
	PadBytes int
	// PGQArgs are extra `pgq run` arguments.
	PGQArgs []string
	// Settings are extra postgresql.conf lines.
	Settings []string
	// Fetch, after the transaction is journaled, fetches it whole through
	// the HTTP API (an exclusive group, max 1, JSON) and measures pgq's
	// peak RSS during the fetch and its time against a COPY of the same
	// rows (COPY big TO STDOUT) timed in the same run.
	Fetch bool
	// Logger reports progress; nil → slog.Default().
	Logger *slog.Logger
}

// Result is one measured transaction.
type Result struct {
	Rows          int
	PgoutputBytes int64         // pgoutput payload bytes pgq received
	JournalBytes  int64         // journal size after the transaction
	Records       int64         // records (parts) the transaction became
	Streamed      bool          // the server streamed it in progress
	BaselineRSS   int64         // VmRSS of idle pgq before the transaction
	PeakRSS       int64         // VmHWM of pgq at the end
	InsertTime    time.Duration // the INSERT ... COMMIT on the server
	JournalLag    time.Duration // from COMMIT returning to the transaction being durable in the journal
	// With Options.Fetch:
	FetchRSS   int64         // VmHWM of pgq during the fetch (reset before it)
	FetchBytes int64         // bytes of the fetch's answer
	FetchTime  time.Duration // the fetch, from request to the answer's last byte
	CopyTime   time.Duration // COPY big TO STDOUT of the same rows
	// The same transaction consumed through the Go client (a
	// client.Consumer of another group, max 1), counting its changes:
	ConsumeTime    time.Duration // first fetch to the commit after the last part
	ConsumeChanges int           // changes decoded
	ConsumeHeap    int64         // this process's peak heap during it, above the heap before
	ConsumeRSS     int64         // VmHWM of pgq during it (reset before it)
}

// Run measures each size in o.Rows on one cluster, a fresh pgq process
// per size (so VmHWM is that size's peak).
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.PGQBin == "" || o.WorkDir == "" {
		return nil, errors.New("bigtx: PGQBin and WorkDir are required")
	}
	if o.PadBytes <= 0 {
		o.PadBytes = 180
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c, err := pgtest.Start(pgtest.Options{Settings: o.Settings})
	if err != nil {
		return nil, fmt.Errorf("bigtx: start cluster: %w", err)
	}
	defer c.Stop()
	var out []Result
	for _, n := range o.Rows {
		r, err := runOne(ctx, c, o, n)
		if err != nil {
			return out, fmt.Errorf("bigtx: %d rows: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func runOne(ctx context.Context, c *pgtest.Cluster, o Options, n int) (Result, error) {
	res := Result{Rows: n}
	db, err := c.CreateDB(ctx)
	if err != nil {
		return res, err
	}
	if err := c.Exec(ctx, db, "CREATE TABLE big (id bigint PRIMARY KEY, pad text)"); err != nil {
		return res, err
	}
	port, err := pgtest.FreePort()
	if err != nil {
		return res, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dataDir := filepath.Join(o.WorkDir, fmt.Sprintf("pgq-%d", n))
	if err := os.RemoveAll(dataDir); err != nil {
		return res, err
	}
	logf, err := os.Create(dataDir + ".log")
	if err != nil {
		return res, err
	}
	defer logf.Close()
	slot := "bigtx_" + strconv.Itoa(n)
	cmd := exec.CommandContext(ctx, o.PGQBin, append([]string{"run", "--pg-url", c.URL(db), "--slot", slot, "--publication", "bigtx",
		"--create-slot", "--create-publication", "all", "--data-dir", dataDir, "--listen", addr}, o.PGQArgs...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start pgq: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = c.Exec(context.WithoutCancel(ctx), db, "SELECT pg_drop_replication_slot('"+slot+"')")
		_ = os.RemoveAll(dataDir)
	}()
	base := "http://" + addr
	if err := waitFor(ctx, 60*time.Second, func() bool {
		var st status
		return getJSON(base+"/v1/status", &st) == nil && st.ProtoVersion > 0
	}); err != nil {
		return res, fmt.Errorf("pgq did not start streaming (log %s.log): %w", dataDir, err)
	}
	pid := cmd.Process.Pid
	res.BaselineRSS, _ = procStatus(pid, "VmRSS")

	o.Logger.Info("inserting", "rows", n)
	start := time.Now()
	sql := fmt.Sprintf("INSERT INTO big SELECT g, repeat('x', %d) FROM generate_series(1, %d) g", o.PadBytes, n)
	if err := c.Exec(ctx, db, sql); err != nil {
		return res, err
	}
	committed := time.Now()
	res.InsertTime = committed.Sub(start)
	conn, err := c.Connect(ctx, db)
	if err != nil {
		return res, err
	}
	var lsnText string
	err = conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsnText)
	conn.Close(ctx)
	if err != nil {
		return res, err
	}
	target, err := pgq.ParseLSN(lsnText)
	if err != nil {
		return res, err
	}
	o.Logger.Info("committed; waiting for the journal", "rows", n, "insert", res.InsertTime.Round(time.Millisecond))
	var st status
	if err := waitFor(ctx, 2*time.Hour, func() bool {
		// The transaction's end LSN is at most the WAL position read after
		// COMMIT; records_written moves once it is durable.
		return getJSON(base+"/v1/status", &st) == nil && st.JournalLastEndLSN > 0 && st.RecordsWritten > 0 &&
			st.JournalLastEndLSN+pgq.LSN(4096) >= target
	}); err != nil {
		return res, fmt.Errorf("waiting for the journal: %w", err)
	}
	res.JournalLag = time.Since(committed)
	res.Records = int64(st.RecordsWritten)
	res.PeakRSS, err = procStatus(pid, "VmHWM")
	if err != nil {
		return res, err
	}
	m, err := metrics(base + "/metrics")
	if err != nil {
		return res, err
	}
	res.PgoutputBytes = int64(m["pgq_pgoutput_bytes_received_total"])
	res.Streamed = m["pgq_streamed_transactions_total"] > 0
	res.JournalBytes = dirSize(filepath.Join(dataDir, "journal"))
	if o.Fetch {
		if err := fetchWhole(ctx, c, db, base, pid, &res); err != nil {
			return res, err
		}
		if err := consumeGo(ctx, base, pid, n, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// fetchWhole fetches the journaled transaction through the HTTP API with
// pgq's peak RSS reset first (clear_refs 5), then times a COPY of the
// same rows.
func fetchWhole(ctx context.Context, c *pgtest.Cluster, db, base string, pid int, res *Result) error {
	post := func(path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	resp, err := post("/v1/groups", `{"name":"bigtx","from":"earliest"}`)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create group: HTTP %d", resp.StatusCode)
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	start := time.Now()
	resp, err = post("/v1/groups/bigtx/fetch", `{"member":"bench","max":1}`)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch: HTTP %d, %d bytes: %v", resp.StatusCode, n, err)
	}
	res.FetchTime, res.FetchBytes = time.Since(start), n
	if res.FetchRSS, err = procStatus(pid, "VmHWM"); err != nil {
		return err
	}
	conn, err := c.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	start = time.Now()
	if _, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY big TO STDOUT"); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	res.CopyTime = time.Since(start)
	return nil
}

// consumeGo consumes the journaled transaction through the Go client
// (client.Consumer, max 1: its answer is the whole transaction, decoded
// part by part as it arrives) with pgq's peak RSS reset first, sampling
// this process's heap while it runs.
func consumeGo(ctx context.Context, base string, pid, rows int, res *Result) error {
	cl, err := client.New(base, client.Options{})
	if err != nil {
		return err
	}
	if _, err := cl.CreateGroup(ctx, api.CreateRequest{Name: "bigtx-go", From: "earliest"}); err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	cs, err := cl.Consumer("bigtx-go", client.ConsumerOptions{Member: "bench", Max: 1, Wait: time.Second})
	if err != nil {
		return err
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	n := 0
	for n < rows {
		tx, err := cs.Next(ctx)
		if err != nil {
			close(stop)
			<-sampled
			return fmt.Errorf("consume after %d changes: %w", n, err)
		}
		n += len(tx.Changes)
	}
	err = cs.Commit(ctx)
	res.ConsumeTime = time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	res.ConsumeChanges = n
	res.ConsumeHeap = int64(peak.Load()) - int64(before)
	res.ConsumeRSS, err = procStatus(pid, "VmHWM")
	return err
}

type status struct {
	ProtoVersion      int     `json:"proto_version"`
	JournalLastEndLSN pgq.LSN `json:"journal_last_end_lsn"`
	RecordsWritten    uint64  `json:"records_written"`
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// metrics reads unlabelled samples of a Prometheus text exposition.
func metrics(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

// procStatus returns a kB field of /proc/<pid>/status in bytes.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// WriteFetchTable prints the fetch measurements of rs as a Markdown table.
func WriteFetchTable(w io.Writer, rs []Result) error {
	const mib = 1 << 20
	if _, err := fmt.Fprintln(w, "| rows | answer MiB | fetch | COPY | fetch/COPY | peak RSS during fetch MiB | Go consume | consume/COPY | client peak heap MiB | pgq peak RSS during consume MiB |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %d | %.0f | %s | %s | %.1f | %.1f | %s | %.1f | %.1f | %.1f |\n", r.Rows, float64(r.FetchBytes)/mib,
			r.FetchTime.Round(10*time.Millisecond), r.CopyTime.Round(10*time.Millisecond),
			r.FetchTime.Seconds()/r.CopyTime.Seconds(), float64(r.FetchRSS)/mib,
			r.ConsumeTime.Round(10*time.Millisecond), r.ConsumeTime.Seconds()/r.CopyTime.Seconds(),
			float64(r.ConsumeHeap)/mib, float64(r.ConsumeRSS)/mib); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable prints results as a Markdown table.
func WriteTable(w io.Writer, rs []Result) error {
	const mib = 1 << 20
	if _, err := fmt.Fprintln(w, "| rows | pgoutput MiB | streamed | records | journal MiB | baseline RSS MiB | peak RSS MiB | insert | commit → journaled |\n|---:|---:|:--:|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %d | %.0f | %v | %d | %.0f | %.1f | %.1f | %s | %s |\n",
			r.Rows, float64(r.PgoutputBytes)/mib, r.Streamed, r.Records, float64(r.JournalBytes)/mib,
			float64(r.BaselineRSS)/mib, float64(r.PeakRSS)/mib, r.InsertTime.Round(100*time.Millisecond), r.JournalLag.Round(100*time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}
