package journal

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/vfsutil"
	"github.com/pgq-dev/pgq/internal/wal"
	"github.com/pgq-dev/pgq/record"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is zero.
const DefaultSegmentSize = 64 << 20

// LockFile is the name of the lock file inside the journal directory.
const LockFile = "LOCK"

// DefaultSlowSync is the fsync latency above which a warning is logged when
// Options.SlowSync is zero (etcd's threshold).
const DefaultSlowSync = time.Second

// Errors returned (wrapped) by the journal.
var (
	ErrLocked   = errors.New("journal: directory is locked by another journal")
	ErrNotFound = errors.New("journal: offset not in journal")
	ErrCorrupt  = errors.New("journal: corrupt")
	ErrClosed   = errors.New("journal: closed")
	// ErrFailed is returned, wrapped together with the first write or sync
	// error, by every Append and TruncateFront after that error (fail-stop,
	// see the package documentation). Close and Open the journal to
	// recover.
	ErrFailed = errors.New("journal: failed")
)

// Options configure Open.
type Options struct {
	// Dir is the journal directory (required). It is created if missing.
	Dir string
	// SegmentSize is the target size of a segment file; zero means 64 MiB.
	SegmentSize int
	// NoSync skips fsync. Only for tests and benchmarks: records are not
	// durable and must not be confirmed to PostgreSQL.
	NoSync bool
	// Logger receives repair, retention, failure and slow-fsync messages;
	// nil means slog.Default().
	Logger *slog.Logger
	// FS is the file system every file operation of the journal goes
	// through; nil means vfs.Default (the operating system's). It is
	// wrapped in vfsutil.OwnerOnly: the journal's directory is 0700 and
	// its files 0600, whatever the umask. Tests use it
	// to inject faults (vfs/errorfs) and simulate crashes.
	FS vfs.FS
	// OnSync, when set, is called with the latency of every fsync of
	// segment data or of the directory, failed or not (hook a histogram on
	// it). It runs on the writer's goroutine with the log locked: keep it
	// short.
	OnSync func(d time.Duration)
	// SlowSync is the fsync latency above which a warning is logged; zero
	// means DefaultSlowSync (1 s).
	SlowSync time.Duration
	// KeepSealedCached leaves a sealed segment's pages in the page
	// cache. By default (false) the journal advises the kernel to drop
	// them once the segment is sealed and fsynced (see the package
	// documentation, "Page cache"): readers of the live tail read it
	// from memory either way, and a segment's worth of freed pages
	// serves the next one.
	KeepSealedCached bool

	// noDurable skips the durable-point marker's update after each
	// batch: only for the benchmarks that measure its cost.
	noDurable bool
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.Dir == "" {
		return errors.New("journal: options: Dir is required")
	}
	if o.SegmentSize < 0 {
		return fmt.Errorf("journal: options: SegmentSize %d is negative", o.SegmentSize)
	}
	if o.SlowSync < 0 {
		return fmt.Errorf("journal: options: SlowSync %v is negative", o.SlowSync)
	}
	return nil
}

// Segment describes one segment file.
type Segment struct {
	FirstOffset pgq.Offset // offset of the first record in the file
	Path        string
	Bytes       int64
}

