package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/feedback"
	"github.com/pgq-dev/pgq/internal/backoff"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/opterr"
	"github.com/pgq-dev/pgq/pgoutput"
)

// Ingester reads one slot and appends committed transactions to the
// journal. Run owns the replication connection; the committer's OnAppend
// hook reports durability to it.
type Ingester struct {
	o       Options
	tracker *feedback.Tracker

	// conn is the live replication connection's socket, published so the
	// committer can wake a blocked receive (SetReadDeadline is safe from
	// any goroutine); nil between sessions.
	conn atomic.Pointer[net.Conn]

	// lastSubmitted is the end LSN of the newest transaction handed to the
	// committer (or found in the journal at start). Only Run's goroutine
	// touches it; it outlives sessions so a reconnect never re-submits a
	// transaction still queued for fsync.
	lastSubmitted pgq.LSN

	// covered is coveredLSN's value (a pgq.LSN): raised by the committer
	// hook and by storeCoverage, read by status.
	covered atomic.Uint64
	// fresh is true until the first session of a brand-new data dir;
	// coverageStoredAt is when the coverage file was last replaced. Only
	// Run's goroutine touches them.
	fresh            bool
	coverageStoredAt time.Time

	recordsWritten atomic.Uint64
	changesWritten atomic.Uint64
	// startAt is where a brand-new journal begins (Options.Start); warned
	// names the tables already warned about; createdSlot is true from the
	// moment this Ingester created the slot (not a temporary one) until a
	// session streams from it: a start refused in between drops it (see
	// dropRefusedSlot). Only Run's goroutine touches them.
	startAt     pgq.LSN
	warned      map[string]bool
	createdSlot bool
	reconnects  atomic.Uint64
	// loadFailed is true while an initial load runs and after it failed:
	// Run then drops the slot it created (dropFailedLoadSlot); load is its
	// progress. Only Run's goroutine touches loadFailed.
	loadFailed bool
	load       loadProgress

	// received is the LSN of the newest XLogData (a pgq.LSN) and
	// lastMsgAt when the server last sent anything (Unix nanoseconds, 0:
	// never): set by the session goroutine for every message, without a
	// lock; read by Status.
	received  atomic.Uint64
	lastMsgAt atomic.Int64

	mu sync.Mutex // guards the fields below
	// running, connected, lastErr, proto and streaming describe the
	// session.
	running   bool
	connected bool
	// lastErrAt is when lastErr happened (zero: never).
	lastErrAt time.Time
	lastErr   string
	proto     int
	streaming bool
	// slotFailover: the slot of the latest session is a failover slot.
	slotFailover bool
	// walEnd and confirmed are LSNs for status.
	walEnd, confirmed pgq.LSN
	// spillErr is the spill failure that ended a session ("": none or
	// recovered) and spillErrLSN the last LSN received before it;
	// spillFailed is spillErr != "", readable without the lock.
	spillErr    string
	spillErrLSN pgq.LSN
	spillFailed atomic.Bool
}

