package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/backfill"
	"github.com/pgq-dev/pgq/console"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/vfsutil"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/opterr"
)

// Options configures a sidecar. Zero values get the defaults noted.
type Options struct {
	// DataDir holds journal/, index/ and spill/. Required.
	DataDir string
	// Listen is the HTTP address; zero → 127.0.0.1:5480. "127.0.0.1:0"
	// picks a free port (see Addr).
	Listen string
	// Ingest is passed to ingest.New; its Journal, Committer, Logger and
	// Metrics are filled in here, and an empty SpillDir becomes
	// DataDir/spill.
	Ingest ingest.Options
	// SegmentSize of journal segments; zero → the journal default.
	SegmentSize int
	// NoSync turns off fsync (benchmarks of the no-durability ceiling
	// only).
	NoSync bool
	// ScrubRate is the journal scrub's read rate in bytes per second
	// (journal.RunScrub over the sealed segments, run by Run); zero: no
	// scrub (pgq run's --scrub-rate defaults to 16MiB).
	ScrubRate int64
	// FS does every file operation of the journal, the index, the
	// coverage file, the spill files and the backfill store; nil → the
	// operating system (vfs.Default). Open wraps it in vfsutil.OwnerOnly:
	// what pgq creates under DataDir is 0700 (directories) and 0600
	// (files), whatever the umask. Tests fault it (errorfs) to prove the
	// storage invariants.
	FS vfs.FS
	// Logger; zero → slog.Default().
	Logger *slog.Logger
	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every HTTP call except /healthz.
	AuthToken string
	// InsecureNoAuth lets the API listen beyond loopback without
	// AuthToken or client certificates (TLS.ClientCAFile), which Open
	// otherwise refuses (ErrExposed); it is logged as a warning at every
	// start.
	InsecureNoAuth bool
	// AllowedHosts and AllowedOrigins are httpapi.Options' lists: the
	// Host names besides IP literals and localhost that a request without
	// a token may name, and the origins whose browser requests are
	// served cross-site (with CORS headers).
	AllowedHosts   []string
	AllowedOrigins []string
	// Retention of the journal (see consumers.Manager.Retain); the zero
	// value keeps what some group still needs.
	Retention consumers.RetentionOptions
	// Consumers configures the consumer-group manager; its Journal, Index
	// and Logger are filled in here.
	Consumers consumers.ManagerOptions
	// HoldSlotFor names groups that hold the slot (pgq run
	// --hold-slot-for): created if missing and marked at Open, before
	// ingest streams, so a brand-new data dir holds from its first record.
	HoldSlotFor []string
	// HTTP bounds what API clients can hold (connections, timeouts); see
	// httpapi.Limits for the defaults.
	HTTP httpapi.Limits
	// ProbeListen, when set, is a second HTTP address that serves only
	// /healthz, /readyz and /metrics, without the token: probes and
	// scrapes reach it whatever the clients of the API's port do.
	ProbeListen string
	// TLS, when its files are set, serves the API (not the probe
	// listener) over TLS, with mutual TLS when it names client CAs
	// (tls.go).
	TLS TLSOptions
	// WrapHandler, when set, wraps the HTTP API's handler (an embedding
	// program's middleware; the tests validate every answer against the
	// OpenAPI document with it). nil: the API as it is.
	WrapHandler func(http.Handler) http.Handler
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.DataDir == "" {
		return opterr.New(ingest.ErrConfig, "a data directory is required ({+env})", opterr.Of("server.Options.DataDir"))
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:5480"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := o.TLS.Validate(); err != nil {
		return err
	}
	if err := o.Retention.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ingest.ErrConfig, err)
	}
	if o.HTTP.MaxWait == 0 {
		o.HTTP.MaxWait = o.Consumers.MaxWait // a fetch's write deadline covers its longest wait
	}
	if o.HTTP.MaxWait == 0 {
		o.HTTP.MaxWait = consumers.DefaultMaxWait
	}
	if err := o.HTTP.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ingest.ErrConfig, err)
	}
	o.HTTP = fitFileLimit(o.HTTP, openFileLimit(), o.Logger)
	return nil
}

