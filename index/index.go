package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq"
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
)

// Options configure Open.
type Options struct {
	// Dir is the Pebble directory. Required; created if missing.
	Dir string
	// Logger receives Pebble's messages. Zero means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether the options can be used.
func (o Options) Validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
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
}

// EntryOf returns the Entry for a journal record whose encoded size is bytes.
func EntryOf(tx *pgq.Transaction, bytes int) Entry {
	return Entry{
		Offset:     tx.Offset,
		CommitLSN:  tx.CommitLSN,
		EndLSN:     tx.EndLSN,
		CommitTime: tx.CommitTime,
		Bytes:      bytes,
		Changes:    tx.ChangeCount(),
	}
}

// Index is the Pebble store next to the journal. See the package doc for
// the key layout and the concurrency rules.
type Index struct {
	db   *pebble.DB
	lock *pebble.Lock
	dir  string
	log  *slog.Logger

	// life guards db against use after Close: every method holds it for
	// reading, Close for writing.
	life   sync.RWMutex
	closed bool

	// wmu serializes the writers of derived entries (Add, TruncateFront,
	// Reset, CatchUp): each reads the tail before writing a batch.
	wmu sync.Mutex
	// last mirrors keyLast; written under wmu, read lock-free.
	last atomic.Uint64
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
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("index: create %s: %w", opts.Dir, err)
	}
	lock, err := pebble.LockDirectory(opts.Dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, opts.Dir, err)
	}
	db, err := pebble.Open(opts.Dir, &pebble.Options{
		Lock:   lock,
		Logger: pebbleLogger{logger},
	})
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("index: open pebble in %s: %w", opts.Dir, err)
	}
	ix := &Index{db: db, lock: lock, dir: opts.Dir, log: logger}
	last, err := ix.readLast()
	if err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, err
	}
	ix.last.Store(uint64(last))
	return ix, nil
}

// Close flushes nothing extra (derived entries are rebuildable, groups are
// written synced), closes Pebble and releases the directory lock. Close is
// idempotent; every later call returns ErrClosed.
func (ix *Index) Close() error {
	ix.life.Lock()
	defer ix.life.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	err := ix.db.Close()
	if lerr := ix.lock.Close(); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("index: close %s: %w", ix.dir, err)
	}
	return nil
}