// New validates o and prepares an Ingester. It installs itself as the
// committer's OnAppend hook, which runs after a batch's durable-point
// marker: only then may its LSNs be confirmed (journal.Committer).
func New(o Options) (*Ingester, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.SpillDir != "" {
		n, err := cleanSpillDir(o.FS, o.SpillDir)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			o.Logger.Info("removed leftover spill files", "dir", o.SpillDir, "files", n)
		}
	}
	last := o.Journal.LastEndLSN()
	covered, fresh, err := loadCoverage(&o)
	if err != nil {
		return nil, err
	}
	// The tracker starts at what the journal covers, so a restart after an
	// idle advance confirms where it left off; re-sends are still judged
	// against the journal's own end.
	in := &Ingester{o: o, tracker: feedback.NewTracker(covered), lastSubmitted: last, fresh: fresh, warned: map[string]bool{}}
	in.covered.Store(uint64(covered))
	if o.HoldFloor != nil {
		in.tracker.SetHold(o.HoldFloor)
	}
	o.Committer.SetOnAppend(func(batch []*journal.Record) {
		if len(batch) == 0 {
			return
		}
		last := batch[len(batch)-1].Tx
		// A transaction is durable once its final part is: a batch ending
		// in a non-final part reports only up to the last final one.
		for i := len(batch) - 1; i >= 0; i-- {
			if tx := batch[i].Tx; tx.Final {
				in.tracker.Durable(tx.EndLSN)
				in.raiseCovered(tx.EndLSN)
				break
			}
		}
		changes := 0
		now := time.Now()
		for _, r := range batch {
			changes += r.ChangeCount()
			if r.Tx.Final {
				// This hook runs after the batch's durable-point marker,
				// up to a gather window after the fsync the histogram
				// measures to: the journal noted that time.
				at, ok := in.o.Journal.WrittenAt(r.Tx.Offset)
				if !ok {
					at = now
				}
				in.o.Metrics.CommitToDurable.Observe(at.Sub(r.Tx.CommitTime).Seconds())
			}
		}
		in.recordsWritten.Add(uint64(len(batch)))
		in.changesWritten.Add(uint64(changes))
		in.o.Metrics.RecordsWritten.Add(float64(len(batch)))
		in.o.Metrics.ChangesWritten.Add(float64(changes))
		in.o.Metrics.BatchSize.Observe(float64(len(batch)))
		in.o.Metrics.JournalLastOff.Set(float64(last.Offset))
		in.o.Metrics.JournalFirstOff.Set(float64(in.o.Journal.FirstOffset()))
		// A loop parked in a receive sends the confirmation now.
		in.wake()
	})
	return in, nil
}

// wake interrupts a blocked receive so the loop sends feedback now.
func (in *Ingester) wake() {
	if c := in.conn.Load(); c != nil {
		_ = (*c).SetReadDeadline(time.Now())
	}
}

// Status returns a snapshot of ingest's part of GET /v1/status: the
// fields of api.Status up to SpillError (the connection, the slot, the
// LSNs, the journal's extent and the counters). The composition root
// fills the rest (groups, the journal's and the index's health).
func (in *Ingester) Status() api.Status {
	in.mu.Lock()
	s := api.Status{
		Running:         in.running,
		Connected:       in.connected,
		Slot:            in.o.Slot,
		Publication:     in.o.Publication,
		ProtoVersion:    in.proto,
		Streaming:       in.streaming,
		SlotFailover:    in.slotFailover,
		LastReceivedLSN: pgq.LSN(in.received.Load()),
		ServerWALEnd:    in.walEnd,
		ConfirmedLSN:    in.confirmed,
	}
	if in.lastErr != "" {
		e := in.lastErr
		s.LastError = &e
	}
	if !in.lastErrAt.IsZero() {
		t := in.lastErrAt
		s.LastErrorAt = &t
	}
	if in.spillErr != "" {
		e := in.spillErr
		s.SpillError = &e
	}
	if ns := in.lastMsgAt.Load(); ns != 0 {
		t := time.Unix(0, ns).UTC()
		s.LastMessageAt = &t
	}
	in.mu.Unlock()
	s.JournalFirstOffset = in.o.Journal.FirstOffset()
	s.JournalLastOffset = in.o.Journal.LastOffset()
	s.JournalLastEndLSN = in.o.Journal.LastEndLSN()
	s.CoveredLSN = in.coveredLSN()
	s.RecordsWritten = in.recordsWritten.Load()
	s.ChangesWritten = in.changesWritten.Load()
	s.Reconnects = in.reconnects.Load()
	s.InitialLoad = in.loadStatus()
	return s
}

func (in *Ingester) setConnected(c bool) {
	in.mu.Lock()
	in.connected = c
	in.mu.Unlock()
}

func (in *Ingester) setErr(err error) {
	in.mu.Lock()
	if err == nil {
		in.lastErr = ""
	} else {
		in.lastErr = err.Error()
		in.lastErrAt = time.Now().UTC()
	}
	in.mu.Unlock()
}

// Run streams until ctx is cancelled (returns nil after a clean stop: the
// in-flight group commit finished and the final confirmation sent) or a
// fatal error. Transient errors reconnect with exponential backoff.
func (in *Ingester) Run(ctx context.Context) error {
	in.mu.Lock()
	in.running = true
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		in.running = false
		in.mu.Unlock()
	}()
	retry := backoff.Retry{Min: in.o.ReconnectMin, Max: in.o.ReconnectMax, GiveUp: in.o.ReconnectGiveUp}
	first := true
	for {
		err := in.session(ctx, first)
		if ctx.Err() != nil {
			in.dropFailedLoadSlot()
			in.dropOnExit()
			return nil
		}
		if err == nil {
			err = errors.New("ingest: replication stream ended")
		}
		wait, stop := in.afterFailure(err, &retry)
		if stop != nil {
			in.dropFailedLoadSlot()
			in.dropRefusedSlot()
			return stop
		}
		first = false
		select {
		case <-ctx.Done():
			in.dropOnExit()
			return nil
		case <-time.After(wait):
		}
		in.reconnects.Add(1)
		in.o.Metrics.Reconnects.Inc()
	}
}