// Journal is an append-only sequence of transaction records, numbered by
// dense offsets starting at 1. See the package documentation for the
// concurrency rules.
type Journal struct {
	dir      string
	opts     Options
	log      *slog.Logger
	fs       vfs.FS
	lock     io.Closer
	slowSync time.Duration

	// appendMu serializes writers (Append, TruncateFront, Close) and guards
	// the writer state below it.
	appendMu sync.Mutex
	batch    wal.Batch
	// cbuf is CompactInPlace's head and AppendCompact's relation
	// scratch, reused.
	cbuf []byte

	// mark is the durable-point marker (DurableFile), written after each
	// batch's fsync; guarded by appendMu.
	mark *marker

	// cat is the relation catalog: its writer fields are guarded by
	// appendMu, its published relations are an atomic pointer readers
	// load without a lock.
	cat catalog

	// readMu serializes wal.Read calls: tidwall/wal reads mutate its
	// segment cache under a shared lock and race with each other (#34).
	readMu sync.Mutex
	// reads counts the records read (Reads).
	reads atomic.Uint64
	// written knows when the recent records were written and their
	// sizes (WrittenAt, StoredBytes).
	written *writtenTimes

	// w is safe for one writer plus readMu-serialized readers; wal's own
	// RWMutex orders writes against reads.
	w *wal.Log

	// scrub holds the first corruption seen and the scrub's progress
	// (scrub.go); its own mutex guards it.
	scrub scrubState

	// mu guards the published state below; it is held only briefly.
	mu         sync.Mutex
	closed     bool
	first      pgq.Offset // 0 when empty
	last       pgq.Offset // 0 when empty
	lastEndLSN pgq.LSN
	changed    chan struct{} // closed and replaced by each Append
	failed     error         // wraps ErrFailed and the first write/sync error; nil when healthy
}

// newJournal is a Journal over opts' directory with opts' defaults
// filled in, nothing opened yet.
func newJournal(opts Options) *Journal {
	j := &Journal{
		written:  newWrittenTimes(),
		dir:      opts.Dir,
		opts:     opts,
		log:      opts.Logger,
		fs:       opts.FS,
		slowSync: opts.SlowSync,
		changed:  make(chan struct{}),
	}
	if j.log == nil {
		j.log = slog.Default()
	}
	j.fs = vfsutil.OwnerOnly(j.fs) // nil: vfs.Default
	if j.slowSync == 0 {
		j.slowSync = DefaultSlowSync
	}
	return j
}