// enter takes the read side of life; it fails once the Index is closed.
func (ix *Index) enter() error {
	ix.life.RLock()
	if ix.closed {
		ix.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (ix *Index) exit() { ix.life.RUnlock() }

func (ix *Index) readLast() (pgq.Offset, error) {
	v, closer, err := ix.db.Get(keyLast)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("index: read last offset: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: last offset of %d bytes", ErrCorrupt, len(v))
	}
	return pgq.Offset(binary.BigEndian.Uint64(v)), nil
}

// LastOffset returns the highest offset indexed, 0 when none. It stays at
// its value across TruncateFront and drops to 0 only on Reset.
func (ix *Index) LastOffset() pgq.Offset { return pgq.Offset(ix.last.Load()) }

// FirstOffset returns the lowest offset still indexed, 0 when none.
func (ix *Index) FirstOffset() (pgq.Offset, error) {
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	s, err := ix.firstAtOrAfter(0)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.Offset, nil
}

// Add indexes entries, which must have dense ascending offsets. Entries at
// or below LastOffset are skipped (already indexed: a caller racing
// CatchUp is harmless); the first new one must be LastOffset+1, or any
// offset when the index is empty. All of it is one Pebble batch written
// without fsync: the index is rebuildable from the journal.
func (ix *Index) Add(entries []Entry) error {
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	return ix.addLocked(entries)
}

func (ix *Index) addLocked(entries []Entry) error {
	last := pgq.Offset(ix.last.Load())
	for len(entries) > 0 && entries[0].Offset != 0 && entries[0].Offset <= last {
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil
	}
	for i, e := range entries {
		if e.Offset == 0 || e.Bytes < 0 || e.Changes < 0 {
			return fmt.Errorf("%w: offset %d, bytes %d, changes %d", ErrInvalidEntry, e.Offset, e.Bytes, e.Changes)
		}
		if i > 0 && e.Offset != entries[i-1].Offset+1 {
			return fmt.Errorf("%w: offset %d follows %d", ErrGap, e.Offset, entries[i-1].Offset)
		}
	}
	var prev stored
	havePrev := false
	if last != 0 {
		if entries[0].Offset != last+1 {
			return fmt.Errorf("%w: offset %d does not follow last indexed offset %d", ErrGap, entries[0].Offset, last)
		}
		p, err := ix.get(last)
		switch {
		case err == nil:
			prev, havePrev = p, true
		case errors.Is(err, ErrNotFound):
			// TruncateFront removed the tail too: start the running
			// values afresh, as after Reset.
		default:
			return err
		}
	}

	b := ix.db.NewBatch()
	defer b.Close()
	for _, e := range entries {
		s := stored{Entry: e}
		us := e.CommitTime.UnixMicro()
		if havePrev {
			s.cum = prev.cum + uint64(e.Bytes)
			s.maxLSN = max(prev.maxLSN, e.CommitLSN)
			s.maxTime = max(prev.maxTime, us)
		} else {
			s.cum = uint64(e.Bytes)
			s.maxLSN = e.CommitLSN
			s.maxTime = us
		}
		if err := b.Set(offsetKey(e.Offset), encodeStored(s), nil); err != nil {
			return fmt.Errorf("index: add offset %d: %w", e.Offset, err)
		}
		if err := b.Set(lsnKey(s.maxLSN, e.Offset), nil, nil); err != nil {
			return fmt.Errorf("index: add offset %d: %w", e.Offset, err)
		}
		if err := b.Set(timeKey(s.maxTime, e.Offset), nil, nil); err != nil {
			return fmt.Errorf("index: add offset %d: %w", e.Offset, err)
		}
		prev, havePrev = s, true
	}
	newLast := entries[len(entries)-1].Offset
	var lv [8]byte
	binary.BigEndian.PutUint64(lv[:], uint64(newLast))
	if err := b.Set(keyLast, lv[:], nil); err != nil {
		return fmt.Errorf("index: add: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("index: add offsets %d..%d: %w", entries[0].Offset, newLast, err)
	}
	ix.last.Store(uint64(newLast))
	return nil
}

// get reads the stored entry at off.
func (ix *Index) get(off pgq.Offset) (stored, error) {
	v, closer, err := ix.db.Get(offsetKey(off))
	if errors.Is(err, pebble.ErrNotFound) {
		return stored{}, fmt.Errorf("%w: offset %d", ErrNotFound, off)
	}
	if err != nil {
		return stored{}, fmt.Errorf("index: read offset %d: %w", off, err)
	}
	defer closer.Close()
	return decodeStored(off, v)
}

// firstAtOrAfter returns the first stored entry with offset >= off.
func (ix *Index) firstAtOrAfter(off pgq.Offset) (stored, error) {
	lo, hi := prefixBounds(prefixOffset)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return stored{}, fmt.Errorf("index: iterate offsets: %w", err)
	}
	defer it.Close()
	if !it.SeekGE(offsetKey(off)) {
		if err := it.Error(); err != nil {
			return stored{}, fmt.Errorf("index: iterate offsets: %w", err)
		}
		return stored{}, fmt.Errorf("%w: no offset at or after %d", ErrNotFound, off)
	}
	k := it.Key()
	if len(k) != 9 {
		return stored{}, fmt.Errorf("%w: offset key of %d bytes", ErrCorrupt, len(k))
	}
	o := pgq.Offset(binary.BigEndian.Uint64(k[1:]))
	v, err := it.ValueAndErr()
	if err != nil {
		return stored{}, fmt.Errorf("index: read offset %d: %w", o, err)
	}
	return decodeStored(o, v)
}

// EntryAt returns the entry at off, or an error wrapping ErrNotFound.
func (ix *Index) EntryAt(off pgq.Offset) (Entry, error) {
	if err := ix.enter(); err != nil {
		return Entry{}, err
	}
	defer ix.exit()
	s, err := ix.get(off)
	if err != nil {
		return Entry{}, err
	}
	return s.Entry, nil
}

// SeekLSN returns the first offset (in offset order) whose CommitLSN >= lsn.
// All parts of a multi-part transaction share one commit LSN; the first
// part is returned. When lsn lies before the first indexed entry the first
// indexed offset is returned; past the last, an error wrapping ErrNotFound.
func (ix *Index) SeekLSN(lsn pgq.LSN) (pgq.Offset, error) {
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	off, err := ix.seek(prefixLSN, lsnKey(lsn, 0))
	if err != nil {
		return 0, fmt.Errorf("index: seek LSN %s: %w", lsn, err)
	}
	return off, nil
}

// SeekTime returns the first offset (in offset order) whose CommitTime >= t,
// at microsecond precision. Commit times may repeat or, rarely, go
// backwards; the answer is still the first such offset in offset order,
// never a later offset with an earlier time (see the package doc). Past
// the last entry: an error wrapping ErrNotFound.
func (ix *Index) SeekTime(t time.Time) (pgq.Offset, error) {
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++ // round a sub-microsecond t up: stored times are whole µs
	}
	off, err := ix.seek(prefixTime, timeKey(us, 0))
	if err != nil {
		return 0, fmt.Errorf("index: seek time %s: %w", t.UTC().Format(time.RFC3339Nano), err)
	}
	return off, nil
}