// afterFailure records a session's error and decides what follows: the
// wait before reconnecting, or the error Run stops with. Fatal errors stop
// at once: on the first start every configuration problem; later, those
// that mean the configuration broke.
func (in *Ingester) afterFailure(err error, retry *backoff.Retry) (wait time.Duration, stop error) {
	in.setErr(err)
	in.noteSpillErr(err)
	if IsFatal(err) {
		return 0, err
	}
	if in.o.NoReconnect {
		return 0, fmt.Errorf("%w: %w", opterr.New(nil, "ingest: replication interrupted ({})", opterr.Of("ingest.Options.NoReconnect")), err)
	}
	var se *streamErr
	progress := errors.As(err, &se) && se.progress
	wait, giveUp := retry.Failed(time.Now(), progress)
	if giveUp {
		return 0, fmt.Errorf("%w: %w", opterr.New(nil, "ingest: gave up reconnecting after %s without progress ({})", opterr.Of("ingest.Options.ReconnectGiveUp"), in.o.ReconnectGiveUp), err)
	}
	if errors.Is(err, ErrSpill) {
		// Like a full journal disk, but not fail-stop: spill files die
		// with their session, so space may come back by itself.
		in.o.Logger.Error("cannot write the spill directory (full disk?): free space in it; reconnecting", "dir", in.o.SpillDir,
			"error", err, "in", wait, "failing_for", retry.Failing(time.Now()).Round(time.Millisecond))
		return wait, nil
	}
	in.o.Logger.Warn("replication interrupted; reconnecting", "error", err, "in", wait)
	return wait, nil
}

// streamErr is an error that ended a session after streaming started.
// progress says whether the session got anything done that a reconnect
// does not redo (see session.progressed).
type streamErr struct {
	err      error
	progress bool
}

func (e *streamErr) Error() string { return e.err.Error() }
func (e *streamErr) Unwrap() error { return e.err }

// tablesCheckTimeout bounds the table warnings' queries (a session's end
// waits for them).
const tablesCheckTimeout = 5 * time.Second

