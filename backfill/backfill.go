package backfill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/time/rate"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/ingest"
)

// States of a backfill.
const (
	StateRunning  = "running"
	StateDone     = "done"
	StateFailed   = "failed"
	StateCanceled = "canceled"
)

// ErrRedoLimit fails a backfill whose chunk was read again
// Options.MaxRedos times in a row: large transactions keep committing
// inside every window of that chunk, or ingest never reaches its high
// watermark in time.
var ErrRedoLimit = errors.New("backfill: too many retries of one chunk")

// ErrNoProgress fails a backfill whose chunk read a row that does not
// come after the previous chunk's last key: reading on would journal the
// same rows again and again. It cannot happen with a predicate that
// checkWhereSyntax accepts; it is the defence behind it.
var ErrNoProgress = errors.New("backfill: a chunk did not advance past the previous one")

// DefaultChunkSize is the chunk size when a request gives none.
const DefaultChunkSize = 10000

// Request starts a backfill (POST /v1/backfills; api.BackfillRequest).
type Request = api.BackfillRequest

// Status is a backfill as the API shows it (api.Backfill), and as it is
// stored.
type Status struct {
	api.Backfill
	// ranges of the current table, each with its last key in KeyColumns
	// order; stored (nil: the table's ranges are not made yet).
	ranges []keyRange
}

// stored is the Pebble value of a backfill.
type stored struct {
	Status
	// LastKeyList is the last key of a table read as one range (as pgq
	// stored it before ranges; read when RangeList is empty).
	LastKeyList []string   `json:"last_key_list"`
	RangeList   []keyRange `json:"range_list,omitempty"`
}

// Options configures a Manager.
type Options struct {
	// PGURL of the database (required); each running backfill holds one
	// connection.
	PGURL string
	// Publication is the name of pgq's publication, the one its slot
	// decodes with (required): a backfill reads only the tables it
	// publishes, only the columns and rows it publishes of them, and
	// never a table of a system schema.
	Publication string
	// Dir of the Pebble store of backfills (required).
	Dir string
	// Registry is ingest's chunk registry (required).
	Registry *ingest.Backfills
	// FS does every file operation of the store (vfs.Default when nil):
	// the sidecar's seam, and tests' fault injection. It is wrapped in
	// vfsutil.OwnerOnly: the store (which holds the watermark secret,
	// where clauses and row keys) is 0700 and its files 0600.
	FS vfs.FS
	// Durable returns the end LSN of the newest record that is fsynced and
	// that the journal's readers are done with (required): a chunk's
	// buffer is reused once its record is durable by it.
	Durable func() pgq.LSN
	// HighTimeout bounds the wait for ingest to reach a chunk's high
	// watermark and make it durable; then the chunk is read again. Zero →
	// 2 minutes.
	HighTimeout time.Duration
	// MaxRedos is how many times in a row a chunk may be read again
	// (ChunkResult.Redo, the high watermark not reached in time) before
	// the backfill fails with ErrRedoLimit. Zero → 8.
	MaxRedos int
	// RetryMin and RetryMax bound the backoff after a database error
	// (connection lost, server restart). Zero → 200ms and 10s.
	RetryMin, RetryMax time.Duration
	// Logger; zero → slog.Default().
	Logger *slog.Logger
}

// Manager runs backfills and keeps their progress durable.
type Manager struct {
	o     Options
	nonce string

	// mu guards the fields below, the jobs' statuses, and every write of
	// the store (which it orders: a status is stored under the same lock
	// that changed it).
	mu      sync.Mutex
	store   *store
	jobs    map[string]*job
	seq     uint64
	ctx     context.Context // Run's; nil before Run
	wg      sync.WaitGroup
	chunkNo uint64
}

type job struct {
	st       Status
	cancel   context.CancelFunc
	startAt  time.Time
	startRow int64
	// pace holds the runner to st.MaxRate rows per second; set at launch,
	// changed by Throttle (a rate.Limiter is safe for concurrent use),
	// which also wakes a runner waiting for it through repaced.
	pace    *rate.Limiter
	repaced chan struct{}
}

// waitPace waits until j's pace allows a read of n rows and takes them;
// false when ctx ended first. A change of the cap (Throttle) wakes it, so
// lifting a low cap does not leave the runner asleep for the old one.
func (j *job) waitPace(ctx context.Context, n int) bool {
	for {
		now := time.Now()
		r := j.pace.ReserveN(now, n)
		d := r.DelayFrom(now)
		if d == 0 {
			return true
		}
		r.CancelAt(now)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-j.repaced:
			t.Stop()
		case <-t.C:
		}
	}
}

