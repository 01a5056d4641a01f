package benchmarks

import (
	"bufio"
	"bytes"
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// Config selects the run size and the tools.
type Config struct {
	// Full selects the big run (minutes); the default short run fits in
	// under five minutes on two cores.
	Full bool
	// PGQBin is the pgq binary (`make build` puts it in bin/pgq).
	PGQBin string
	// WorkDir holds pgq data directories, pg_recvlogical output and logs.
	WorkDir string
	// CPUProfile, when set, adds an in-process ingest drain profiled with
	// runtime/pprof and writes the CPU profile there.
	CPUProfile string
	// Only, when "backfill", runs only the backfill rows (the ingest,
	// lag and consumer rows are skipped); when "footprint", only the
	// data-dir footprint rows; when "ingest", only the ingest rows and
	// the big-transaction tail; when "latency", only the commit → consumer
	// latency rows (a load pgq on a fresh slot, nothing else); when
	// "hold", only the hold-slot row (on the ingest workload); when
	// "peer", only the peer rows (as if Peer were set); when
	// "snapshot-load", only the initial load rows (snapshotload.go).
	Only string
	// ProfileRange is the WAL range of the profiled drain: "mix" (zero),
	// "small" or "bulk".
	ProfileRange string
	// PGQBefore, when set, is another pgq binary (a build before a change)
	// that the split ingest rows also drain, in the same run, for a
	// before/after figure in their notes.
	PGQBefore string
	// CompareRef, when set, is the pgq binary built from REF that Compare
	// measures against PGQBin (HEAD); CompareRefName names REF in the
	// summary; CompareOut is the directory of the benchmark-format files
	// (ref.txt, head.txt); Rounds is how many rounds each build runs.
	CompareRef, CompareRefName, CompareOut string
	Rounds                                 int
	// BackfillRows is the size of the backfill rows' table; zero means
	// 1,000,000 (5,000,000 with Full).
	BackfillRows int
	// Scale multiplies the workload sizes (transactions, rows, load
	// times); zero means 1. A small scale makes a smoke run.
	Scale float64
	// Peer adds the peer rows (peer.go): pgq with a consumer writing a
	// file against Conduit's PostgreSQL source writing a file and against
	// pg_recvlogical, on the same WAL. ConduitBin is the Conduit binary;
	// empty builds it from the module benchmarks/peers/conduit (the
	// working directory must be the repository root, as for make bench).
	// PeerRounds is how many rounds each tool drains; zero means 3.
	Peer       bool
	ConduitBin string
	PeerRounds int
	// Logger reports progress.
	Logger *slog.Logger
	// Readers sizes the readers rows (Only "readers"; readers.go).
	Readers ReadersConfig
}

// sizes of one run.
type sizes struct {
	clients     int           // pgbench clients
	txPerClient int           // small transactions per client (ingest)
	bulkRows    int           // rows of the one bulk transaction
	loadFor     time.Duration // lag and RSS sampling under full-speed load
	latencyFor  time.Duration // 1,000 tx/s steady for the latency row
	replay      int           // changes replayed for consumer throughput
	footprintTx int           // single-row transactions of the footprint rows
	tailRows    int           // rows of the big-transaction tail row
}

func (c Config) sizes() sizes {
	sz := sizes{clients: 2, txPerClient: 10_000, bulkRows: 100_000, loadFor: 10 * time.Second, latencyFor: 10 * time.Second, replay: 1_000_000, footprintTx: 10_000, tailRows: 500_000}
	if c.Full {
		sz = sizes{clients: 2, txPerClient: 100_000, bulkRows: 1_000_000, loadFor: 60 * time.Second, latencyFor: 60 * time.Second, replay: 1_000_000, footprintTx: 60_000, tailRows: 3_000_000}
	}
	if c.Scale > 0 && c.Scale != 1 {
		n := func(v int) int { return max(1, int(float64(v)*c.Scale)) }
		// pgbench -T takes whole seconds; the latency rows skip the first.
		d := func(v time.Duration) time.Duration {
			return max(2*time.Second, time.Duration(float64(v)*c.Scale).Round(time.Second))
		}
		sz.txPerClient, sz.bulkRows, sz.replay, sz.footprintTx, sz.tailRows = n(sz.txPerClient), n(sz.bulkRows), n(sz.replay), n(sz.footprintTx), n(sz.tailRows)
		sz.loadFor, sz.latencyFor = d(sz.loadFor), d(sz.latencyFor)
	}
	return sz
}

// changesPerSmallTx is what smallTxScript writes per transaction.
const changesPerSmallTx = 3

// smallTxScript is the pgbench script of the many small transactions: two
// inserts and one update, each a change.
const smallTxScript = `\set a random(1, 1000)
BEGIN;
INSERT INTO bench_events (account, amount, note) VALUES (:a, :a * 0.01, 'small transaction payload');
INSERT INTO bench_events (account, amount, note) VALUES (:a + 1, :a * 0.02, 'small transaction payload');
UPDATE bench_accounts SET balance = balance + 1 WHERE id = :a;
END;
`

// latencyScript writes one row per transaction; created is clock_timestamp()
// by default, the commit time within a few microseconds.
const latencyScript = `\set a random(1, 1000)
INSERT INTO bench_events (account, amount, note) VALUES (:a, 1.00, 'latency');
`

const publication = "pgqbench"

var schemaSQL = []string{
	`CREATE TABLE bench_events (id bigserial PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL DEFAULT clock_timestamp())`,
	`CREATE TABLE bench_accounts (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)`,
	`INSERT INTO bench_accounts (id) SELECT g FROM generate_series(1, 1001) g`,
	`CREATE PUBLICATION ` + publication + ` FOR TABLE bench_events, bench_accounts`,
}

// env is one benchmark cluster and database.
type env struct {
	cfg     Config
	sz      sizes
	log     *slog.Logger
	cluster *pgtest.Cluster
	db      string
	url     string
	conn    *pgx.Conn
}

func startEnv(ctx context.Context, cfg Config) (*env, error) {
	c, err := pgtest.Start(pgtest.Options{Settings: []string{
		// The bulk transaction exceeds this, so streaming 'on' really
		// streams it and proto 1 makes the server spill it.
		"logical_decoding_work_mem = '4MB'",
		// Nothing but the workload writes WAL in the measured ranges.
		"autovacuum = off",
		"max_wal_size = '2GB'",
	}})
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	e := &env{cfg: cfg, sz: cfg.sizes(), log: cfg.Logger, cluster: c}
	e.db, err = c.CreateDB(ctx)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("create database: %w", err)
	}
	e.url = c.URL(e.db)
	if err := c.Exec(ctx, e.db, schemaSQL...); err != nil {
		e.close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	e.conn, err = c.Connect(ctx, e.db)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return e, nil
}

func (e *env) close() {
	if e.conn != nil {
		_ = e.conn.Close(context.Background())
	}
	e.cluster.Stop()
}

func (e *env) serverVersion(ctx context.Context) string {
	var v string
	if err := e.conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return ""
	}
	return v
}