// session runs one replication connection.
//
// Its start is what every restart and every reconnect waits for, so the
// replication connection is opened while the preflight checks run on
// their own connection (their errors, the clearer ones, take precedence),
// and the table warnings are read while replication starts.
func (in *Ingester) session(ctx context.Context, first bool) error {
	cfg, err := pgx.ParseConfig(in.o.PGURL)
	if err != nil {
		return &FatalError{Err: opterr.New(ErrConfig, "invalid {}: %v", opterr.Of("ingest.Options.PGURL"), err)}
	}
	// Journaled text is UTF-8 whatever the database's encoding, and pgx's
	// simple protocol (preflight) needs it too. PostgreSQL defaults the
	// client encoding to the database's; the URL cannot override this one.
	cfg.RuntimeParams["client_encoding"] = "UTF8"
	// The same server and credentials, as a replication connection (a
	// deep copy: its own runtime parameters).
	replCfg := cfg.Config.Copy()
	replCfg.RuntimeParams["replication"] = "database"
	type dialed struct {
		conn *pgconn.PgConn
		err  error
	}
	replication := make(chan dialed, 1)
	go func() {
		c, err := pgconn.ConnectConfig(ctx, replCfg)
		replication <- dialed{c, err}
	}()
	info, pre, err := preflight(ctx, cfg, &in.o, first)
	if info.SlotCreated {
		in.createdSlot = true
	}
	if err != nil {
		if d := <-replication; d.err == nil {
			d.conn.Close(context.WithoutCancel(ctx))
		}
		return err
	}
	tablesChecked := make(chan struct{})
	go func(tables ServerInfo) { // a copy: the session goes on with info
		defer close(tablesChecked)
		// Not cut short by a stop right after the start: the warnings
		// are what an operator trying pgq out needs to see.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tablesCheckTimeout)
		defer cancel()
		defer pre.Close(cctx)
		if err := publicationTables(cctx, pre, &in.o, &tables); err != nil {
			in.o.Logger.Warn("cannot check the published tables' keys", "error", err)
			return
		}
		in.warnTables(tables)
		in.warnDDLCapture(cctx, pre)
		in.warnFailover(cctx, pre, tables)
	}(info)
	// The warnings' goroutine is the only other user of in.warned.
	defer func() { <-tablesChecked }()
	d := <-replication
	if d.err != nil {
		return fmt.Errorf("ingest: replication connect: %w", d.err)
	}
	conn := d.conn
	defer conn.Close(context.WithoutCancel(ctx))
	if err := sameServer(pre, conn); err != nil {
		return err
	}
	if in.o.SlotLifecycle == LifecycleTemporary {
		res, err := pglogrepl.CreateReplicationSlot(ctx, conn, in.o.Slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication})
		if err != nil {
			return classifyServerErr(fmt.Errorf("ingest: create temporary slot %q: %w", in.o.Slot, err))
		}
		info.SlotCreated = true
		info.SlotConfirmed, err = pgq.ParseLSN(res.ConsistentPoint)
		if err != nil {
			return fmt.Errorf("ingest: temporary slot %q: consistent point %q: %w", in.o.Slot, res.ConsistentPoint, err)
		}
		in.o.Logger.Info("created temporary replication slot (dropped when the connection ends)", "slot", in.o.Slot, "lsn", info.SlotConfirmed)
	}
	snapshot, err := in.prepareInitialLoad(ctx, conn, &info)
	if err != nil {
		return err
	}
	if err := in.checkContinuity(ctx, info); err != nil {
		return err
	}
	if snapshot != "" {
		// conn stays idle meanwhile: its next command ends the snapshot.
		if err := in.runInitialLoad(ctx, snapshot, info.SlotConfirmed); err != nil {
			return err
		}
	}
	in.tracker.SlotAt(info.SlotConfirmed) // a hold floor never asks below it

	proto, streaming := 1, false
	args := []string{"proto_version '1'"}
	if info.VersionNum >= 140000 {
		proto = 2
		args = []string{"proto_version '2'"}
		if in.o.SpillDir != "" {
			streaming = true
			args = append(args, "streaming 'on'")
		}
	}
	args = append(args, fmt.Sprintf("publication_names '%s'", escapeLiteral(in.o.Publication)), "messages 'true'")
	in.mu.Lock()
	in.proto, in.streaming = proto, streaming
	in.slotFailover = info.SlotFailover
	in.mu.Unlock()

	start := max(in.lastSubmitted, in.coveredLSN(), in.startAt)
	if err := pglogrepl.StartReplication(ctx, conn, in.o.Slot, pglogrepl.LSN(start),
		pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
		return classifyServerErr(fmt.Errorf("ingest: start replication on slot %q: %w", in.o.Slot, err))
	}
	// The slot streams: what it keeps from now on is the journal's to
	// resume from, so it is never dropped as a refused start's.
	in.createdSlot = false
	in.setErr(nil)
	in.setConnected(true)
	defer in.setConnected(false)
	began, mark := time.Now(), in.progressMark()
	// Start 0 asks for the slot's confirmed position; PostgreSQL also
	// starts there when asked for less: log where it really starts.
	in.o.Logger.Info("streaming", "slot", in.o.Slot, "publication", in.o.Publication, "start_lsn", max(start, info.SlotConfirmed),
		"proto_version", proto, "streaming_in_progress", streaming)

	s := newSession(in, conn)
	defer s.discardStreams()
	defer s.bases.close(context.WithoutCancel(ctx))
	in.tracker.Reset()
	netConn := conn.Conn()
	in.conn.Store(&netConn)
	defer in.conn.Store(nil)
	stop := context.AfterFunc(ctx, in.wake)
	defer stop()
	err = s.loop(ctx)
	if err != nil && ctx.Err() == nil {
		return &streamErr{err: err, progress: s.progressed(mark, began)}
	}
	return s.finish(ctx)
}