// Server is a running pgq.
type Server struct {
	o         Options
	journal   *journal.Journal
	index     *index.Index
	committer *journal.Committer
	ingester  *ingest.Ingester
	registry  *prometheus.Registry
	consumers *consumers.Manager
	backfills *backfill.Manager
	// database is the database Options.Ingest.PGURL names (databaseOf):
	// the status's and the fetch formats' source.
	database string

	listener net.Listener
	server   *http.Server
	// probes serves the probe listener (Options.ProbeListen); nil: none.
	probes      *http.Server
	probeListen net.Listener
	// tls serves Options.TLS's files (reloaded by ReloadTLS); nil: plain
	// HTTP.
	tls *certReloader
	// failed holds the journal's first write or sync error (fail-stop).
	failed atomic.Pointer[error]
	// indexBusy is true while an index update runs (see indexBatch).
	indexBusy atomic.Bool
	// closeOnce closes the stores once, whoever closes first.
	closeOnce sync.Once
	// history keeps the console's samples (console.go).
	history *console.History
	// dataDir is what Open found at Options.DataDir (fresh.go).
	dataDir freshDir
}

// Open acquires the data dir and prepares every part, without streaming.
// Errors are one clear line.
func Open(ctx context.Context, o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	found := inspectDataDir(o.DataDir, o.FS != nil)
	o.FS = vfsutil.OwnerOnly(o.FS) // nil: vfs.Default
	if err := o.FS.MkdirAll(o.DataDir, vfsutil.DirMode); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", o.DataDir, err)
	}
	tightenDataDir(o.DataDir, o.Logger)
	s := &Server{o: o, registry: prometheus.NewRegistry(), dataDir: found, database: databaseOf(o.Ingest.PGURL)}
	for _, step := range []func(context.Context) error{s.openStores, s.openConsumers, s.registerMetrics, s.openIngest, s.registerIngestMetrics, s.openHTTP} {
		if err := step(ctx); err != nil {
			s.closeFailed()
			return nil, err
		}
	}
	return s, nil
}

// tightenDataDir makes what an older pgq left under the data dir its
// owner's only (vfsutil.TightenTree) and logs what it changed, once: the
// next start finds nothing. A failure (say, a mount point owned by
// another user) is a warning, not a refusal: the modes are no looser than
// before, and pgq's own files are still tightened.
func tightenDataDir(dir string, log *slog.Logger) {
	t, err := vfsutil.TightenTree(dir)
	if t.Count > 0 {
		log.Info("data dir: made what an older pgq left its owner's only (directories 0700, files 0600)",
			"data_dir", dir, "tightened", t.Count, "example", t.Example)
	}
	if err != nil {
		log.Warn("data dir: could not make everything its owner's only", "data_dir", dir, "error", err)
	}
}

// openStores opens the journal and the index and catches the index up
// with the journal.
func (s *Server) openStores(ctx context.Context) error {
	syncs := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "pgq_fsync_seconds", Help: "Latency of fsyncs of pgq's storage (store: journal, index).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"store"})
	if err := s.registry.Register(syncs); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	o := &s.o
	journalSyncs := syncs.WithLabelValues("journal")
	j, err := journal.Open(journal.Options{Dir: filepath.Join(o.DataDir, "journal"), SegmentSize: o.SegmentSize, NoSync: o.NoSync, Logger: o.Logger,
		FS: o.FS, OnSync: func(d time.Duration) { journalSyncs.Observe(d.Seconds()) }})
	if err != nil {
		return err
	}
	s.journal = j
	indexSyncs := syncs.WithLabelValues("index")
	ix, err := index.Open(index.Options{Dir: filepath.Join(o.DataDir, "index"), Logger: o.Logger,
		FS: o.FS, OnSync: func(d time.Duration) { indexSyncs.Observe(d.Seconds()) }})
	if err != nil {
		return err
	}
	s.index = ix
	if err := ix.CatchUp(ctx, j); err != nil {
		return fmt.Errorf("index: catch up with journal: %w", err)
	}
	// The pending bound is what the committer may hold in memory: with
	// ingest's size estimates (decoded changes) 8 MiB keeps a multi-part
	// transaction of any size within pgq's memory bound.
	s.committer = journal.NewCommitter(j, journal.CommitterOptions{MaxPendingBytes: 8 << 20})
	return nil
}