// Open opens (or creates) the store and loads the backfills.
func Open(o Options) (*Manager, error) {
	if o.PGURL == "" || o.Dir == "" || o.Publication == "" || o.Registry == nil || o.Durable == nil {
		return nil, errors.New("backfill: PGURL, Dir, Publication, Registry and Durable are required")
	}
	if o.HighTimeout <= 0 {
		o.HighTimeout = 2 * time.Minute
	}
	if o.MaxRedos <= 0 {
		o.MaxRedos = 8
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 200 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	st, err := openStore(o.Dir, o.FS, o.Logger)
	if err != nil {
		return nil, err
	}
	var nb [6]byte
	_, _ = rand.Read(nb[:])
	m := &Manager{o: o, store: st, jobs: map[string]*job{}, nonce: hex.EncodeToString(nb[:])}
	if err := m.load(); err != nil {
		_ = st.close()
		return nil, err
	}
	if err := m.loadWatermarkSecret(); err != nil {
		_ = st.close()
		return nil, err
	}
	return m, nil
}

// load reads the backfills and the last id number from the store.
func (m *Manager) load() error {
	db := m.store.db
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("b/"), UpperBound: []byte("b0")})
	if err != nil {
		return fmt.Errorf("backfill: read store: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		var s stored
		if err := json.Unmarshal(it.Value(), &s); err != nil {
			it.Close()
			return fmt.Errorf("backfill: read store: %s: %w", it.Key(), err)
		}
		s.Status.ranges = s.RangeList
		if len(s.RangeList) == 0 && s.LastKeyList != nil {
			// Stored by a pgq before ranges: one range, resumed after
			// its last key.
			s.Status.ranges = []keyRange{{LastKey: s.LastKeyList}}
		}
		if s.Parallelism == 0 {
			s.Parallelism = 1
		}
		m.jobs[s.ID] = &job{st: s.Status}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("backfill: read store: %w", err)
	}
	if v, closer, err := db.Get([]byte("seq")); err == nil {
		m.seq, _ = strconv.ParseUint(string(v), 10, 64)
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("backfill: read store: %w", err)
	}
	return nil
}

// Close closes the store; call it after Run returned.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.store.close(); err != nil {
		return fmt.Errorf("backfill: close store: %w", err)
	}
	return nil
}

// Run resumes the running backfills and runs new ones until ctx is
// cancelled, then waits for them to stop.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	for _, j := range m.jobs {
		if j.st.State == StateRunning {
			m.o.Logger.Info("resuming backfill", "id", j.st.ID, "table", j.st.Table, "rows", j.st.Rows)
			m.launch(j)
		}
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.ctx = nil
	m.mu.Unlock()
	m.wg.Wait()
}

// launch starts j's runner; m.mu is held.
func (m *Manager) launch(j *job) {
	ctx, cancel := context.WithCancel(m.ctx)
	j.cancel = cancel
	j.startAt, j.startRow = time.Now(), j.st.Rows
	// A burst of one chunk: the runner takes a chunk's worth before
	// reading it, and the first chunk goes at once.
	j.pace = rate.NewLimiter(paceLimit(j.st.MaxRate), max(j.st.ChunkSize, 1))
	// One wake-up per range that may wait (a stale one only makes a
	// waiter look at the pace again).
	j.repaced = make(chan struct{}, MaxParallelism)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		m.run(ctx, j)
	}()
}