// Open opens (creating if needed) the journal in opts.Dir. It takes an
// exclusive lock on Dir/LOCK, cuts a torn tail off the last segment file
// (see the package documentation), opens the log and checks that the last
// record decodes.
func Open(opts Options) (*Journal, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	j := newJournal(opts)
	dir := j.dir
	if err := j.mkdirAll(); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	lk, err := j.fs.Lock(j.fs.PathJoin(dir, LockFile))
	if err != nil {
		if lockHeld(err) {
			return nil, fmt.Errorf("journal: open %s: %w (%v)", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("journal: open %s: lock: %w", dir, err)
	}
	j.lock = lk
	if err := j.open(); err != nil {
		_ = lk.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	return j, nil
}

// lockHeld reports whether err from vfs.FS.Lock means that another holder
// has the lock: fcntl's EAGAIN/EACCES from another process (or a MemFS), or
// pebble's refusal of a second lock within this process.
func lockHeld(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

func (j *Journal) open() error {
	dp, known, err := readDurable(j.fs, j.dir)
	if err != nil {
		return err
	}
	if err := j.repairTail(dp, known); err != nil {
		return err
	}
	if err := j.openCatalog(); err != nil {
		return err
	}
	w, err := wal.Open(j.dir, &wal.Options{
		FS:               j.fs,
		NoSync:           j.opts.NoSync,
		SegmentSize:      j.opts.SegmentSize,
		SegmentCacheSize: 1,
		AllowEmpty:       true,
		DirPerms:         vfsutil.DirMode,
		OnSync:           j.onSync,
		OnSeal:           j.onSeal,
		DropSealed:       !j.opts.KeepSealedCached,
	})
	if err != nil {
		_ = j.cat.close()
		if errors.Is(err, wal.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return err
	}
	j.w = w
	j.mark, err = openMarker(j.fs, j.dir, j.opts.NoSync, j.onSync, j.syncDir)
	if err != nil {
		_ = w.Close()
		_ = j.cat.close()
		return err
	}
	first, err := w.FirstIndex()
	if err == nil {
		var last uint64
		last, err = w.LastIndex()
		if err == nil && last >= first && last > 0 {
			j.first, j.last = pgq.Offset(first), pgq.Offset(last)
		}
	}
	if err == nil && j.last > 0 {
		var tx *pgq.Transaction
		tx, err = j.Read(j.last)
		if err == nil {
			tx, err = j.cutUnfinished(tx)
		}
		if err == nil && tx != nil {
			j.lastEndLSN = tx.EndLSN
		}
	}
	if err == nil {
		err = j.settleDurable()
	}
	if err != nil {
		_ = w.Close()
		_ = j.cat.close()
		_ = j.mark.close()
		return err
	}
	return nil
}

// onSync observes one fsync: the OnSync hook and the slow-fsync warning.
func (j *Journal) onSync(path string, d time.Duration) {
	if j.opts.OnSync != nil {
		j.opts.OnSync(d)
	}
	if d > j.slowSync {
		j.log.Warn("journal: slow fsync", "path", path, "took", d, "threshold", j.slowSync)
	}
}

// fail makes the journal fail-stop on cause, the first write or sync error
// (later ones keep the first), and returns the error every writer gets
// from now on: it wraps ErrFailed and the first cause.
func (j *Journal) fail(cause error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed == nil {
		j.failed = fmt.Errorf("%w: %w", ErrFailed, cause)
		j.log.Error("journal: failed; it accepts no more writes until reopened", "dir", j.dir, "err", cause.Error())
	}
	return j.failed
}

// Err returns nil while the journal is healthy and, after the first failed
// write or sync, an error wrapping ErrFailed and that failure (see the
// package documentation: fail-stop). Reopening the journal recovers.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// Dir returns the journal directory.
func (j *Journal) Dir() string { return j.dir }

// Append writes txs as consecutive records (see AppendRecords) and sets
// tx.Offset on each.
func (j *Journal) Append(txs []*pgq.Transaction) error {
	if len(txs) == 0 {
		return nil
	}
	return j.AppendRecords(Records(txs))
}

// AppendRecords writes batch as consecutive records with one write and one
// fsync (group commit) and sets Tx.Offset and Bytes on each. A record with
// Encoded set is written as is. When a segment file was created, the
// directory is fsynced too before it returns. Appends are for the single
// writer: concurrent calls are serialized. A write or sync error fails the
// journal: that call and every later one return an error wrapping
// ErrFailed and the cause, and nothing of the batch is published (see the
// package documentation).
func (j *Journal) AppendRecords(batch []*Record) error {
	p, err := j.appendRecords(batch)
	if err != nil || len(batch) == 0 {
		return err
	}
	return j.markDurable(p)
}

// appendRecords is AppendRecords but for the durable-point marker: it
// returns the point to mark (markDurable) before the batch is confirmed.
func (j *Journal) appendRecords(batch []*Record) (durablePoint, error) {
	if len(batch) == 0 {
		return durablePoint{}, nil
	}
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.mu.Lock()
	closed, last, failed := j.closed, j.last, j.failed
	j.mu.Unlock()
	if closed {
		return durablePoint{}, fmt.Errorf("journal: append: %w", ErrClosed)
	}
	if failed != nil {
		return durablePoint{}, failed
	}
	if last == 0 {
		// Empty journal: the next index follows whatever was truncated.
		li, err := j.w.LastIndex()
		if err != nil {
			return durablePoint{}, fmt.Errorf("journal: append: %w", err)
		}
		last = pgq.Offset(li)
	}
	j.batch.Clear()
	for i, r := range batch {
		index := uint64(last) + uint64(i) + 1
		if r.Encoded != nil {
			// The record's own buffer (a spilled chunk, up to
			// MaxRecordBytes): compacted where it is and written from
			// there, not copied twice.
			if c, scratch, err := record.CompactInPlace(r.Encoded, j.cbuf, j.cat.intern); err == nil {
				r.Encoded, j.cbuf = c, scratch
			}
			r.Bytes = len(r.Encoded)
			j.batch.WriteRef(index, r.Encoded)
			continue
		}
		// Stored compact (relations by catalog id), encoded once right
		// into the batch; a record AppendCompact refuses is stored in
		// its Version 1 form.
		tail := j.batch.Tail()
		data, scratch, err := record.AppendCompact(tail, r.Tx, j.cbuf, j.cat.intern)
		j.cbuf = scratch
		if err != nil {
			data = record.Append(tail, r.Tx)
		}
		r.Bytes = len(data) - len(tail)
		j.batch.WriteTail(index, data)
	}
	if cap(j.cbuf) > 4<<20 {
		j.cbuf = nil
	}
	// The relations the batch introduced are durable before any record
	// that refers to them.
	if err := j.writePending(); err != nil {
		j.cat.dropPending()
		j.batch.Clear()
		return durablePoint{}, j.fail(fmt.Errorf("append %d records at offset %d: %w", len(batch), last+1, err))
	}
	if err := j.w.WriteBatch(&j.batch); err != nil {
		j.batch.Clear()
		return durablePoint{}, j.fail(fmt.Errorf("append %d records at offset %d: %w", len(batch), last+1, err))
	}
	p := j.tailPoint(last + pgq.Offset(len(batch)))
	for i, r := range batch {
		r.Tx.Offset = last + pgq.Offset(i) + 1
	}
	j.written.note(batch) // before it is published
	j.mu.Lock()
	if j.first == 0 {
		j.first = last + 1
	}
	j.last = last + pgq.Offset(len(batch))
	if end := lastFinalEndLSN(batch); end != 0 {
		j.lastEndLSN = end
	}
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
	return p, nil
}

// FirstOffset returns the offset of the first record, 0 when empty.
func (j *Journal) FirstOffset() pgq.Offset {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.first
}

// LastOffset returns the offset of the last record, 0 when empty.
func (j *Journal) LastOffset() pgq.Offset {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// LastEndLSN returns the EndLSN of the last final record (the last
// transaction journaled completely), 0 when there is none.
func (j *Journal) LastEndLSN() pgq.LSN {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastEndLSN
}

// Changed returns a channel that is closed by the next successful Append
// (or by Close). A long-poll reader takes the channel, checks LastOffset,
// then waits on it.
func (j *Journal) Changed() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}

// ReadRaw returns the framed record at off as record.Append frames it
// (Version 1, expanded from the stored compact form), in a buffer of its
// own.
func (j *Journal) ReadRaw(off pgq.Offset) ([]byte, error) {
	data, _, err := j.readExpanded(off)
	return data, err
}

// readExpanded returns the record at off (expanded) and its stored size.
func (j *Journal) readExpanded(off pgq.Offset) ([]byte, int, error) {
	data, err := j.readStored(off)
	if err != nil {
		return nil, 0, err
	}
	n := len(data)
	if n > 0 && data[0] == record.VersionCompact {
		data, err = record.Expand(nil, data, j.cat.lookup)
	} else {
		err = record.Check(data) // Expand checks a compact record's CRC
	}
	if err != nil {
		return nil, 0, fmt.Errorf("journal: read %d: %w", off, j.corruptRead(off, err))
	}
	return data, n, nil
}

// Reads is the number of records read from the journal since Open
// (every call of Read, ReadSized, ReadRaw and ReadInfo that reaches the
// log, failed ones included; an offset outside the journal is refused
// before and not counted). The reads of one record contend on one
// mutex (tidwall/wal#34), so this is what readers cost the journal: it
// shows whether a reader passes over records without reading them.
func (j *Journal) Reads() uint64 { return j.reads.Load() }

// readStored returns a copy of the record at off as stored.
func (j *Journal) readStored(off pgq.Offset) ([]byte, error) {
	j.mu.Lock()
	closed, first, last := j.closed, j.first, j.last
	j.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("journal: read %d: %w", off, ErrClosed)
	}
	if off == 0 || off < first || off > last {
		return nil, fmt.Errorf("journal: read %d (have %d..%d): %w", off, first, last, ErrNotFound)
	}
	j.reads.Add(1)
	j.readMu.Lock()
	data, err := j.w.Read(uint64(off))
	j.readMu.Unlock()
	if err != nil {
		switch {
		case errors.Is(err, wal.ErrNotFound):
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		case errors.Is(err, wal.ErrClosed):
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		case errors.Is(err, wal.ErrCorrupt):
			err = j.corruptRead(off, err)
		}
		return nil, fmt.Errorf("journal: read %d: %w", off, err)
	}
	return data, nil
}

// ReadInfo returns the header of the record at off (record.PeekStored)
// and its stored size, checked but neither expanded nor decoded: for a
// reader that passes over a record and needs only whether it ends its
// transaction.
func (j *Journal) ReadInfo(off pgq.Offset) (record.Info, int, error) {
	data, err := j.readStored(off)
	if err != nil {
		return record.Info{}, 0, err
	}
	ri, err := record.PeekStored(data)
	if err != nil {
		return record.Info{}, 0, fmt.Errorf("journal: read %d: %w", off, j.corruptRead(off, err))
	}
	return ri, len(data), nil
}

// Read decodes the record at off and sets its Offset.
func (j *Journal) Read(off pgq.Offset) (*pgq.Transaction, error) {
	tx, _, err := j.ReadSized(off)
	return tx, err
}

// ReadSized is Read that also returns the record's encoded size (what
// Append reported as Record.Bytes).
func (j *Journal) ReadSized(off pgq.Offset) (*pgq.Transaction, int, error) {
	data, size, err := j.readExpanded(off)
	if err != nil {
		return nil, 0, err
	}
	// data is this call's own buffer: decode it in place.
	tx := new(pgq.Transaction)
	err = record.Check(data)
	if err == nil {
		err = record.DecodeBody(data[record.HeaderSize:], tx)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("journal: read %d: %w", off, j.corruptRead(off, err))
	}
	tx.Offset = off
	return tx, size, nil
}

// TruncateFront drops the records below off (retention). It never drops the
// last record, so that LastEndLSN survives a restart: off is capped at
// LastOffset. It never starts the journal inside a multi-part transaction:
// when off holds a part after the first, the cut moves back to its part 0.
// Offsets at or below FirstOffset are a no-op. tidwall/wal
// rewrites the rest of the segment holding off, so call it with offsets
// near segment starts (see Segments). A write or sync error fails the
// journal, as in Append.
func (j *Journal) TruncateFront(off pgq.Offset) error {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.mu.Lock()
	closed, first, last, failed := j.closed, j.first, j.last, j.failed
	j.mu.Unlock()
	if closed {
		return fmt.Errorf("journal: truncate front: %w", ErrClosed)
	}
	if failed != nil {
		return failed
	}
	off = min(off, last)
	if off <= first {
		return nil
	}
	tx, err := j.Read(off)
	if err != nil {
		return fmt.Errorf("journal: truncate front to %d: %w", off, err)
	}
	// Parts are consecutive records: part 0 is tx.Part records back.
	off -= pgq.Offset(tx.Part)
	if off <= first {
		return nil
	}
	// Reads are excluded too: wal's truncate rewrites its segment cache.
	// wal's truncate fsyncs the new first segment and the directory.
	j.readMu.Lock()
	err = j.w.TruncateFront(uint64(off))
	j.readMu.Unlock()
	if err != nil {
		return j.fail(fmt.Errorf("truncate front to %d: %w", off, err))
	}
	j.mu.Lock()
	j.first = off
	j.mu.Unlock()
	attrs := []any{"dir", j.dir, "dropped", int64(off - first), "first", off, "last", last}
	if segs, err := listSegments(j.fs, j.dir); err == nil && len(segs) > 0 {
		attrs = append(attrs, "tail_bytes", segs[len(segs)-1].Bytes)
	}
	j.log.Info("journal: truncated front", attrs...)
	return nil
}

// Segments lists the segment files, oldest first.
func (j *Journal) Segments() ([]Segment, error) {
	j.appendMu.Lock() // no truncate renaming files underneath
	defer j.appendMu.Unlock()
	segs, err := listSegments(j.fs, j.dir)
	if err != nil {
		return nil, fmt.Errorf("journal: segments of %s: %w", j.dir, err)
	}
	return segs, nil
}

// Size returns the bytes of all segment files.
func (j *Journal) Size() int64 {
	segs, err := j.Segments()
	if err != nil {
		return 0
	}
	var n int64
	for _, s := range segs {
		n += s.Bytes
	}
	return n
}

// Close closes the log and releases the directory lock. Later calls
// return ErrClosed. Close of a failed journal closes the files without
// another fsync; Open again to recover.
func (j *Journal) Close() error {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return fmt.Errorf("journal: close %s: %w", j.dir, ErrClosed)
	}
	j.closed = true
	close(j.changed) // wake long-poll readers; they will see ErrClosed
	j.mu.Unlock()
	j.readMu.Lock()
	err := j.w.Close()
	j.readMu.Unlock()
	if cerr := j.cat.close(); err == nil {
		err = cerr
	}
	if merr := j.mark.close(); err == nil {
		err = merr
	}
	if uerr := j.lock.Close(); err == nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("journal: close %s: %w", j.dir, err)
	}
	return nil
}

// Reader reads records in order from one position. It does not block: Next
// returns io.EOF at the end; wait on Journal.Changed and call Next again.
// A Reader is not safe for concurrent use.
type Reader struct {
	j   *Journal
	off pgq.Offset
}

// NewReader returns a reader whose first record is from; 0 means the first
// record in the journal.
func (j *Journal) NewReader(from pgq.Offset) *Reader {
	return &Reader{j: j, off: from}
}

// Offset returns the offset Next will read.
func (r *Reader) Offset() pgq.Offset {
	if r.off == 0 {
		if f := r.j.FirstOffset(); f > 0 {
			return f
		}
		return r.j.LastOffset() + 1
	}
	return r.off
}

// Next returns the next record, io.EOF when the reader is past the last
// record, or an error wrapping ErrNotFound when its offset was truncated
// away.
func (r *Reader) Next() (*pgq.Transaction, error) {
	off := r.Offset()
	if off > r.j.LastOffset() {
		r.off = off
		return nil, io.EOF
	}
	tx, err := r.j.Read(off)
	if err != nil {
		return nil, err
	}
	r.off = off + 1
	return tx, nil
}

// listSegments lists the final segment files (20-digit names) of dir.
func listSegments(fs vfs.FS, dir string) ([]Segment, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var segs []Segment
	for _, name := range names {
		idx, ok := segmentIndex(name)
		if !ok {
			continue
		}
		path := fs.PathJoin(dir, name)
		info, err := fs.Stat(path)
		if err != nil {
			return nil, err
		}
		if info.IsDir() {
			continue
		}
		segs = append(segs, Segment{FirstOffset: pgq.Offset(idx), Path: path, Bytes: info.Size()})
	}
	slices.SortFunc(segs, func(a, b Segment) int {
		return cmp.Compare(a.FirstOffset, b.FirstOffset)
	})
	return segs, nil
}

// segmentIndex parses a 20-digit segment file name.
func segmentIndex(name string) (uint64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		nv := v*10 + uint64(c-'0')
		if nv < v {
			return 0, false
		}
		v = nv
	}
	return v, v > 0
}

// mkdirAll creates the journal directory and any missing parents, and
// fsyncs the parent of each directory it created, so that a new journal
// directory survives a crash with the first records in it.
func (j *Journal) mkdirAll() error {
	var created []string
	for d := j.dir; ; {
		if _, err := j.fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		parent := j.fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := j.fs.MkdirAll(j.dir, vfsutil.DirMode); err != nil {
		return err
	}
	for _, d := range created {
		if parent := j.fs.PathDir(d); parent != d {
			if err := j.syncPath(parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncDir fsyncs the journal directory (unless NoSync).
func (j *Journal) syncDir() error { return j.syncPath(j.dir) }

// syncPath fsyncs the directory dir (unless NoSync).
func (j *Journal) syncPath(dir string) error {
	if j.opts.NoSync {
		return nil
	}
	return vfsutil.SyncDir(j.fs, dir, j.onSync)
}

// readFile returns the contents of the file at path.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data, err
}