// progressMark is how far ingest got: the newest transaction handed to the
// journal (durable, or the journal fails and pgq stops) or, past it, what
// the coverage file says the journal covers.
func (in *Ingester) progressMark() pgq.LSN { return max(in.lastSubmitted, in.coveredLSN()) }

// progressed reports whether a session that fails got something done that
// a reconnect does not redo, so its error does not count as the same
// failure again: it journaled a transaction or covered more WAL (the
// server resumes past it), or it streamed for at least ReconnectMax and
// failed between transactions (an idle stream that drops now and then
// is healthy, and no faster than the slowest retry). A session that fails
// inside the same transaction every time (a full spill directory) made
// none, however long it streamed.
func (s *session) progressed(mark pgq.LSN, began time.Time) bool {
	if s.in.progressMark() > mark {
		return true
	}
	inTx := s.cur != nil || s.curSpill != nil || len(s.streams.open) > 0
	return !inTx && time.Since(began) >= s.in.o.ReconnectMax
}

// newSession prepares the state of one replication connection. conn is
// nil only in benchmarks that feed handleCopyData directly: such a session
// never coalesces (no socket to tune) and must not send status updates.
func newSession(in *Ingester, conn *pgconn.PgConn) *session {
	var netConn net.Conn
	if conn != nil {
		netConn = conn.Conn()
	}
	s := &session{in: in, conn: conn, dec: pgoutput.NewDecoder(),
		coal: newCoalescer(netConn, max(in.o.ReceiveCoalesce, 0), in.o.Metrics.CoalesceWindows.Inc)}
	// Every message is copied out of the decoder's reused ones at once.
	s.dec.Reuse = true
	return s
}

// escapeLiteral doubles single quotes for a pgoutput option literal.
func escapeLiteral(s string) string {
	return strings.ReplaceAll(s, "'", "''")
}

// classifyServerErr turns errors that mean the configuration broke (slot
// or publication dropped, privilege revoked) into fatal errors.
func classifyServerErr(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42704": // undefined_object: slot or publication dropped
		if strings.Contains(pgErr.Message, "publication") {
			return fatalf(ErrPubMissing, "%s", pgErr.Message)
		}
		return fatalf(ErrSlotMissing, "%s", pgErr.Message)
	case "55006": // object_in_use
		return fmt.Errorf("%w", err)
	case "42501":
		return fatalf(ErrPrivilege, "%s", pgErr.Message)
	}
	return err
}

// session is one replication connection's state. Only the Run goroutine
// touches it.
type session struct {
	in   *Ingester
	conn *pgconn.PgConn
	dec  *pgoutput.Decoder
	// cur is the transaction being received (nil between transactions).
	cur     *pgq.Transaction
	curSize int
	// curSpill holds cur's changes once they outgrow MaxRecordBytes (with
	// a spill directory); cur.Changes is then empty.
	curSpill *spillTx
	// ddl is cur's DDL capture state (ddl.go).
	ddl ddlProof
	// streams are the streamed in-progress transactions.
	streams  streamState
	lastSent pgq.LSN
	// lastSendAt is when the last status update went out; nextSend when
	// the next one is due even without progress.
	lastSendAt time.Time
	nextSend   time.Time
	// wakeAt is when progress that sendStatus held back may go out (zero:
	// none); armed is the read deadline set on the socket (zero: unknown,
	// set it again); rcvAt is when the message being handled was received.
	wakeAt time.Time
	armed  time.Time
	rcvAt  time.Time
	// payload is the current payload block (see copyPayload).
	payload []byte
	// coal lets messages gather in the socket at full speed (coalesce.go).
	coal *coalescer
	// bases resolves domain columns' base types (basetypes.go).
	bases baseTypes
}

// statusMinGap spaces status updates that only report progress. Each one
// costs the walsender (the pipeline's bottleneck) a reply to process and,
// when the slot's restart point moves, a write of the slot's state; one
// per fsync would slow decoding. 10 ms keeps the slot lag within a few
// hundred kB at full speed.
const statusMinGap = 10 * time.Millisecond

// statusWriteTimeout bounds the write of one standby status update.
const statusWriteTimeout = 30 * time.Second