// Start validates the request against the database (tables, keys,
// predicate; each table must be in Options.Publication and outside the
// system schemas) and starts the backfill.
func (m *Manager) Start(ctx context.Context, req Request) (Status, error) {
	if len(req.Tables) == 0 {
		return Status{}, api.Errorf(api.ErrBadRequest, "backfill: at least one table is required")
	}
	if req.ChunkSize == 0 {
		req.ChunkSize = DefaultChunkSize
	}
	if req.ChunkSize < 1 || req.ChunkSize > 1_000_000 {
		return Status{}, api.Errorf(api.ErrBadRequest, "backfill: chunk_size %d: want 1..1000000", req.ChunkSize)
	}
	if err := checkRate(req.MaxRate); err != nil {
		return Status{}, err
	}
	par, err := checkParallelism(req.Parallelism)
	if err != nil {
		return Status{}, err
	}
	// Before any connection: a malformed name, or one of a system schema.
	names, err := distinctTables(req.Tables)
	if err != nil {
		return Status{}, err
	}
	conn, err := m.connect(ctx)
	if err != nil {
		return Status{}, api.Errorf(api.ErrUnavailable, "backfill: connect to PostgreSQL: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st := Status{Backfill: api.Backfill{State: StateRunning, Where: req.Where, ChunkSize: req.ChunkSize, MaxRate: req.MaxRate, Parallelism: par, CreatedAt: time.Now().UTC()}}
	seen := map[string]bool{}
	for _, name := range names {
		t, err := describePublished(ctx, conn, m.o.Publication, name)
		if err != nil {
			return Status{}, err
		}
		// Two names of one table (t and public.t, "s"."t" and s.t) read
		// it once.
		if q := t.qualified(); !seen[q] {
			if err := checkWhere(ctx, conn, t, req.Where); err != nil {
				return Status{}, err
			}
			seen[q] = true
			st.Tables = append(st.Tables, q)
			st.RowsEstimate += t.estimate
		}
	}
	st.Table = st.Tables[0]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil {
		return Status{}, api.Errorf(api.ErrUnavailable, "backfill: pgq is not running")
	}
	m.seq++
	st.ID = "bf" + strconv.FormatUint(m.seq, 10)
	if err := m.put(&st); err != nil {
		return Status{}, err
	}
	j := &job{st: st}
	m.jobs[st.ID] = j
	m.launch(j)
	m.o.Logger.Info("backfill started", "id", st.ID, "tables", st.Tables, "chunk_size", st.ChunkSize, "max_rate", st.MaxRate, "parallelism", st.Parallelism, "where", st.Where)
	return m.view(j), nil
}

// distinctTables is names without the ones that parse to a table named
// before, in their order, or an error for a name that does not parse,
// one that names a system schema (ErrSystemTable), or for more than
// MaxTables distinct names. It needs no database, so a
// request of many copies of one name costs no more than one.
func distinctTables(names []string) ([]string, error) {
	var out []string
	seen := map[tableRef]bool{}
	for _, name := range names {
		ref, err := parseTable(name)
		if err != nil {
			return nil, err
		}
		if ref.dotted == "" {
			if err := checkSystem(ref.schema, ref.name); err != nil {
				return nil, err
			}
		}
		if seen[ref] {
			continue
		}
		if len(out) == MaxTables {
			return nil, api.Errorf(api.ErrBadRequest, "backfill: more than %d distinct tables: start several backfills", MaxTables)
		}
		seen[ref] = true
		out = append(out, name)
	}
	return out, nil
}

// put stores st and the last id number in one synced batch; m.mu is
// held. When the store had failed, it is healed first and every status
// is stored again (a write that failed stored nothing).
func (m *Manager) put(st *Status) error {
	healed, err := m.store.heal()
	if err != nil {
		return fmt.Errorf("backfill: store %s: %w", st.ID, err)
	}
	all := []*Status{st}
	if healed {
		for _, j := range m.jobs {
			if j.st.ID != st.ID {
				all = append(all, &j.st)
			}
		}
	}
	err = m.store.commit(func(b *pebble.Batch) error {
		for _, st := range all {
			v, err := json.Marshal(stored{Status: *st, LastKeyList: st.singleLastKey(), RangeList: st.ranges})
			if err != nil {
				return fmt.Errorf("encode %s: %w", st.ID, err)
			}
			_ = b.Set([]byte("b/"+st.ID), v, nil)
		}
		return b.Set([]byte("seq"), []byte(strconv.FormatUint(m.seq, 10)), nil)
	})
	if err != nil {
		return fmt.Errorf("backfill: store %s: %w", st.ID, err)
	}
	return nil
}

// view is j's status with its derived fields; m.mu is held.
func (m *Manager) view(j *job) Status {
	st := j.st
	st.Tables = slices.Clone(st.Tables)
	st.LastKey = keyMap(st.KeyColumns, st.singleLastKey())
	st.Ranges = nil
	if len(st.ranges) > 1 {
		for _, r := range st.ranges {
			st.Ranges = append(st.Ranges, api.BackfillRange{After: r.After, UpTo: r.UpTo, LastKey: keyMap(st.KeyColumns, r.LastKey), Rows: r.Rows, Done: r.Done})
		}
	}
	st.ranges = nil
	if st.State == StateRunning && !j.startAt.IsZero() {
		if el := time.Since(j.startAt).Seconds(); el > 0.5 {
			st.Rate = float64(st.Rows-j.startRow) / el
			if st.Rate > 0 {
				eta := max(float64(st.RowsEstimate-st.Rows), 0) / st.Rate
				st.ETA = &eta
			}
		}
	}
	return st
}

// singleLastKey is the last key of a table read as one range (nil:
// none yet, or several ranges: each has its own).
func (st *Status) singleLastKey() []string {
	if len(st.ranges) != 1 {
		return nil
	}
	return st.ranges[0].LastKey
}

// keyMap is a key's text forms by column name (nil for no key).
func keyMap(cols, key []string) map[string]string {
	if key == nil {
		return nil
	}
	out := map[string]string{}
	for i, k := range cols {
		if i < len(key) {
			out[k] = key[i]
		}
	}
	return out
}

// List returns every backfill, oldest first.
func (m *Manager) List() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.jobs))
	for _, id := range slices.SortedFunc(maps.Keys(m.jobs), func(a, b string) int {
		na, _ := strconv.Atoi(a[2:])
		nb, _ := strconv.Atoi(b[2:])
		return na - nb
	}) {
		out = append(out, m.view(m.jobs[id]))
	}
	return out
}