func (e *env) currentLSN(ctx context.Context) (pgq.LSN, error) {
	var s string
	if err := e.conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		return 0, fmt.Errorf("pg_current_wal_lsn: %w", err)
	}
	return pgq.ParseLSN(s)
}

// pgbench runs pgbench with script and extra arguments; it returns the
// wall time.
func (e *env) pgbench(ctx context.Context, script string, args ...string) (time.Duration, error) {
	f := filepath.Join(e.cfg.WorkDir, fmt.Sprintf("script-%d.sql", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		return 0, fmt.Errorf("pgbench script: %w", err)
	}
	defer os.Remove(f)
	all := append([]string{"-n", "-f", f, "-h", "127.0.0.1", "-p", strconv.Itoa(e.cluster.Port), "-U", "postgres"}, args...)
	all = append(all, e.db)
	cmd := exec.CommandContext(ctx, filepath.Join(e.cluster.BinDir, "pgbench"), all...)
	// The throwaway cluster defaults to synchronous_commit = off, which
	// delays WAL flushes (and so decoding) by up to wal_writer_delay; the
	// workloads commit as PostgreSQL does by default.
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c synchronous_commit=on")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench %s: %w: %s", strings.Join(args, " "), err, lastLines(out, 5))
	}
	return time.Since(start), nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// copySlot copies the template slot (same plugin, same confirmed position).
func (e *env) copySlot(ctx context.Context, from, to string) error {
	if _, err := e.conn.Exec(ctx, "SELECT pg_copy_logical_replication_slot($1, $2)", from, to); err != nil {
		return fmt.Errorf("copy slot %s to %s: %w", from, to, err)
	}
	return nil
}

func (e *env) dropSlot(ctx context.Context, slot string) {
	_, _ = e.conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
}

// pgqProc is a running `pgq run`.
type pgqProc struct {
	cmd     *exec.Cmd
	addr    string
	dataDir string
	started time.Time
	done    chan error
	client  *http.Client
}