func (s *session) loop(ctx context.Context) error {
	in := s.in
	netConn := s.conn.Conn()
	s.nextSend = time.Now()
	for {
		if ctx.Err() != nil {
			return nil
		}
		// Arm the deadline before reading durability, so a wake from the
		// committer between the two is never lost. A wake leaves a past
		// deadline on the socket until it is armed again, which only
		// happens here or right below (both before the next receive), so
		// an unchanged deadline is not set again: one fewer runtime timer
		// update per message.
		want := earliest(earliest(s.nextSend, s.wakeAt), s.coal.deadline(time.Now()))
		if !want.Equal(s.armed) {
			_ = netConn.SetReadDeadline(want)
			s.armed = want
		}
		wakeAt, err := s.sendStatus(false)
		if err != nil {
			return err
		}
		s.wakeAt = wakeAt
		if !wakeAt.IsZero() && wakeAt.Before(s.armed) {
			// Progress to report, but too soon after the last update (or
			// the last coverage store): wake up when it may go out.
			_ = netConn.SetReadDeadline(wakeAt)
			s.armed = wakeAt
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if isTimeout(err) {
				s.armed = time.Time{} // the deadline passed or a wake set it in the past
				continue
			}
			return fmt.Errorf("ingest: receive: %w", err)
		}
		s.rcvAt = time.Now()
		s.coal.received(s.rcvAt)
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := s.handleCopyData(ctx, msg.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return classifyServerErr(pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return errors.New("ingest: server ended the replication stream")
		default:
			in.o.Logger.Debug("ignoring replication message", "type", fmt.Sprintf("%T", msg))
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// maybeSendStatus sends a standby status update when the confirmable LSN
// moved (at most every statusMinGap), when forced (the server asked for a
// reply, or a stop), or when the status interval elapsed.
func (s *session) maybeSendStatus(force bool) error {
	_, err := s.sendStatus(force)
	return err
}

// sendStatus is maybeSendStatus; a non-zero wakeAt is when progress held
// back by statusMinGap or coverageGap may go out.
func (s *session) sendStatus(force bool) (wakeAt time.Time, err error) {
	c := s.in.tracker.Confirmable()
	now := time.Now()
	if covered := s.in.coveredLSN(); c > covered {
		// Past the journal's last record: only once the coverage file says
		// so (a restart must not mistake this advance for a hole).
		due := s.in.coverageStoredAt.Add(coverageGap)
		if force || !now.Before(due) {
			if err := s.in.storeCoverage(c); err != nil {
				s.in.o.Logger.Warn("cannot store coverage; not confirming past the journal's end", "error", err)
				s.in.coverageStoredAt = now // retry after coverageGap
				c = covered
			}
		} else {
			c = covered
			wakeAt = due
		}
	}
	if !force && now.Before(s.nextSend) {
		if c == s.lastSent {
			return wakeAt, nil
		}
		if now.Sub(s.lastSendAt) < statusMinGap {
			return earliest(wakeAt, s.lastSendAt.Add(statusMinGap)), nil
		}
	}
	lsn := pglogrepl.LSN(c)
	// A server that stops reading must not block the loop forever: the
	// write gets a deadline, and a timeout reconnects.
	netConn := s.conn.Conn()
	_ = netConn.SetWriteDeadline(now.Add(statusWriteTimeout))
	err = pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn, ClientTime: now,
	})
	_ = netConn.SetWriteDeadline(time.Time{})
	if err != nil {
		return time.Time{}, fmt.Errorf("ingest: send status update: %w", err)
	}
	s.lastSent, s.lastSendAt = c, now
	s.nextSend = now.Add(s.in.o.StatusInterval)
	s.in.mu.Lock()
	s.in.confirmed = c
	s.in.mu.Unlock()
	s.in.o.Metrics.ConfirmedLSN.Set(float64(c))
	return wakeAt, nil
}

// earliest is the earlier of two times, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (s *session) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return errors.New("ingest: empty CopyData")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("ingest: keepalive: %w", err)
		}
		s.in.tracker.ServerWALEnd(pgq.LSN(ka.ServerWALEnd))
		s.in.mu.Lock()
		s.in.walEnd = pgq.LSN(ka.ServerWALEnd)
		s.in.mu.Unlock()
		s.in.lastMsgAt.Store(s.rcvAt.UnixNano())
		s.in.o.Metrics.ServerWALEnd.Set(float64(ka.ServerWALEnd))
		if ka.ReplyRequested {
			return s.maybeSendStatus(true)
		}
		return nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("ingest: XLogData: %w", err)
		}
		s.in.received.Store(uint64(xld.WALStart))
		s.in.lastMsgAt.Store(s.rcvAt.UnixNano())
		s.in.o.Metrics.ReceivedLSN.Set(float64(xld.WALStart))
		s.in.o.Metrics.BytesReceived.Add(float64(len(xld.WALData)))
		// WALData aliases the receive buffer; the decoder keeps slices of
		// what we pass, so hand it a copy.
		payload := s.copyPayload(xld.WALData)
		msg, err := s.dec.Decode(payload)
		if err != nil {
			return fmt.Errorf("ingest: decode at %s: %w", pgq.LSN(xld.WALStart), err)
		}
		return s.handleMessage(ctx, msg, xld, len(payload))
	default:
		return fmt.Errorf("ingest: unknown CopyData message %q", data[0])
	}
}

