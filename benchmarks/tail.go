package benchmarks

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pgq-dev/pgq"
)

// Slots of the big-transaction tail row: each reader has its own, both
// created at the same position before the transaction.
const (
	tailRecvSlot = "pgqbench_tail_recv"
	tailPGQSlot  = "pgqbench_tail_pgq"
)

// tailPadBytes is the text payload per row (≈200 bytes of pgoutput a row).
const tailPadBytes = 180

// tailResult is one big-transaction tail measurement.
type tailResult struct {
	rows    int
	insert  time.Duration // BEGIN … COMMIT returned, on the server
	pgqTail time.Duration // COMMIT returned → pgq durable and confirmed
	refTail time.Duration // COMMIT returned → pg_recvlogical received the stream commit
	changes float64       // pgq_changes_written_total
	records uint64
	bytes   float64 // pgoutput bytes pgq received
}

// tailRow measures the big-transaction tail: one INSERT of sz.tailRows
// rows, streamed in progress by the server (logical_decoding_work_mem is
// 4MB), read live by pgq and by pg_recvlogical (proto 2, streaming on),
// each on its own slot, at the same time. The figure is the time from
// COMMIT returning to pgq having the transaction durable and confirmed,
// against the time until pg_recvlogical has received its stream commit.
func (e *env) tailRow(ctx context.Context) Row {
	const metric = "big transaction tail, COMMIT → durable+confirmed"
	const target = "≤ ref + 0.25 × the transaction's run time"
	r, err := e.measureTail(ctx)
	if err != nil {
		return notMeasured(metric, target, trimErr(err))
	}
	pq, rf := r.pgqTail.Seconds(), r.refTail.Seconds()
	allowed := rf + 0.25*r.insert.Seconds()
	row := Row{Metric: metric, Unit: "s", PGQ: f64(pq), Reference: f64(rf), RefName: "live pg_recvlogical v2 streaming",
		Target: target}
	if rf > 0 {
		row.Ratio = f64(pq / rf)
	}
	row.check(pq <= allowed)
	row.Note = fmt.Sprintf("%d rows (%.0f MiB pgoutput, %d records), the transaction ran %.2fs; allowed ≤ %.2fs; pgq − ref = %.2fs = %.2f × the run time",
		r.rows, r.bytes/(1<<20), r.records, r.insert.Seconds(), allowed, pq-rf, (pq-rf)/r.insert.Seconds())
	if int(r.changes) != r.rows {
		row.Status = Fail
		row.Note = joinNotes(row.Note, fmt.Sprintf("pgq journaled %d changes, want %d", int(r.changes), r.rows))
	}
	return row
}

func (e *env) measureTail(ctx context.Context) (tailResult, error) {
	res := tailResult{rows: e.sz.tailRows}
	if err := e.cluster.Exec(ctx, e.db,
		"CREATE TABLE bench_big (id bigint PRIMARY KEY, pad text)",
		"ALTER PUBLICATION "+publication+" ADD TABLE bench_big"); err != nil {
		return res, err
	}
	defer func() { _ = e.cluster.Exec(context.WithoutCancel(ctx), e.db, "DROP TABLE bench_big") }()
	for _, slot := range []string{tailRecvSlot, tailPGQSlot} {
		if _, err := e.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
			return res, fmt.Errorf("create slot %s: %w", slot, err)
		}
	}
	defer e.dropSlot(context.WithoutCancel(ctx), tailRecvSlot)
	defer e.dropSlot(context.WithoutCancel(ctx), tailPGQSlot)

	ref, err := e.startLiveRecv(ctx, tailRecvSlot)
	if err != nil {
		return res, err
	}
	defer ref.stop()
	p, err := e.startPGQ(ctx, "pgq-tail", tailPGQSlot)
	if err != nil {
		return res, err
	}
	defer func() { _ = p.stop() }()
	if err := e.waitStreaming(ctx, p); err != nil {
		return res, err
	}

	e.log.Info("tail: one big transaction, read live by pgq and pg_recvlogical", "rows", res.rows)
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("big transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var xid int64
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return res, fmt.Errorf("big transaction: %w", err)
	}
	if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		return res, fmt.Errorf("big transaction: %w", err)
	}
	ref.xid <- uint32(xid)
	start := time.Now()
	if _, err := tx.Exec(ctx, `INSERT INTO bench_big SELECT g, repeat('x', $2::int) FROM generate_series(1, $1::int) g`, res.rows, tailPadBytes); err != nil {
		return res, fmt.Errorf("big insert: %w", err)
	}
	var s string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return res, fmt.Errorf("big transaction: %w", err)
	}
	lastTx, err := pgq.ParseLSN(s)
	if err != nil {
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("big commit: %w", err)
	}
	committed := time.Now()
	res.insert = committed.Sub(start)
	e.log.Info("tail: committed", "took", res.insert.Round(time.Millisecond))

	pgqAt, st, err := p.waitConfirmedJournal(ctx, lastTx, 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.pgqTail = pgqAt.Sub(committed)
	res.records = st.RecordsWritten
	select {
	case at := <-ref.found:
		res.refTail = at.Sub(committed)
	case <-ref.done:
		return res, fmt.Errorf("pg_recvlogical ended before the stream commit: %v: %s", ref.err, lastLines(ref.stderr.Bytes(), 3))
	case <-time.After(10 * time.Minute):
		return res, errors.New("pg_recvlogical did not receive the stream commit within 10 minutes")
	case <-ctx.Done():
		return res, ctx.Err()
	}
	if res.changes, err = p.metric(ctx, "pgq_changes_written_total"); err != nil {
		return res, err
	}
	if res.bytes, err = p.metric(ctx, "pgq_pgoutput_bytes_received_total"); err != nil {
		return res, err
	}
	e.log.Info("tail measured", "pgq", res.pgqTail.Round(time.Millisecond), "pg_recvlogical", res.refTail.Round(time.Millisecond))
	return res, nil
}

