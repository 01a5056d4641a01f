package index

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pebblefs"
	"github.com/pgq-dev/pgq/internal/vfsutil"
)

// Sentinel errors. Every error returned by this package wraps one of these
// or an error of Pebble or the operating system.
var (
	// ErrNotFound: no entry, offset or group matches.
	ErrNotFound = errors.New("index: not found")
	// ErrClosed: the Index was closed.
	ErrClosed = errors.New("index: closed")
	// ErrLocked: another Index (in this or another process) holds the
	// directory.
	ErrLocked = errors.New("index: directory is in use by another process or Index")
	// ErrInvalidOptions: Options.Validate failed.
	ErrInvalidOptions = errors.New("index: invalid options")
	// ErrInvalidEntry: an Entry passed to Add is malformed (offset 0,
	// negative sizes).
	ErrInvalidEntry = errors.New("index: invalid entry")
	// ErrGap: Add was given offsets that do not continue the index densely.
	ErrGap = errors.New("index: offsets not contiguous")
	// ErrInvalidName: a group name is empty.
	ErrInvalidName = errors.New("index: invalid group name")
	// ErrCorrupt: a stored value does not decode.
	ErrCorrupt = errors.New("index: corrupt value")
	// ErrStale: the derived entries are behind the journal because an Add
	// (or a CatchUp, TruncateFront) failed or was refused; a lookup whose
	// answer would depend on the missing entries fails with it until Heal
	// (or CatchUp) succeeds. See the package doc.
	ErrStale = errors.New("index: stale (behind the journal until healed)")
	// ErrFailed: Pebble reported a failed write or fsync of the index's
	// files, or a fatal error; writes are refused until Heal reopens it.
	// Errors wrapping it also wrap the first cause.
	ErrFailed = errors.New("index: storage failed")
)

// DefaultSlowSync is the fsync latency above which a warning is logged when
// Options.SlowSync is zero.
const DefaultSlowSync = time.Second

// Options configure Open. The zero value of every field but Dir is usable.
type Options struct {
	// Dir is the Pebble directory. Required; created if missing.
	Dir string
	// Logger receives Pebble's messages and the index's own (stale,
	// healed, failed, slow fsync). Zero means slog.Default().
	Logger *slog.Logger
	// FS is the file system every file operation of the index (Pebble's
	// included) goes through; nil means vfs.Default, the operating
	// system's. It is wrapped in vfsutil.OwnerOnly: the index's directory
	// is 0700 and its files 0600, whatever the umask. Tests use it to inject faults (vfs/errorfs) and to simulate
	// crashes (vfs.NewCrashableMem).
	FS vfs.FS
	// OnSync, when set, is called with the latency of every fsync of an
	// index file or directory, failed or not (hook a histogram on it). It
	// runs on Pebble's goroutines: keep it short and non-blocking.
	OnSync func(d time.Duration)
	// SlowSync is the fsync latency above which a warning is logged; zero
	// means DefaultSlowSync (1 s).
	SlowSync time.Duration
}

// Validate reports whether the options can be used.
func (o Options) Validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
	}
	if o.SlowSync < 0 {
		return fmt.Errorf("%w: SlowSync %v is negative", ErrInvalidOptions, o.SlowSync)
	}
	return nil
}

// Entry is what the index learns from one journal record.
type Entry struct {
	Offset     pgq.Offset
	CommitLSN  pgq.LSN
	EndLSN     pgq.LSN
	CommitTime time.Time // kept at microsecond precision, returned in UTC
	Bytes      int       // encoded record size, for byte lag
	Changes    int       // number of changes in the record
	// Subjects is the set of the record's distinct subjects (see
	// Subject); "" when unknown (every filter then counts the record).
	// Add stores it as a subject set id.
	Subjects SubjectSet
	// End says whether the record ends its transaction (pgq.Transaction's
	// Final): a filtered fetch passes over a record it does not want
	// without reading it when the index knows. EndUnknown (the zero
	// value) for an entry of a block written before the flag.
	End End
}