// startPGQ starts bin/pgq on slot with a fresh data directory.
func (e *env) startPGQ(ctx context.Context, name, slot string, extra ...string) (*pgqProc, error) {
	port, err := pgtest.FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.cfg.WorkDir, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("pgq data dir: %w", err)
	}
	logf, err := os.Create(filepath.Join(e.cfg.WorkDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("pgq log: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	p := &pgqProc{addr: fmt.Sprintf("127.0.0.1:%d", port), dataDir: dir, done: make(chan error, 1),
		client: &http.Client{Timeout: 10 * time.Second}}
	args := append([]string{"run", "--pg-url", e.url, "--slot", slot, "--publication", publication,
		"--data-dir", dir, "--listen", p.addr}, extra...)
	p.cmd = exec.Command(e.cfg.PGQBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pgq: %w", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

// stop sends SIGTERM and waits for a clean exit (SIGKILL after 30 s).
func (p *pgqProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("pgq exit: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("pgq did not stop within 30s after SIGTERM")
	}
}

// pgqStatus is the part of /v1/status the benchmarks read.
type pgqStatus struct {
	Running           bool    `json:"running"`
	LastError         *string `json:"last_error"`
	ProtoVersion      int     `json:"proto_version"`
	Streaming         bool    `json:"streaming"`
	ConfirmedLSN      pgq.LSN `json:"confirmed_lsn"`
	JournalLastEndLSN pgq.LSN `json:"journal_last_end_lsn"`
	RecordsWritten    uint64  `json:"records_written"`
}

func (p *pgqProc) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

func (p *pgqProc) status(ctx context.Context) (pgqStatus, error) {
	var st pgqStatus
	b, err := p.get(ctx, "/v1/status")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode /v1/status: %w", err)
	}
	return st, nil
}

// metric returns the value of an unlabelled Prometheus sample.
func (p *pgqProc) metric(ctx context.Context, name string) (float64, error) {
	b, err := p.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not exported", name)
}

// waitJournaled polls /v1/status every 5 ms until the journal holds every
// transaction committed before target, and returns when that was first
// seen.
func (p *pgqProc) waitJournaled(ctx context.Context, target pgq.LSN, timeout time.Duration) (time.Time, pgqStatus, error) {
	return p.waitJournaledEvery(ctx, target, timeout, 5*time.Millisecond)
}

// waitJournaledEvery is waitJournaled polling every interval.
func (p *pgqProc) waitJournaledEvery(ctx context.Context, target pgq.LSN, timeout, every time.Duration) (time.Time, pgqStatus, error) {
	deadline := time.Now().Add(timeout)
	var last pgqStatus
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			return time.Time{}, last, fmt.Errorf("pgq exited early: %v", err)
		case <-ctx.Done():
			return time.Time{}, last, ctx.Err()
		default:
		}
		st, err := p.status(ctx)
		now := time.Now()
		if err == nil {
			last = st
			if st.JournalLastEndLSN >= target {
				return now, st, nil
			}
		} else {
			lastErr = err
		}
		time.Sleep(every)
	}
	return time.Time{}, last, fmt.Errorf("pgq did not journal up to %s within %s (journal end %s, last error %v)", target, timeout, last.JournalLastEndLSN, lastErr)
}

// createGroup creates a consumer group over the HTTP API.
func (p *pgqProc) createGroup(ctx context.Context, name string) error {
	body := fmt.Sprintf(`{"name":%q,"from":"earliest"}`, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/groups", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("create group: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// rssBytes reads VmRSS of pid from /proc.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// samplePeakRSS samples pgq's VmRSS every interval until the returned
// function is called, which returns the largest sample (0 if none).
func (p *pgqProc) samplePeakRSS(interval time.Duration) func() int64 {
	return samplePeak(interval, func() (int64, bool) {
		v, err := rssBytes(p.cmd.Process.Pid)
		return v, err == nil
	})
}

// dirBytes sums the regular files below dir whose name passes keep.
func dirBytes(dir string, keep func(name string) bool) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && keep(d.Name()) {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// settleDisk writes back the dirty pages earlier phases left (sync(2))
// before a phase that measures latency or lag: the kernel flushing
// hundreds of MB of a previous load in the background would otherwise
// stretch the fsyncs of pgq and PostgreSQL in the measured phase.
func (e *env) settleDisk() {
	start := time.Now()
	syscall.Sync()
	e.log.Info("dirty pages written back before the phase", "took", time.Since(start).Round(time.Millisecond))
}