// payloadBlockBytes is the block that small XLogData payloads are copied
// into, one after the other, so that a message costs no allocation of its
// own. A block lives as long as any change that points into it.
const payloadBlockBytes = 64 << 10

// copyPayload copies b out of the receive buffer: into the current payload
// block when it is small, on its own otherwise.
func (s *session) copyPayload(b []byte) []byte {
	if len(b) > payloadBlockBytes/8 {
		return bytes.Clone(b)
	}
	if cap(s.payload)-len(s.payload) < len(b) {
		s.payload = make([]byte, 0, payloadBlockBytes)
	}
	n := len(s.payload)
	s.payload = append(s.payload, b...)
	return s.payload[n:len(s.payload):len(s.payload)]
}

func (s *session) handleMessage(ctx context.Context, msg pgoutput.Message, xld pglogrepl.XLogData, size int) error {
	if handled, err := s.handleStream(ctx, msg, size); handled || err != nil {
		return err
	}
	switch m := msg.(type) {
	case *pgoutput.Begin:
		s.in.tracker.Begin()
		s.cur = &pgq.Transaction{Xid: m.Xid, CommitLSN: m.FinalLSN, CommitTime: m.CommitTime}
		s.curSize = 0
		s.ddl.reset()
		if s.curSpill != nil { // a Begin without Commit: the server restarted the transaction
			if err := s.curSpill.discard(); err != nil {
				return err
			}
			s.curSpill = nil
		}
	case *pgoutput.Origin:
		if s.cur != nil {
			s.cur.Origin = m.Name
		}
	case *pgoutput.Relation:
		// The decoder caches relations; records carry names, types and
		// the row's key.
		s.resolveBaseTypes(ctx, m)
		return s.resolveRowKey(ctx, m)
	case *pgoutput.TypeMsg:
	case *pgoutput.Row:
		if s.cur == nil {
			if m.Change.Op == pgq.OpMessage && !m.Change.Transactional {
				s.warnStandalone(&m.Change)
				return s.submitStandaloneMessage(ctx, m, xld)
			}
			return fmt.Errorf("ingest: %s change at %s outside a transaction", m.Change.Op, pgq.LSN(xld.WALStart))
		}
		s.curSize += size
		if s.checkDDL(&s.ddl, &m.Change, s.cur.Xid) {
			return nil // a proof row: pgq's, not the user's
		}
		if s.curSpill != nil {
			return s.curSpill.add(s.cur.Xid, &m.Change)
		}
		if s.cur.Changes == nil {
			s.cur.Changes = make([]pgq.Change, 0, 4) // one allocation for most transactions
		}
		s.cur.Changes = append(s.cur.Changes, m.Change)
		if s.curSize > s.in.o.MaxRecordBytes && s.in.o.SpillDir != "" {
			// Too large to keep assembling in memory: spill it.
			s.curSpill = s.newSpill(s.cur.Xid)
			for i := range s.cur.Changes {
				if err := s.curSpill.add(s.cur.Xid, &s.cur.Changes[i]); err != nil {
					return err
				}
			}
			s.cur.Changes = nil
		}
	case *pgoutput.Commit:
		if s.cur == nil {
			return fmt.Errorf("ingest: commit at %s without begin", m.CommitLSN)
		}
		tx := s.cur
		s.cur = nil
		tx.CommitLSN, tx.EndLSN, tx.CommitTime = m.CommitLSN, m.EndLSN, m.CommitTime
		tx.Final = true
		// Backfill watermarks and chunks; chunkRec is a chunk's record,
		// encoded ahead.
		var chunkRec *journal.Record
		s.curSize, chunkRec = s.backfillCommit(tx, s.curSpill != nil, s.curSize)
		if chunkRec != nil {
			return s.submitRecord(ctx, chunkRec, len(chunkRec.Encoded))
		}
		if t := s.curSpill; t != nil {
			s.curSpill = nil
			err := s.journalSpill(ctx, t, *tx)
			if derr := t.discard(); err == nil {
				err = derr
			}
			return err
		}
		if s.curSize > s.in.o.MaxRecordBytes && tx.EndLSN > s.in.lastSubmitted {
			w := partWriter{s: s, hdr: *tx}
			w.hdr.Changes, w.hdr.Final = nil, false
			if err := w.addAll(ctx, tx.Changes); err != nil {
				return err
			}
			return w.finish(ctx)
		}
		return s.submit(ctx, tx, s.curSize)
	default:
		return fmt.Errorf("ingest: unexpected %T outside a streamed transaction", msg)
	}
	return nil
}