// End is whether a record ends its transaction, as the index knows it.
type End uint8

const (
	// EndUnknown: not known (a block of an older pgq); read the record.
	EndUnknown End = iota
	// EndFinal: the record is its transaction's last (or only) part.
	EndFinal
	// EndPart: a later part of its transaction follows.
	EndPart
)

// endOf is the End of a record whose Final is final.
func endOf(final bool) End {
	if final {
		return EndFinal
	}
	return EndPart
}

// EntryOf returns the Entry for a journal record with the header of tx,
// whose encoded size is bytes and which holds changes changes. The
// subjects are read from tx.Changes when it holds the changes (not for a
// record journaled from its encoded form: EntryOfStored).
func EntryOf(tx *pgq.Transaction, bytes, changes int) Entry {
	e := Entry{
		Offset:     tx.Offset,
		CommitLSN:  tx.CommitLSN,
		EndLSN:     tx.EndLSN,
		CommitTime: tx.CommitTime,
		Bytes:      bytes,
		Changes:    changes,
		End:        endOf(tx.Final),
	}
	if len(tx.Changes) == changes {
		e.Subjects = subjectsOf(tx.Changes)
	}
	return e
}

// Index is the Pebble store next to the journal. See the package doc for
// the key layout, the concurrency rules and the stale/heal states.
type Index struct {
	lock     *pebble.Lock
	dir      string
	log      *slog.Logger
	fs       vfs.FS // Options.FS (or vfs.Default) wrapped by pebblefs.WatchFS
	onSync   func(time.Duration)
	slowSync time.Duration

	// life guards db against use after Close and against a Heal that
	// reopens it: every method holds it for reading, Close and reopen for
	// writing. db is nil after a reopen failed (every call then fails with
	// ErrFailed until a Heal reopens it).
	life   sync.RWMutex
	closed bool
	db     *pebble.DB

	// wmu serializes the writers of derived entries (Add, TruncateFront,
	// Reset, CatchUp): each reads the tail before writing a batch. It also
	// orders the stale mark: Add sets it and CatchUp clears it under wmu.
	wmu sync.Mutex
	// last is the highest indexed offset (view's last); written under
	// wmu, read lock-free.
	last atomic.Uint64
	// view is the derived entries' state readers start from: the floor,
	// the end of the stored blocks and the block being filled. Writers
	// replace it (never modify what it points to below its length) under
	// wmu; readers Load it once per call.
	view atomic.Pointer[view]
	// sets is the subject-set dictionary (subjects.go); gen counts the
	// Resets and Pebble opens, so that a Selector knows its memo (and,
	// after an open, its verdicts by set id) is void.
	sets sets
	gen  atomic.Uint64

	h health
}

// Open opens (creating if needed) the index in opts.Dir. A directory held by
// another Index fails with an error wrapping ErrLocked.
func Open(opts Options) (*Index, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "index")
	base := vfsutil.OwnerOnly(opts.FS) // nil: vfs.Default
	ix := &Index{dir: opts.Dir, log: logger, onSync: opts.OnSync, slowSync: opts.SlowSync}
	if ix.slowSync == 0 {
		ix.slowSync = DefaultSlowSync
	}
	ix.h.init()
	ix.fs = &pebblefs.WatchFS{FS: base, OnSync: ix.observeSync, OnFail: ix.fileFailed}
	if err := ix.fs.MkdirAll(opts.Dir, vfsutil.DirMode); err != nil {
		return nil, fmt.Errorf("index: create %s: %w", opts.Dir, err)
	}
	lock, err := pebble.LockDirectory(opts.Dir, ix.fs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, opts.Dir, err)
	}
	ix.lock = lock
	if err := ix.openDB(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return ix, nil
}