// jobLocked is the backfill id, or an api.ErrNotFound; m.mu is held.
func (m *Manager) jobLocked(id string) (*job, error) {
	j, ok := m.jobs[id]
	if !ok {
		return nil, api.Errorf(api.ErrNotFound, "backfill %q not found", id)
	}
	return j, nil
}

// Get returns one backfill.
func (m *Manager) Get(id string) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.jobLocked(id)
	if err != nil {
		return Status{}, err
	}
	return m.view(j), nil
}

// Cancel stops a running backfill (state canceled); a finished one is
// returned as it is.
func (m *Manager) Cancel(id string) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.jobLocked(id)
	if err != nil {
		return Status{}, err
	}
	if j.st.State != StateRunning {
		return m.view(j), nil
	}
	j.st.State = StateCanceled
	now := time.Now().UTC()
	j.st.FinishedAt = &now
	if j.cancel != nil {
		j.cancel()
	}
	if err := m.put(&j.st); err != nil {
		return Status{}, err
	}
	m.o.Logger.Info("backfill canceled", "id", id)
	return m.view(j), nil
}

// Throttle sets a running backfill's cap on rows read per second (0 lifts
// it); the runner keeps to it from its next chunk on. The cap is stored,
// so a resumed backfill keeps it.
func (m *Manager) Throttle(id string, maxRate float64) (Status, error) {
	if err := checkRate(maxRate); err != nil {
		return Status{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.jobLocked(id)
	if err != nil {
		return Status{}, err
	}
	if j.st.State != StateRunning {
		return Status{}, api.Errorf(api.ErrBadRequest, "backfill %s is %s: only a running backfill can be throttled", id, j.st.State)
	}
	old := j.st.MaxRate
	j.st.MaxRate = maxRate
	if err := m.put(&j.st); err != nil {
		j.st.MaxRate = old
		return Status{}, err
	}
	if j.pace != nil {
		j.pace.SetLimit(paceLimit(maxRate))
		for range cap(j.repaced) { // each range's runner may be waiting
			select {
			case j.repaced <- struct{}{}:
			default: // wake-ups are pending already
			}
		}
	}
	// The rate shown is the one since the change.
	j.startAt, j.startRow = time.Now(), j.st.Rows
	m.o.Logger.Info("backfill throttled", "id", id, "max_rate", maxRate)
	return m.view(j), nil
}

// checkRate validates a max_rate.
func checkRate(r float64) error {
	if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return api.Errorf(api.ErrBadRequest, "max_rate %v: want rows per second >= 0 (0: no cap)", r)
	}
	return nil
}

// paceLimit is the limiter's rate for a max_rate.
func paceLimit(maxRate float64) rate.Limit {
	if maxRate == 0 {
		return rate.Inf
	}
	return rate.Limit(maxRate)
}

// update applies f to j's status under the lock and stores it, unless the
// backfill was canceled meanwhile (then it reports false).
func (m *Manager) update(j *job, f func(st *Status)) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j.st.State != StateRunning {
		return false, nil
	}
	f(&j.st)
	return true, m.put(&j.st)
}