// waitStreaming waits until pgq streams from its slot.
func (e *env) waitStreaming(ctx context.Context, p *pgqProc) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if st, err := p.status(ctx); err == nil && st.ProtoVersion > 0 {
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("pgq exited early: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("pgq did not start streaming within a minute")
}

// waitConfirmedJournal polls /v1/status until the journal holds the
// transaction committing after lastTx and pgq confirmed it to the server;
// it returns when that was first seen.
func (p *pgqProc) waitConfirmedJournal(ctx context.Context, lastTx pgq.LSN, timeout time.Duration) (time.Time, pgqStatus, error) {
	deadline := time.Now().Add(timeout)
	var last pgqStatus
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
			if st.JournalLastEndLSN > lastTx && st.ConfirmedLSN >= st.JournalLastEndLSN {
				return now, st, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, last, fmt.Errorf("pgq did not journal and confirm past %s within %s (journal end %s, confirmed %s)",
		lastTx, timeout, last.JournalLastEndLSN, last.ConfirmedLSN)
}

// liveRecv is a pg_recvlogical reading a slot live to its stdout, watched
// for the stream commit of one transaction.
type liveRecv struct {
	cmd    *exec.Cmd
	xid    chan uint32    // the transaction to watch for, sent before it writes
	found  chan time.Time // when its stream commit was read
	done   chan struct{}  // closed when the process ended; err is then set
	err    error
	stderr *bytes.Buffer
}

// startLiveRecv starts pg_recvlogical (proto 2, streaming on) on slot and
// waits until the slot is active.
func (e *env) startLiveRecv(ctx context.Context, slot string) (*liveRecv, error) {
	r := &liveRecv{xid: make(chan uint32, 1), found: make(chan time.Time, 1), done: make(chan struct{}), stderr: &bytes.Buffer{}}
	r.cmd = exec.Command(filepath.Join(e.cluster.BinDir, "pg_recvlogical"), "-d", e.url, "--slot", slot, "--start", "-f", "-",
		"-o", "proto_version=2", "-o", "streaming=on", "-o", "publication_names="+publication)
	r.cmd.Stderr = r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("pg_recvlogical: %w", err)
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pg_recvlogical: %w", err)
	}
	go func() {
		r.watch(out)
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		var active bool
		err := e.conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err == nil && active {
			return r, nil
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("pg_recvlogical did not start streaming: %v: %s", err, lastLines(r.stderr.Bytes(), 3))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watch reads pg_recvlogical's output: every message followed by a
// newline. The stream commit of xid is 'c', the xid (big-endian), flags 0,
// right after the previous message's newline.
func (r *liveRecv) watch(out io.Reader) {
	buf := make([]byte, 1<<20)
	var pat []byte
	var carry []byte
	reported := false
	for {
		n, err := out.Read(buf)
		if n > 0 && !reported {
			if pat == nil {
				select {
				case xid := <-r.xid:
					pat = binary.BigEndian.AppendUint32([]byte{'\n', 'c'}, xid)
					pat = append(pat, 0)
				default:
				}
			}
			if pat != nil {
				data := append(carry, buf[:n]...)
				if bytes.Contains(data, pat) {
					r.found <- time.Now()
					reported = true
				}
				carry = append(carry[:0], data[max(0, len(data)-len(pat)+1):]...)
			}
		}
		if err != nil {
			return
		}
	}
}

// stop ends pg_recvlogical (SIGTERM, then SIGKILL after 10 s).
func (r *liveRecv) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}