// openDB opens Pebble in ix.dir and loads the derived view; the caller owns ix
// alone or holds life for writing. On error ix.db stays nil.
func (ix *Index) openDB() error {
	db, err := pebble.Open(ix.dir, &pebble.Options{
		FS:     ix.fs,
		Lock:   ix.lock,
		Logger: pebbleLogger{ix},
	})
	if err == nil && ix.h.broken.Load() {
		// Pebble reported a fatal error while opening but went on.
		err = ix.failedErr()
	}
	if err != nil {
		if db != nil {
			pebblefs.CloseDB(db)
		}
		return fmt.Errorf("index: open pebble in %s: %w", ix.dir, err)
	}
	ix.db = db
	ix.gen.Add(1) // set ids and offsets are what this Pebble says (Selector)
	if err := ix.loadDerived(); err != nil {
		pebblefs.CloseDB(db)
		ix.db = nil
		return err
	}
	return nil
}

// observeSync is the WatchFS's fsync observer.
func (ix *Index) observeSync(path string, d time.Duration, err error) {
	if ix.onSync != nil {
		ix.onSync(d)
	}
	if d > ix.slowSync {
		ix.log.Warn("index: slow fsync", "path", path, "took", d, "threshold", ix.slowSync, "failed", err != nil)
	}
}

// fileFailed is the WatchFS's report of a failed write-side file operation.
func (ix *Index) fileFailed(op, path string, err error) {
	ix.fail(fmt.Errorf("%s %s: %w", op, path, err))
}

// Close stores the block being filled (see the package doc; unsynced, as
// every derived write: the entries are rebuildable, groups are written
// synced), closes Pebble and releases the directory lock. Close is
// idempotent; every later call returns ErrClosed.
func (ix *Index) Close() error {
	ix.life.Lock()
	defer ix.life.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	var err error
	if ix.db != nil {
		// Writers hold life's read side: none runs now.
		if ferr := ix.storeTail(); ferr != nil {
			ix.log.Warn("index: the newest entries were not stored; they are rebuilt from the journal", "err", ferr.Error())
		}
		err = pebblefs.CloseDB(ix.db)
	}
	if lerr := ix.lock.Close(); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("index: close %s: %w", ix.dir, err)
	}
	return nil
}

// enter takes the read side of life; it fails once the Index is closed,
// and with ErrFailed while a reopen by Heal has failed.
func (ix *Index) enter() error {
	ix.life.RLock()
	if ix.closed {
		ix.life.RUnlock()
		return ErrClosed
	}
	if ix.db == nil {
		ix.life.RUnlock()
		if err := ix.failedErr(); err != nil {
			return err
		}
		return fmt.Errorf("%w: pebble is not open", ErrFailed)
	}
	return nil
}

func (ix *Index) exit() { ix.life.RUnlock() }

// LastOffset returns the highest offset indexed, 0 when none. It stays at
// its value across TruncateFront and drops to 0 only on Reset.
func (ix *Index) LastOffset() pgq.Offset { return pgq.Offset(ix.last.Load()) }

// Add indexes entries, which must have dense ascending offsets. Entries at
// or below LastOffset are skipped (already indexed: a caller racing
// CatchUp is harmless); the first new one must be LastOffset+1, or any
// offset when the index is empty. All of it is one Pebble batch written
// without fsync: the index is rebuildable from the journal.
//
// When Add fails (a storage error, a gap, an invalid entry) the index
// becomes stale, and while it is stale every Add is refused with an error
// wrapping ErrStale without writing: the entries are in the journal, and
// Heal (RunHealer) indexes them from there. Add never blocks on a heal
// beyond the writer lock that CatchUp holds.
func (ix *Index) Add(entries []Entry) error {
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if ix.h.stale.Load() {
		ix.h.skippedAdd()
		return fmt.Errorf("index: add %s: %w (left to the healer)", span(entries), ErrStale)
	}
	err := ix.addLocked(entries) // its errors name the offsets
	if err != nil {
		ix.h.failedAdd()
		ix.markStale(err)
	}
	return err
}