// permanent reports errors that retrying will not fix: a missing table
// or key, a bad predicate, a privilege, a table no longer published.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "42", "22", "2B", "0A", "28":
			return true
		}
		return false
	}
	return errors.Is(err, ErrNoKey) || errors.Is(err, ErrRedoLimit) || errors.Is(err, ErrNoProgress) || errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrBadRequest)
}

// run drives one backfill until it is done, fails or ctx ends.
func (m *Manager) run(ctx context.Context, j *job) {
	backoff := m.o.RetryMin
	for ctx.Err() == nil {
		err := m.runOnce(ctx, j)
		if err == nil || ctx.Err() != nil {
			return
		}
		if permanent(err) {
			m.o.Logger.Error("backfill failed", "id", j.st.ID, "error", err)
			_, _ = m.update(j, func(st *Status) {
				st.State = StateFailed
				e := err.Error()
				st.Error = &e
				now := time.Now().UTC()
				st.FinishedAt = &now
			})
			return
		}
		m.o.Logger.Warn("backfill interrupted; retrying", "id", j.st.ID, "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, m.o.RetryMax)
	}
}

// connect opens a connection that reads text as UTF-8 whatever the
// database's encoding, as ingest's connections do: the journal is UTF-8,
// and rows read here must render as the streamed ones.
func (m *Manager) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(m.o.PGURL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["client_encoding"] = "UTF8"
	return pgx.ConnectConfig(ctx, cfg)
}

// runOnce reads chunks on one connection until the backfill is done or
// an error.
func (m *Manager) runOnce(ctx context.Context, j *job) error {
	conn, err := m.connect(ctx)
	if err != nil {
		return fmt.Errorf("backfill: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m.mu.Lock()
	st := j.st
	st.ranges = cloneRanges(j.st.ranges)
	m.mu.Unlock()
	// Checked again on this session: its standard_conforming_strings may
	// differ from the one Start saw, and a backfill stored by an older
	// pgq was never checked.
	if err := checkWhereSyntax(st.Where, standardStrings(conn)); err != nil {
		return err
	}
	for ti := st.TableIndex; ti < len(st.Tables); ti++ {
		// Checked again each time a table starts or resumes: the
		// publication may have changed since Start (a table taken out of
		// it fails the backfill with ErrNotPublished).
		t, err := describePublished(ctx, conn, m.o.Publication, st.Tables[ti])
		if err != nil {
			return err
		}
		ranges := st.ranges
		if ti != st.TableIndex || len(ranges) == 0 {
			// A table's ranges are made when it starts and kept until
			// it is done: a resumed range goes on after its own last key.
			if ranges, err = splitRanges(ctx, conn, t, max(st.Parallelism, 1)); err != nil {
				return err
			}
		}
		if ok, err := m.update(j, func(s *Status) {
			s.TableIndex, s.Table, s.KeyColumns, s.ranges = ti, t.qualified(), t.keyCols, cloneRanges(ranges)
		}); !ok || err != nil {
			return err
		}
		if ok, err := m.runTable(ctx, conn, j, t, st.Where, ranges, st.ChunkSize); !ok || err != nil {
			return err
		}
	}
	ok, err := m.update(j, func(s *Status) {
		s.State = StateDone
		now := time.Now().UTC()
		s.FinishedAt = &now
	})
	if ok && err == nil {
		m.o.Logger.Info("backfill done", "id", j.st.ID, "rows", j.st.Rows)
	}
	return err
}

// inflight is a chunk read from the table whose high watermark is not
// emitted yet, or whose result ingest has not delivered yet.
type inflight struct {
	ch         *ingest.Chunk
	id         string
	start, end []string // the key before the chunk (nil: the table's start), its last row's key
	rows       int
	snap       snapshot  // the read's
	buf        *chunkBuf // its storage
	epoch      int       // tableRun.epoch when it was opened
	footprint  int       // its storage's bytes once read (chunkBuf.footprint)
}

// runTable reads t's chunks after lastKey, several at a time (runRange):
// while ingest takes chunk N at its high watermark (decoding up to it,
// journaling and fsyncing the record), the server already reads chunk
// N+1 and the ones after it. Each round trip (step) emits N's high
// watermark and N+1's low watermark in one transaction, then reads N+1
// in its own REPEATABLE READ transaction; a completer waits for N's
// result and stores N's progress (only once its record is durable, and
// in chunk order). Every chunk keeps its own window from its low to its
// high watermark, so overlapping them changes nothing for ingest. When N
// must be read again, the chunks read after it are abandoned and reading
// goes on from N's start.
//
// The ranges of the table not done yet are read at once, each by
// runRange on its own connection (conn for the first) with its own watch:
// a watch forgets a transaction once a chunk's snapshot sees it, which
// is only right for the later chunks of that chunk's range. All watches
// begin before settle, so it covers every range. The first error stops
// every range. It reports false when the backfill was canceled or ctx
// ended.
func (m *Manager) runTable(ctx context.Context, conn *pgx.Conn, j *job, t *table, where string, ranges []keyRange, limit int) (bool, error) {
	var todo []int
	for i := range ranges {
		if !ranges[i].Done {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return true, nil
	}
	watches := make([]*ingest.Watch, len(todo))
	for n := range todo {
		watches[n] = m.o.Registry.Watch(t.schema, t.name, t.keyCols)
		defer watches[n].Close() // closes open chunks too
	}
	if err := m.settle(ctx, conn, j, t); err != nil {
		return false, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		ok  bool
		err error
	}
	out := make(chan result, len(todo))
	depth := rangeDepth(len(todo))
	for n, ri := range todo {
		go func() {
			ok, err := m.rangeOn(rctx, conn, n > 0, j, t, watches[n], where, ri, ranges[ri], limit, depth, len(todo))
			if !ok || err != nil {
				cancel() // the other ranges stop too
			}
			out <- result{ok, err}
		}()
	}
	allOK := true
	var errs []error
	for range todo {
		r := <-out
		allOK = allOK && r.ok
		errs = append(errs, r.err)
	}
	if err := firstError(errs...); err != nil {
		return false, err
	}
	return allOK, nil
}

// rangeOn runs runRange on conn, or on a connection of its own when own
// is set.
func (m *Manager) rangeOn(ctx context.Context, conn *pgx.Conn, own bool, j *job, t *table, w *ingest.Watch, where string, ri int, r keyRange, limit, depth, ranges int) (bool, error) {
	if own {
		c, err := m.connect(ctx)
		if err != nil {
			return false, fmt.Errorf("backfill: connect: %w", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		conn = c
	}
	return m.runRange(ctx, conn, j, t, w, where, ri, r, limit, depth, ranges)
}

// firstError is the first of errs that is not a context's cancellation
// (the others' cancellation follows from it), else the first one.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stepResult is what step returned.
type stepResult struct {
	read chunkRead
	snap snapshot
	err  error
}

// open registers the next chunk of w's table, after lastKey, with ingest.
func (m *Manager) open(j *job, w *ingest.Watch, lastKey []string) *inflight {
	m.mu.Lock()
	m.chunkNo++
	id := fmt.Sprintf("%s.%s.%d", j.st.ID, m.nonce, m.chunkNo)
	m.mu.Unlock()
	return &inflight{ch: w.Open(id, j.st.ID), id: id, start: lastKey}
}

// await waits for ingest's result for f, whose high watermark was
// emitted, and then until its record is durable. A chunk that does not
// get there within HighTimeout is to be read again. free reports whether
// nothing refers to f's storage any more: ingest never took the chunk,
// journaled none of it, or its record is durable.
func (m *Manager) await(ctx context.Context, f *inflight) (res ingest.ChunkResult, free bool, err error) {
	timer := time.NewTimer(m.o.HighTimeout)
	defer timer.Stop()
	select {
	case res = <-f.ch.Result():
	case <-ctx.Done():
		return res, false, ctx.Err()
	case <-timer.C:
		if f.ch.Close() {
			return ingest.ChunkResult{Redo: true, Reason: "ingest did not reach the high watermark in time"}, true, nil
		}
		res = <-f.ch.Result() // ingest took it just now
	}
	if res.Redo || res.EndLSN == 0 {
		return res, true, nil
	}
	// Progress is stored only once the chunk's record is durable.
	for m.o.Durable() < res.EndLSN {
		select {
		case <-ctx.Done():
			return res, false, ctx.Err()
		case <-timer.C:
			// The committer may still read the record: its storage stays.
			return ingest.ChunkResult{Redo: true, Reason: "the chunk's record did not become durable in time"}, false, nil
		case <-time.After(time.Millisecond):
		}
	}
	return res, true, nil
}