// openConsumers opens the consumer-group manager.
func (s *Server) openConsumers(ctx context.Context) error {
	co := s.o.Consumers
	co.Journal, co.Index, co.Logger = s.journal, s.index, s.o.Logger
	co.WakeFromAppends = true // indexBatch feeds it (Appended)
	cm, err := consumers.NewManager(co)
	if err != nil {
		return err
	}
	s.consumers = cm
	if err := s.registry.Register(cm.Collector()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := cm.HoldSlotFor(ctx, s.o.HoldSlotFor); err != nil {
		return fmt.Errorf("%w: %w", opterr.New(nil, "{}", opterr.Of("server.Options.HoldSlotFor")), err)
	}
	return nil
}

// registerMetrics registers the process's, the index's and the journal
// committer's metrics.
func (s *Server) registerMetrics(context.Context) error {
	indexStat := func(f func(index.Stats) float64) func() float64 {
		return func() float64 { return f(s.index.Stats()) }
	}
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_index_stale", Help: "1 while the index may be behind the journal (a failed update; the healer is catching up): LSN/time positions and byte lag answer with an error meanwhile."},
			indexStat(func(st index.Stats) float64 {
				if st.Stale {
					return 1
				}
				return 0
			})),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgq_index_failed_updates_total", Help: "Index updates that failed and made the index stale."},
			indexStat(func(st index.Stats) float64 { return float64(st.FailedAdds) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgq_index_heals_total", Help: "Times the index caught up with the journal after going stale."},
			indexStat(func(st index.Stats) float64 { return float64(st.Heals) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgq_journal_submit_wait_seconds_total", Help: "Time ingest waited for the journal because the bytes it may hold unsynced were all pending: the disk's fsyncs were the bottleneck."},
			func() float64 { return s.committer.SubmitWaited().Seconds() }),
	} {
		if err := s.registry.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	for _, c := range s.scrubMetrics() { // scrub.go
		if err := s.registry.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}

// openIngest prepares ingest (it connects in Run) and the backfill store
// that feeds it.
func (s *Server) openIngest(context.Context) error {
	metrics, err := ingest.NewMetrics(s.registry)
	if err != nil {
		return err
	}
	io := s.o.Ingest
	io.Journal, io.Committer, io.Logger, io.Metrics, io.FS = s.journal, s.committer, s.o.Logger, metrics, s.o.FS
	io.HoldFloor = s.consumers.HoldFloor
	if io.SpillDir == "" {
		io.SpillDir = filepath.Join(s.o.DataDir, "spill")
	}
	s.wireInitialLoad(&io.InitialLoad) // backfill.go
	// The index and the filtered long polls follow each batch at its
	// fsync, not at its durable-point marker, which may wait for the
	// next batches (journal.Committer.SetOnWritten); confirmations wait.
	s.committer.SetOnWritten(s.indexBatch)
	in, err := ingest.New(io)
	if err != nil {
		return err
	}
	s.ingester = in
	bf, err := s.openBackfills() // backfill.go
	if err != nil {
		return err
	}
	s.backfills = bf
	return nil
}

// databaseOf is the database a connection string names (Debezium's
// source.db and part of the CloudEvents source of the fetch's formats);
// "" when it does not parse (ingest reports that).
func databaseOf(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return ""
	}
	return cfg.Database
}

// openHTTP listens on Options.Listen (and ProbeListen) with the API.
func (s *Server) openHTTP(context.Context) error {
	o := &s.o
	if err := s.openHistory(); err != nil { // console.go
		return err
	}
	if err := s.openTLS(); err != nil { // tls.go; before listening: nothing to close on a bad file
		return err
	}
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return &ListenError{Option: "server.Options.Listen", Addr: o.Listen, Err: err}
	}
	s.listener = l
	if err := s.checkExposed(l.Addr()); err != nil { // tls.go
		return err // closeStores closes the listener
	}
	h, err := httpapi.New(httpapi.Options{Groups: s.consumers, Backfills: s.backfills, Status: s.Status, History: s.historyDoc, NotReady: s.notReady,
		Metrics: promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}), AuthToken: o.AuthToken,
		ClientCertificates: o.TLS.ClientCAFile != "", AllowedHosts: o.AllowedHosts, AllowedOrigins: o.AllowedOrigins,
		Formats: format.Options{Database: s.database, Slot: o.Ingest.Slot}})
	if err != nil {
		return err
	}
	var handler http.Handler = h
	if o.WrapHandler != nil {
		handler = o.WrapHandler(handler)
	}
	srv, err := httpapi.NewServer(handler, o.HTTP)
	if err != nil {
		return err
	}
	if o.ProbeListen != "" {
		if err := s.openProbes(h); err != nil {
			return err // closeStores closes the API's listener: s.server is not set yet
		}
	}
	srv.ErrorLog = slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn) // failed TLS handshakes, in pgq's log format
	s.server = srv
	s.listener = httpapi.Listener(s.listener, o.HTTP)
	if s.tls != nil {
		s.listener = httpapi.TLSListener(s.listener, s.tls.config())
	}
	return nil
}

