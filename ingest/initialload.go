package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/vfsutil"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/opterr"
	"github.com/pgq-dev/pgq/record"
)

// InitialLoad asks for the tables' rows to be journaled under the exported
// snapshot of the slot ingest creates (see the package documentation,
// "Initial load"). The zero value asks for none.
type InitialLoad struct {
	// Tables are the tables to load, schema.table each (a name without a
	// schema is in public). Empty: no initial load.
	Tables []string
	// Parallelism is how many connections read the tables, each under the
	// snapshot. Zero → the reader's default (package backfill: twice the
	// CPUs Go may use, up to 4); at most 16.
	Parallelism int
	// Read reads the tables of req under req.Snapshot and hands every chunk
	// to emit, from any number of goroutines; it returns once no emit runs
	// any more. Required with Tables: the composition root sets package
	// backfill's LoadSnapshot.
	Read func(ctx context.Context, req LoadRequest, emit func(LoadChunk) error) error
}

// LoadRequest is what InitialLoad.Read reads.
type LoadRequest struct {
	// Snapshot is the snapshot the slot exported: every connection imports
	// it (SET TRANSACTION SNAPSHOT) in a REPEATABLE READ transaction.
	Snapshot    string
	Tables      []string
	Parallelism int
	// ID marks the load's records (pgq.Transaction.Backfill).
	ID string
}

// LoadChunk is a chunk of read rows of one table.
type LoadChunk struct {
	Table string
	Rows  int
	// Encoded is the chunk's record (read changes, Backfill the load's ID)
	// after record.Headroom bytes of room, as record.ReadsEncoder makes it.
	// Ingest copies it before emit returns: the reader may reuse it.
	Encoded []byte
}

// maxLoadParallelism bounds InitialLoad.Parallelism (each reader holds a
// connection and a transaction for the whole load).
const maxLoadParallelism = 16

// validate checks the initial load's options.
func (l *InitialLoad) validate(lifecycle, start string) error {
	if len(l.Tables) == 0 {
		return nil
	}
	of := opterr.Of("ingest.Options.InitialLoad")
	for _, t := range l.Tables {
		schema, table, ok := strings.Cut(strings.TrimSpace(t), ".")
		if !ok {
			schema, table = "public", schema
		}
		if schema == "" || table == "" || strings.Contains(table, ".") {
			return opterr.New(ErrConfig, "invalid table %q in {}: want schema.table", of, t)
		}
	}
	switch {
	case l.Parallelism < 0 || l.Parallelism > maxLoadParallelism:
		return opterr.New(ErrConfig, "{} %d: want 0 (the default) to %d", opterr.Of("ingest.InitialLoad.Parallelism"), l.Parallelism, maxLoadParallelism)
	case start != "" && start != "slot":
		// The stream must start at the snapshot's own point: a later
		// start would leave a hole after the load.
		return opterr.New(ErrConfig, "{} goes only with {} slot", opterr.Of("ingest.Options.InitialLoad", "ingest.Options.Start"))
	case lifecycle == LifecycleTemporary:
		return opterr.New(ErrConfig, "{} does not go with {} temporary: every reconnect would need a new load", opterr.Of("ingest.Options.InitialLoad", "ingest.Options.SlotLifecycle"))
	case l.Read == nil:
		return fmt.Errorf("%w: ingest.Options.InitialLoad needs a reader (Read)", ErrConfig)
	}
	return nil
}

// LoadStateFile is the initial load's state file in the journal's
// directory (next to the coverage file).
const LoadStateFile = "INITIAL_LOAD"