// span names the offsets of entries for messages.
func span(entries []Entry) string {
	switch len(entries) {
	case 0:
		return "no entries"
	case 1:
		return fmt.Sprintf("offset %d", entries[0].Offset)
	}
	return fmt.Sprintf("offsets %d..%d", entries[0].Offset, entries[len(entries)-1].Offset)
}

// EntryAt returns the entry at off, or an error wrapping ErrNotFound (or
// ErrStale for an off past LastOffset while the index is stale).
func (ix *Index) EntryAt(off pgq.Offset) (Entry, error) {
	if err := ix.enter(); err != nil {
		return Entry{}, err
	}
	defer ix.exit()
	if err := ix.staleAfter(off); err != nil {
		return Entry{}, fmt.Errorf("index: entry at %d: %w", off, err)
	}
	s, err := ix.get(off)
	if err != nil {
		return Entry{}, err
	}
	e := s.Entry
	e.Subjects = ix.setOf(s.set)
	return e, nil
}

// staleAfter returns an error wrapping ErrStale when the index is stale and
// off lies past LastOffset: the answer there is unknown, not absent.
func (ix *Index) staleAfter(off pgq.Offset) error {
	if !ix.h.stale.Load() || off <= pgq.Offset(ix.last.Load()) {
		return nil
	}
	return fmt.Errorf("%w: offset %d is past the last indexed offset %d", ErrStale, off, ix.last.Load())
}

// staleSeek turns a seek's miss (or a hit past LastOffset, which a failed
// Pebble may hold) into an error wrapping ErrStale while the index is
// stale: the answer may lie in records not indexed yet.
func (ix *Index) staleSeek(off pgq.Offset, err error) (pgq.Offset, error) {
	if !ix.h.stale.Load() {
		return off, err
	}
	last := pgq.Offset(ix.last.Load())
	if errors.Is(err, ErrNotFound) || (err == nil && off > last) {
		return 0, fmt.Errorf("%w: no answer up to the last indexed offset %d", ErrStale, last)
	}
	return off, err
}

// SeekLSN returns the first offset (in offset order) whose CommitLSN >= lsn.
// All parts of a multi-part transaction share one commit LSN; the first
// part is returned. When lsn lies before the first indexed entry the first
// indexed offset is returned; past the last, an error wrapping ErrNotFound,
// or ErrStale while the index is stale.
func (ix *Index) SeekLSN(lsn pgq.LSN) (pgq.Offset, error) {
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	off, err := ix.staleSeek(ix.seekLSN(lsn))
	if err != nil {
		return 0, fmt.Errorf("index: seek LSN %s: %w", lsn, err)
	}
	return off, nil
}

// SeekTime returns the first offset (in offset order) whose CommitTime >= t,
// at microsecond precision. Commit times may repeat or, rarely, go
// backwards; the answer is still the first such offset in offset order,
// never a later offset with an earlier time (see the package doc). Past
// the last entry: an error wrapping ErrNotFound, or ErrStale while the
// index is stale.
func (ix *Index) SeekTime(t time.Time) (pgq.Offset, error) {
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++ // round a sub-microsecond t up: stored times are whole µs
	}
	off, err := ix.staleSeek(ix.seekTime(us))
	if err != nil {
		return 0, fmt.Errorf("index: seek time %s: %w", t.UTC().Format(time.RFC3339Nano), err)
	}
	return off, nil
}

// BytesBetween returns the sum of Entry.Bytes over the offsets [from, to]:
// two point lookups of the running byte count. It returns 0 when from > to
// and an error wrapping ErrNotFound when from or to is not indexed (ErrStale
// when to is past LastOffset while the index is stale).
func (ix *Index) BytesBetween(from, to pgq.Offset) (int64, error) {
	if from > to {
		return 0, nil
	}
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	if err := ix.staleAfter(to); err != nil {
		return 0, fmt.Errorf("index: bytes between %d and %d: %w", from, to, err)
	}
	a, err := ix.get(from)
	if err != nil {
		return 0, fmt.Errorf("index: bytes between %d and %d: %w", from, to, err)
	}
	b, err := ix.get(to)
	if err != nil {
		return 0, fmt.Errorf("index: bytes between %d and %d: %w", from, to, err)
	}
	if b.cum < a.cum {
		return 0, fmt.Errorf("%w: running byte count falls from %d (offset %d) to %d (offset %d)", ErrCorrupt, a.cum, from, b.cum, to)
	}
	return int64(b.cum - a.cum + uint64(a.Bytes)), nil
}