// ownFiles is what pgq keeps of the open-file limit for itself, whatever
// API clients do: journal segments, the index's and the backfill store's
// Pebble files, PostgreSQL connections, spill files.
const ownFiles = 128

// fitFileLimit lowers the API's connection caps so that clients can hold
// at most half of what the open-file limit leaves beyond ownFiles: a flood
// of connections then makes new clients wait, never pgq fail to open or
// fsync its own files.
func fitFileLimit(l httpapi.Limits, limit uint64, log *slog.Logger) httpapi.Limits {
	if limit == 0 || limit > 1<<30 {
		return l
	}
	budget := (int(limit) - ownFiles) / 2
	if l.MaxConns+l.ProbeConns <= budget {
		return l
	}
	probes := min(l.ProbeConns, max(1, budget/8))
	conns := max(1, budget-probes)
	log.Warn("the open-file limit is low: API connections capped below httpapi.Limits.MaxConns so that pgq keeps its own files", "open_file_limit", limit, "http_max_conns", conns, "probe_conns", probes)
	l.MaxConns, l.ProbeConns = conns, probes
	return l
}

// indexWait is how long the committer waits for one index update. The
// index is derived: a disk that makes Pebble block must not stall ingest.
const indexWait = 2 * time.Second

// indexBatch runs in the committer's OnWritten hook. It waits for the
// index update (so the index follows the journal batch by batch) but at
// most indexWait: an update still blocked then is left running, and the
// batches arriving meanwhile are skipped. The gap they leave makes the
// next update fail, the index marks itself stale (lookups that would be
// wrong return ErrStale), and the healer catches it up from the journal.
func (s *Server) indexBatch(batch []*journal.Record) {
	s.consumers.KickHold() // a holder's lag grew
	entries := make([]index.Entry, len(batch))
	for i, r := range batch {
		if r.Encoded != nil && r.ReadsTable != "" { // a backfill chunk
			entries[i] = index.EntryOfReads(r.Tx, r.Bytes, r.EncodedChanges, r.ReadsSchema, r.ReadsTable)
			continue
		}
		if r.Encoded != nil { // a spilled part: no Tx.Changes
			entries[i] = index.EntryOfStored(r.Tx, r.Encoded, r.Bytes, r.EncodedChanges, s.journal.Relation)
			continue
		}
		entries[i] = index.EntryOf(r.Tx, r.Bytes, r.ChangeCount())
	}
	// The filtered long polls wake from the entries' subjects, also
	// while an index update is blocked.
	s.consumers.Appended(batch, entries)
	if s.indexBusy.Load() {
		return // an earlier update is still blocked: skip (see above)
	}
	done := make(chan error, 1)
	s.indexBusy.Store(true)
	go func() {
		err := s.index.Add(entries)
		s.indexBusy.Store(false)
		done <- err
	}()
	t := time.NewTimer(indexWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, index.ErrStale) {
			// The healer (Run) catches the index up from the journal.
			s.o.Logger.Error("index update failed; healing from the journal", "error", err)
		}
	case <-t.C:
		s.o.Logger.Error("index update blocked; ingest goes on and the index heals from the journal once its disk answers", "waited", indexWait)
	}
}