// submitStandaloneMessage journals a non-transactional logical message as
// its own record. Its end LSN is the message LSN + 1: the smallest position
// past it, so confirming it keeps PostgreSQL from re-sending it.
func (s *session) submitStandaloneMessage(ctx context.Context, m *pgoutput.Row, xld pglogrepl.XLogData) error {
	lsn := m.MessageLSN
	if lsn == 0 {
		lsn = pgq.LSN(xld.WALStart)
	}
	tx := &pgq.Transaction{
		Xid: m.Xid, CommitLSN: lsn, EndLSN: lsn + 1, CommitTime: xld.ServerTime.UTC().Truncate(time.Microsecond),
		Final: true, Changes: []pgq.Change{m.Change},
	}
	s.in.tracker.Begin()
	s.backfillSeen(tx.EndLSN)
	return s.submit(ctx, tx, len(m.Change.Content))
}

// backfillSeen tells the backfills that a record touching no rows (a
// non-transactional message) follows what they inspected: it cannot
// change a chunk's rows. Unmarked, it counted as an uninspected
// transaction, and every open chunk window was read again: a stream of
// such messages failed backfills after their redos.
func (s *session) backfillSeen(end pgq.LSN) {
	b := s.in.o.Backfills
	if b == nil || end <= s.in.lastSubmitted {
		return // a re-send: skipped by submit
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.expect == s.in.lastSubmitted {
		b.expect = end
	}
}

// submit hands a completed transaction to the group committer, or skips it
// when it is empty or a re-send.
func (s *session) submit(ctx context.Context, tx *pgq.Transaction, size int) error {
	return s.submitRecord(ctx, &journal.Record{Tx: tx}, size)
}

// submitRecord is submit of a record (r.Tx, or r.Encoded when set).
func (s *session) submitRecord(ctx context.Context, r *journal.Record, size int) error {
	tx := r.Tx
	switch {
	case tx.EndLSN <= s.in.lastSubmitted: // a re-send: already journaled
		s.in.tracker.Skipped(tx.EndLSN)
		s.in.o.Metrics.TxSkipped.WithLabelValues("duplicate").Inc()
		return nil
	case r.ChangeCount() == 0:
		s.in.tracker.Skipped(tx.EndLSN)
		s.in.o.Metrics.TxSkipped.WithLabelValues("empty").Inc()
		return nil
	}
	s.in.lastSubmitted = tx.EndLSN
	// Submitted before Submit: the committer may make it durable at once.
	s.in.tracker.Submitted(tx.EndLSN)
	if err := s.in.o.Committer.SubmitRecord(ctx, r, size); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &FatalError{Err: fmt.Errorf("ingest: journal: %w", err)}
	}
	return nil
}

// finish runs on a clean stop: wait for the in-flight group commit, then
// send the final confirmation.
func (s *session) finish(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.in.o.Committer.Flush(fctx); err != nil {
		return fmt.Errorf("ingest: final flush: %w", err)
	}
	_ = s.conn.Conn().SetReadDeadline(time.Time{})
	if err := s.maybeSendStatus(true); err != nil {
		return err
	}
	s.in.o.Logger.Info("stopped", "confirmed_lsn", s.lastSent)
	return nil
}