// TruncateFront deletes every entry below off with range deletions.
// LastOffset does not change. Truncating past the last entry empties the
// derived keys; the next Add must still continue at LastOffset+1.
func (ix *Index) TruncateFront(off pgq.Offset) error {
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if err := ix.truncateFrontLocked(off); err != nil {
		// Entries below off may remain: CatchUp removes them.
		ix.markStale(err)
		return err
	}
	return nil
}

// Reset drops every derived entry and sets LastOffset to 0. Groups stay.
func (ix *Index) Reset() error {
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if err := ix.resetLocked(); err != nil {
		ix.markStale(err)
		return err
	}
	return nil
}

// PutGroup stores value under the group name, fsynced before it returns.
// An error means the value may or may not be stored; while the index has
// failed (ErrFailed) nothing is written until Heal reopens it.
func (ix *Index) PutGroup(name string, value []byte) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	b := ix.db.NewBatch()
	defer b.Close()
	if err := b.Set(groupKey(name), value, nil); err != nil {
		return fmt.Errorf("index: put group %q: %w", name, err)
	}
	if err := ix.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("index: put group %q: %w", name, err)
	}
	return nil
}

// GetGroup returns a copy of the value stored under name, or an error
// wrapping ErrNotFound.
func (ix *Index) GetGroup(name string) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if err := ix.enter(); err != nil {
		return nil, err
	}
	defer ix.exit()
	v, closer, err := ix.db.Get(groupKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: group %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("index: get group %q: %w", name, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// DeleteGroup removes the group name and its entries, fsynced. Deleting a group that does
// not exist is not an error.
func (ix *Index) DeleteGroup(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	b := ix.db.NewBatch()
	defer b.Close()
	if err := b.Delete(groupKey(name), nil); err != nil {
		return fmt.Errorf("index: delete group %q: %w", name, err)
	}
	lo, hi := groupEntryBounds(name) // its entries (UpdateGroup)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return fmt.Errorf("index: delete group %q: %w", name, err)
	}
	if err := ix.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("index: delete group %q: %w", name, err)
	}
	return nil
}

// Groups returns every group and its value (copies).
func (ix *Index) Groups() (map[string][]byte, error) {
	if err := ix.enter(); err != nil {
		return nil, err
	}
	defer ix.exit()
	lo, hi := prefixBounds(prefixGroup)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("index: list groups: %w", err)
	}
	defer it.Close()
	out := make(map[string][]byte)
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("index: list groups: %w", err)
		}
		out[string(it.Key()[1:])] = bytes.Clone(v)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("index: list groups: %w", err)
	}
	return out, nil
}

// pebbleLogger routes Pebble's log lines to slog. Infof goes to Debug:
// Pebble is chatty and the index is a detail of pgq.
type pebbleLogger struct{ ix *Index }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.ix.log.Debug(fmt.Sprintf(format, args...), "source", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.ix.log.Error(fmt.Sprintf(format, args...), "source", "pebble")
}

// Fatalf is Pebble's report of an error it cannot go on from: a failed
// commit (a WAL write or fsync error), a failed MANIFEST write, a broken
// invariant. Pebble expects it not to return, and the default logger exits
// the process; the index is a derived store beside the journal and must
// not take pgq down with it. So Fatalf marks the index failed (see
// ErrFailed) and returns: every write checks that mark after it commits
// (Pebble reports a failed commit only through Fatalf and then returns
// nil), writes are refused from then on, and Heal closes this Pebble and
// opens it afresh. Fatalf never panics and never exits.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.ix.fail(errors.New(fmt.Sprintf(format, args...)))
}