// probeLimits bound the probe listener: a few connections, short
// timeouts (its answers are small and immediate).
var probeLimits = httpapi.Limits{MaxConns: 16, ProbeConns: 1, HeaderTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second}

// openProbes listens on Options.ProbeListen with the API's probe routes.
func (s *Server) openProbes(api *httpapi.API) error {
	l, err := net.Listen("tcp", s.o.ProbeListen)
	if err != nil {
		return &ListenError{Option: "server.Options.ProbeListen", Addr: s.o.ProbeListen, Err: err}
	}
	lim := probeLimits
	srv, err := httpapi.NewServer(api.ProbeHandler(), lim)
	if err != nil {
		l.Close()
		return err
	}
	_ = lim.Validate()
	s.probes, s.probeListen = srv, httpapi.Listener(l, lim)
	return nil
}

// ProbeAddr is the probe listener's address, "" without one.
func (s *Server) ProbeAddr() string {
	if s.probeListen == nil {
		return ""
	}
	return s.probeListen.Addr().String()
}

// Addr is the HTTP listener's address.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// notReady returns why pgq is not ready to take changes, "" when it is:
// the replication connection must be streaming and the journal writable.
func (s *Server) notReady() string {
	if err := s.storageErr(); err != nil {
		return "journal not writable: " + err.Error()
	}
	if c := s.journal.Corruption(); c != nil {
		return c.Error()
	}
	st := s.ingester.Status()
	if st.SpillError != nil {
		// A full spill disk stops ingest like a full journal disk, only
		// not for good (ingest reconnects with backoff).
		return "spill directory not writable: " + *st.SpillError
	}
	if !st.Connected {
		if st.LastError != nil {
			return "not connected to PostgreSQL: " + *st.LastError
		}
		return "not connected to PostgreSQL"
	}
	return ""
}

// storageErr is the journal's failure, nil while it accepts appends.
func (s *Server) storageErr() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return s.journal.Err()
}

// Status is the document GET /v1/status answers: ingest's part
// (the Ingester's Status), the groups, the journal's error, corruption and
// scrub, and the index's health.
func (s *Server) Status() api.Status {
	st := statusDocument(s.ingester.Status(), s.database, s.consumers.Status(), s.storageErr(), s.index.Stats())
	scrubStatus(&st, s.journal.Corruption(), s.journal.ScrubStatus()) // scrub.go
	return st
}

// statusDocument completes st, ingest's part of the status, with its
// other parts; apart from Server so that a test can feed it every part
// and check that no field of api.Status is left out.
func statusDocument(st api.Status, database string, groups map[string]api.GroupStatus, storageErr error, ist index.Stats) api.Status {
	st.Database = database
	st.Groups = groups
	if storageErr != nil {
		e := storageErr.Error()
		st.JournalError = &e
	}
	st.Index = api.IndexStatus{Stale: ist.Stale, FailedUpdates: ist.FailedAdds, Heals: ist.Heals}
	if ist.LastError != nil {
		e := ist.LastError.Error()
		st.Index.LastError = &e
	}
	return st
}