// seek returns the offset of the first key >= from in the family p.
func (ix *Index) seek(p byte, from []byte) (pgq.Offset, error) {
	lo, hi := prefixBounds(p)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.SeekGE(from) {
		if err := it.Error(); err != nil {
			return 0, err
		}
		return 0, ErrNotFound
	}
	return offsetOfSeekKey(it.Key())
}

// BytesBetween returns the sum of Entry.Bytes over the offsets [from, to]:
// two point lookups of the running byte count. It returns 0 when from > to
// and an error wrapping ErrNotFound when from or to is not indexed.
func (ix *Index) BytesBetween(from, to pgq.Offset) (int64, error) {
	if from > to {
		return 0, nil
	}
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
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
	return ix.truncateFrontLocked(off)
}

func (ix *Index) truncateFrontLocked(off pgq.Offset) error {
	if off <= 1 {
		return nil
	}
	b := ix.db.NewBatch()
	defer b.Close()
	s, err := ix.firstAtOrAfter(off)
	switch {
	case err == nil:
		// Running maxima never decrease with the offset, so every "l"
		// and "t" key of an offset below s.Offset sorts before s's key.
		if err := b.DeleteRange(offsetKey(0), offsetKey(s.Offset), nil); err != nil {
			return fmt.Errorf("index: truncate front to %d: %w", off, err)
		}
		if err := b.DeleteRange([]byte{prefixLSN}, lsnKey(s.maxLSN, s.Offset), nil); err != nil {
			return fmt.Errorf("index: truncate front to %d: %w", off, err)
		}
		if err := b.DeleteRange([]byte{prefixTime}, timeKey(s.maxTime, s.Offset), nil); err != nil {
			return fmt.Errorf("index: truncate front to %d: %w", off, err)
		}
	case errors.Is(err, ErrNotFound):
		if err := deleteDerived(b); err != nil {
			return fmt.Errorf("index: truncate front to %d: %w", off, err)
		}
	default:
		return fmt.Errorf("index: truncate front to %d: %w", off, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("index: truncate front to %d: %w", off, err)
	}
	return nil
}

func deleteDerived(b *pebble.Batch) error {
	for _, p := range []byte{prefixOffset, prefixLSN, prefixTime} {
		lo, hi := prefixBounds(p)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
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
	return ix.resetLocked()
}

func (ix *Index) resetLocked() error {
	b := ix.db.NewBatch()
	defer b.Close()
	if err := deleteDerived(b); err != nil {
		return fmt.Errorf("index: reset: %w", err)
	}
	if err := b.Delete(keyLast, nil); err != nil {
		return fmt.Errorf("index: reset: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("index: reset: %w", err)
	}
	ix.last.Store(0)
	return nil
}

// PutGroup stores value under the group name, fsynced before it returns.
func (ix *Index) PutGroup(name string, value []byte) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	if err := ix.db.Set(groupKey(name), value, pebble.Sync); err != nil {
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

// DeleteGroup removes the group name, fsynced. Deleting a group that does
// not exist is not an error.
func (ix *Index) DeleteGroup(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	if err := ix.db.Delete(groupKey(name), pebble.Sync); err != nil {
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
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "source", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "source", "pebble")
}

// Fatalf is Pebble's report of a broken internal invariant; Pebble requires
// that it does not return, so after logging it defers to Pebble's own
// default logger, which exits the process.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "source", "pebble", "fatal", true)
	pebble.DefaultLogger.Fatalf(format, args...)
}