// loadState is the content (JSON) of the state file: which slot's load,
// at which LSN, and whether it is complete in the journal. It is written
// before the first row is read and again once the load's final record is
// fsynced.
type loadState struct {
	Slot       string     `json:"slot"`
	ID         string     `json:"id"`
	LSN        pgq.LSN    `json:"lsn"`
	Tables     []string   `json:"tables"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Rows       int64      `json:"rows"`
}

func (in *Ingester) loadStatePath() string {
	return filepath.Join(filepath.Dir(in.o.CoveragePath), LoadStateFile)
}

// readLoadState reads the state file; ok is false when there is none.
func readLoadState(fs vfs.FS, path string) (st loadState, ok bool, err error) {
	b, ok, err := vfsutil.ReadSmallFile(fs, path, 1<<20)
	if err == nil && ok {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return loadState{}, false, fmt.Errorf("ingest: read %s: %w", path, err)
	}
	return st, ok, nil
}

// writeLoadState replaces the state file atomically and durably, as the
// coverage file is.
func writeLoadState(fs vfs.FS, path string, st loadState) error {
	b, err := json.Marshal(st)
	if err == nil {
		err = vfsutil.ReplaceFile(fs, path, b)
	}
	if err != nil {
		return fmt.Errorf("ingest: store %s: %w", path, err)
	}
	return nil
}

// loadProgress is the running load's progress, for Status.
type loadProgress struct {
	state  atomic.Pointer[loadState] // nil: no load asked for or known
	active atomic.Bool
	rows   atomic.Int64
	chunks atomic.Int64
}

// loadStatus is Status's InitialLoad: nil when no load is known.
func (in *Ingester) loadStatus() *api.InitialLoadStatus {
	st := in.load.state.Load()
	if st == nil {
		return nil
	}
	s := &api.InitialLoadStatus{ID: st.ID, Tables: st.Tables, LSN: st.LSN, Rows: st.Rows, Chunks: in.load.chunks.Load(),
		StartedAt: st.StartedAt, FinishedAt: st.FinishedAt}
	switch {
	case st.FinishedAt != nil:
		s.State = "done"
	case in.load.active.Load():
		s.State, s.Rows = "loading", in.load.rows.Load()
	default:
		s.State = "interrupted"
	}
	return s
}

// prepareInitialLoad runs after preflight when Options.InitialLoad names
// tables. On a slot that exists it lets the start go on only when this
// data dir holds its finished load (a restart streams on); a load that
// did not finish is refused, since an exported snapshot cannot be
// imported again. On a missing slot (preflight left its creation to it)
// it creates the slot on the replication connection with an exported
// snapshot and returns the snapshot's name, which dies at conn's next
// command: conn stays idle until the load is journaled.
func (in *Ingester) prepareInitialLoad(ctx context.Context, conn *pgconn.PgConn, info *ServerInfo) (snapshot string, err error) {
	l := &in.o.InitialLoad
	if len(l.Tables) == 0 {
		return "", nil
	}
	path := in.loadStatePath()
	st, ok, err := readLoadState(in.o.FS, path)
	if err != nil {
		return "", &FatalError{Err: err}
	}
	if ok && st.Slot == in.o.Slot && st.FinishedAt == nil && st.LSN != 0 && in.o.Journal.LastEndLSN() >= st.LSN {
		// The load's final record is fsynced; the crash came before the
		// state file said so.
		now := time.Now().UTC()
		st.FinishedAt = &now
		if err := writeLoadState(in.o.FS, path, st); err != nil {
			return "", &FatalError{Err: err}
		}
	}
	if ok && st.Slot == in.o.Slot {
		in.load.state.Store(&st)
	}
	if !info.exportSlot {
		switch {
		case ok && st.Slot == in.o.Slot && st.FinishedAt != nil:
			in.o.Logger.Info("the initial load is in the journal; streaming", "slot", in.o.Slot, "lsn", st.LSN, "rows", st.Rows)
			return "", nil
		case ok && st.Slot == in.o.Slot:
			return "", fatalOpt(ErrConfig, "the initial load into slot %s (started %s) was interrupted, and a load under the slot's exported snapshot cannot resume: drop the slot (pgq slot drop) and start again with {}, which loads from scratch",
				opterr.Of("ingest.Options.InitialLoad"), in.o.Slot, st.StartedAt.Format(time.RFC3339))
		default:
			return "", fatalOpt(ErrConfig, "slot %s exists, and this data dir holds no initial load of it: {} loads only into a slot it creates (drop the slot, or load the tables with a backfill instead)",
				opterr.Of("ingest.Options.InitialLoad"), in.o.Slot)
		}
	}
	if !in.fresh {
		return "", fatalOpt(ErrConfig, "{} needs a brand-new data dir: this journal has records (or covers an earlier slot), and a new slot starts after them (use a backfill to load tables into it)", opterr.Of("ingest.Options.InitialLoad"))
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, in.o.Slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Mode: pglogrepl.LogicalReplication, SnapshotAction: exportSnapshotAction(info.VersionNum, in.o.SlotFailover)})
	if err != nil {
		return "", classifyServerErr(fmt.Errorf("ingest: create slot %q with an exported snapshot: %w", in.o.Slot, err))
	}
	in.createdSlot = true
	info.SlotCreated = true
	info.SlotFailover = info.VersionNum >= failoverMinVersion && in.o.SlotFailover != FailoverOff
	if info.SlotConfirmed, err = pgq.ParseLSN(res.ConsistentPoint); err != nil {
		return "", fmt.Errorf("ingest: slot %q: consistent point %q: %w", in.o.Slot, res.ConsistentPoint, err)
	}
	in.o.Logger.Info("created replication slot with an exported snapshot for the initial load", "slot", in.o.Slot,
		"consistent_point", info.SlotConfirmed, "snapshot", res.SnapshotName)
	return res.SnapshotName, nil
}

// exportSnapshotAction is the end of CREATE_REPLICATION_SLOT that exports
// the snapshot: the option list of PostgreSQL 15+ (with FAILOVER on 17+
// unless it is off, as createSlot does), the EXPORT_SNAPSHOT keyword
// before, which 15+ still accepts but cannot combine with FAILOVER.
func exportSnapshotAction(versionNum int, failover string) string {
	if versionNum < 150000 {
		return "EXPORT_SNAPSHOT"
	}
	if versionNum >= failoverMinVersion && failover != FailoverOff {
		return "(SNAPSHOT 'export', FAILOVER true)"
	}
	return "(SNAPSHOT 'export')"
}

// runInitialLoad journals the load at the slot's consistent point at (see
// "Initial load" in the package documentation): one transaction whose
// parts are the chunks, in the order the readers hand them over, the
// last one final. It returns once the final part is fsynced and the
// state file says so; only then may START_REPLICATION end the snapshot.
func (in *Ingester) runInitialLoad(ctx context.Context, snapshot string, at pgq.LSN) error {
	l := &in.o.InitialLoad
	now := time.Now().UTC().Truncate(time.Microsecond)
	st := loadState{Slot: in.o.Slot, ID: "load-" + in.o.Slot + "-" + at.String(), LSN: at, Tables: l.Tables, StartedAt: now}
	path := in.loadStatePath()
	// Stored before the first read: a restart must know a load began.
	if err := writeLoadState(in.o.FS, path, st); err != nil {
		return &FatalError{Err: err}
	}
	in.load.state.Store(&st)
	in.load.active.Store(true)
	defer in.load.active.Store(false)
	s := newSession(in, nil) // no status updates: conn is not streaming
	h := heldPart{w: &partWriter{s: s, hdr: pgq.Transaction{CommitLSN: at, EndLSN: at, CommitTime: now, Backfill: st.ID}}}
	in.tracker.Begin()
	var mu sync.Mutex
	emit := func(c LoadChunk) error {
		if len(c.Encoded) < record.Headroom || c.Rows == 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if err := h.add(ctx, c.Encoded[record.Headroom:]); err != nil {
			return err
		}
		in.load.rows.Add(int64(c.Rows))
		in.load.chunks.Add(1)
		return nil
	}
	req := LoadRequest{Snapshot: snapshot, Tables: l.Tables, Parallelism: l.Parallelism, ID: st.ID}
	in.loadFailed = true // until the load is durable: Run drops the slot
	err := l.Read(ctx, req, emit)
	if err == nil {
		err = h.finish(ctx)
	}
	if err == nil {
		err = in.o.Committer.Flush(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("ingest: initial load stopped: %w", ctx.Err())
		}
		return &FatalError{Err: fmt.Errorf("ingest: initial load of slot %s: %w (the slot it created is dropped: start again to load from scratch)", in.o.Slot, err)}
	}
	fin := time.Now().UTC()
	st.FinishedAt, st.Rows = &fin, in.load.rows.Load()
	if err := writeLoadState(in.o.FS, path, st); err != nil {
		return &FatalError{Err: err}
	}
	in.load.state.Store(&st)
	in.loadFailed = false
	in.o.Logger.Info("initial load journaled", "slot", in.o.Slot, "lsn", at, "rows", st.Rows,
		"parts", h.w.part, "took", fin.Sub(now).Round(time.Millisecond))
	return nil
}

// dropFailedLoadSlot drops the slot of a load that did not complete (an
// error, or a stop while loading): its snapshot cannot be imported again,
// so the next start creates a new slot and loads from scratch. The
// walsender of the closed connection may linger a moment: forced.
func (in *Ingester) dropFailedLoadSlot() {
	if !in.loadFailed {
		return
	}
	in.loadFailed, in.createdSlot = false, false
	in.dropSlotNow(true, "cannot drop the slot of the interrupted initial load: drop it (pgq slot drop) before starting again",
		"dropped the slot of the interrupted initial load: the next start loads from scratch")
}

// heldPart submits restamped chunks of one transaction one behind, so
// that the last one can be restamped as the final part.
type heldPart struct {
	w    *partWriter
	held *journal.Record
}

// add copies rec (a framed record) as the next part of h.w's transaction,
// after submitting the one before it.
func (h *heldPart) add(ctx context.Context, rec []byte) error {
	if h.held != nil {
		if err := h.w.submitChunk(ctx, h.held); err != nil {
			return err
		}
	}
	var err error
	h.held, err = h.w.restamp(rec, false)
	return err
}

// finish submits the held part as the final one (or records an empty
// transaction when there was none).
func (h *heldPart) finish(ctx context.Context) error {
	if h.held == nil {
		return h.w.finish(ctx)
	}
	last, err := h.w.restamp(h.held.Encoded, true)
	if err != nil {
		return err
	}
	h.held = nil
	return h.w.submitChunk(ctx, last)
}