// Run serves HTTP, runs the committer and streams until ctx is cancelled
// (nil) or ingest fails fatally. Everything is stopped and closed on return.
func (s *Server) Run(ctx context.Context) error {
	stopBackfills := s.runBackfills(ctx) // backfill.go
	cctx, cancelCommitter := context.WithCancel(context.WithoutCancel(ctx))
	committerDone := make(chan error, 1)
	go func() { committerDone <- s.committer.Run(cctx) }()
	httpDone := make(chan error, 2)
	go func() { httpDone <- s.server.Serve(s.listener) }()
	if s.probes != nil {
		go func() { httpDone <- s.probes.Serve(s.probeListen) }()
	}

	hctx, cancelHealer := context.WithCancel(ctx)
	healerDone := make(chan struct{})
	go func() {
		defer close(healerDone)
		s.index.RunHealer(hctx, s.journal, 0)
	}()

	sctx, cancelSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		s.history.Run(sctx, s.sample) // console.go
	}()

	stopScrub := s.runScrub(ctx) // scrub.go

	rctx, cancelRetention := context.WithCancel(ctx)
	retentionDone := make(chan struct{})
	go func() {
		defer close(retentionDone)
		_ = s.consumers.RunRetention(rctx, s.o.Retention) // options were validated by Open
	}()

	stopTLSWatch := s.watchTLS(ctx) // tls.go

	ictx, cancelIngest := context.WithCancel(ctx)
	ingestDone := make(chan error, 1)
	go func() { ingestDone <- s.ingester.Run(ictx) }()

	var err error
	select {
	case err = <-ingestDone:
	case err = <-committerDone:
		if err == nil {
			err = errors.New("journal committer stopped")
		}
		// Fail-stop: nothing more is confirmed; what was not synced is
		// re-read from the slot after a restart. (The committer's error
		// names the journal already.)
		s.failed.Store(&err)
		s.o.Logger.Error("journal failed; stopping (restart pgq once the cause is fixed: the slot re-sends what was not synced)", "error", err)
		cancelIngest()
		<-ingestDone
	case herr := <-httpDone:
		err = fmt.Errorf("http: serve on %s: %w", s.listener.Addr(), herr)
		cancelIngest()
		<-ingestDone
	}
	cancelIngest()
	stopTLSWatch()
	stopScrub()
	cancelRetention()
	<-retentionDone
	cancelSampler()
	<-samplerDone
	cancelHealer()
	<-healerDone
	_ = s.consumers.Close() // wake long polls before the HTTP shutdown
	if cerr := s.committer.Close(); cerr != nil && err == nil {
		err = cerr
	}
	cancelCommitter()
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.server.Shutdown(shutCtx)
	if s.probes != nil {
		_ = s.probes.Shutdown(shutCtx)
	}
	stopBackfills()
	if err != nil {
		s.closeFailed()
	} else {
		s.closeStores()
	}
	return err
}

// closeFailed closes the stores of a start that failed, and removes what
// it created in a data dir that was missing or empty when nothing was
// journaled (fresh.go): a failed first start leaves no skeleton.
func (s *Server) closeFailed() {
	unused := s.unused()
	s.closeStores()
	if unused {
		s.removeUnused()
	}
}

// Close releases what Open acquired (the listener, the stores and the
// data dir's lock) for a Server that is not run: Run stops and closes
// everything itself when it returns, and Close after it does nothing.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		_ = s.listener.Close()
		if s.probeListen != nil {
			_ = s.probeListen.Close()
		}
		s.closeStoresNow()
	})
	return nil
}

// closeStores closes the stores once (Open's failures, Run's end, Close).
func (s *Server) closeStores() { s.closeOnce.Do(s.closeStoresNow) }

func (s *Server) closeStoresNow() {
	if s.listener != nil && s.server == nil {
		s.listener.Close()
	}
	if s.backfills != nil {
		if err := s.backfills.Close(); err != nil {
			s.o.Logger.Error("closing the backfill store", "error", err)
		}
	}
	if s.index != nil {
		s.index.Close()
	}
	if s.journal != nil {
		s.journal.Close()
	}
}
