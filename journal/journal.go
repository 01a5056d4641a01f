package journal

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gofrs/flock"
	"github.com/pgq-dev/pgq"
	"github.com/tidwall/wal"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is zero.
const DefaultSegmentSize = 64 << 20

// LockFile is the name of the lock file inside the journal directory.
const LockFile = "LOCK"

// Errors returned (wrapped) by the journal.
var (
	ErrLocked   = errors.New("journal: directory is locked by another journal")
	ErrNotFound = errors.New("journal: offset not in journal")
	ErrCorrupt  = errors.New("journal: corrupt")
	ErrClosed   = errors.New("journal: closed")
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
	// Logger receives repair and retention messages; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.Dir == "" {
		return errors.New("journal: options: Dir is required")
	}
	if o.SegmentSize < 0 {
		return fmt.Errorf("journal: options: SegmentSize %d is negative", o.SegmentSize)
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
	dir    string
	opts   Options
	log    *slog.Logger
	lock   *flock.Flock
	segMax int

	// appendMu serializes writers (Append, TruncateFront, Close) and guards
	// the writer state below it.
	appendMu sync.Mutex
	batch    wal.Batch
	buf      []byte // encode buffer, reused
	tailSize int    // bytes in the tail segment file, mirrors wal's cycling rule

	// readMu serializes wal.Read calls: tidwall/wal reads mutate its
	// segment cache under a shared lock and race with each other (#34).
	readMu sync.Mutex

	// w is safe for one writer plus readMu-serialized readers; wal's own
	// RWMutex orders writes against reads.
	w *wal.Log

	// mu guards the published state below; it is held only briefly.
	mu         sync.Mutex
	closed     bool
	first      pgq.Offset // 0 when empty
	last       pgq.Offset // 0 when empty
	lastEndLSN pgq.LSN
	changed    chan struct{} // closed and replaced by each Append
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
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	dir := opts.Dir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	lk := flock.New(filepath.Join(dir, LockFile))
	ok, err := lk.TryLock()
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: lock: %w", dir, err)
	}
	if !ok {
		return nil, fmt.Errorf("journal: open %s: %w", dir, ErrLocked)
	}
	j, err := open(dir, opts, logger, lk)
	if err != nil {
		_ = lk.Unlock()
		return nil, err
	}
	return j, nil
}

func open(dir string, opts Options, logger *slog.Logger, lk *flock.Flock) (*Journal, error) {
	tailSize, err := repairTail(dir, logger)
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	w, err := wal.Open(dir, &wal.Options{
		NoSync:           opts.NoSync,
		SegmentSize:      opts.SegmentSize,
		SegmentCacheSize: 1,
		AllowEmpty:       true,
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	j := &Journal{
		dir:      dir,
		opts:     opts,
		log:      logger,
		lock:     lk,
		segMax:   opts.SegmentSize,
		w:        w,
		tailSize: tailSize,
		changed:  make(chan struct{}),
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
		// wal.Open may have created the first segment file.
		err = syncDir(dir)
	}
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	return j, nil
}

// Dir returns the journal directory.
func (j *Journal) Dir() string { return j.dir }

// Append writes batch as consecutive records with one write and one fsync
// (group commit) and sets tx.Offset and tx.RecordBytes on each. A
// transaction with Encoded set is written as that record, as is. It fsyncs the directory when
// a segment file was created. Append is for the single writer: concurrent
// calls are serialized.
func (j *Journal) Append(batch []*pgq.Transaction) error {
	if len(batch) == 0 {
		return nil
	}
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.mu.Lock()
	closed, last := j.closed, j.last
	j.mu.Unlock()
	if closed {
		return fmt.Errorf("journal: append: %w", ErrClosed)
	}
	if last == 0 {
		// Empty journal: the next index follows whatever was truncated.
		li, err := j.w.LastIndex()
		if err != nil {
			return fmt.Errorf("journal: append: %w", err)
		}
		last = pgq.Offset(li)
	}
	j.batch.Clear()
	newSegment := false
	// Mirror wal.writeBatch: cycle before the batch when the tail is over
	// the limit, and after any entry that brings it to the limit.
	if j.tailSize > j.segMax {
		newSegment = true
		j.tailSize = 0
	}
	for i, tx := range batch {
		data := tx.Encoded
		if data == nil {
			j.buf = pgq.AppendRecord(j.buf[:0], tx)
			data = j.buf
		}
		tx.RecordBytes = len(data)
		j.batch.Write(uint64(last)+uint64(i)+1, data)
		j.tailSize += uvarintLen(uint64(len(data))) + len(data)
		if j.tailSize >= j.segMax {
			newSegment = true
			j.tailSize = 0
		}
	}
	if err := j.w.WriteBatch(&j.batch); err != nil {
		j.batch.Clear()
		return fmt.Errorf("journal: append %d records at offset %d: %w", len(batch), last+1, err)
	}
	if newSegment && !j.opts.NoSync {
		if err := syncDir(j.dir); err != nil {
			return fmt.Errorf("journal: append: %w", err)
		}
	}
	if cap(j.buf) > 4<<20 {
		j.buf = nil // don't pin one huge record's buffer
	}
	for i, tx := range batch {
		tx.Offset = last + pgq.Offset(i) + 1
	}
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
	return nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
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

// ReadRaw returns a copy of the framed record at off.
func (j *Journal) ReadRaw(off pgq.Offset) ([]byte, error) {
	j.mu.Lock()
	closed, first, last := j.closed, j.first, j.last
	j.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("journal: read %d: %w", off, ErrClosed)
	}
	if off == 0 || off < first || off > last {
		return nil, fmt.Errorf("journal: read %d (have %d..%d): %w", off, first, last, ErrNotFound)
	}
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
			err = &CorruptError{Offset: off, Err: err}
		}
		return nil, fmt.Errorf("journal: read %d: %w", off, err)
	}
	return data, nil
}

// Read decodes the record at off and sets its Offset and RecordBytes.
func (j *Journal) Read(off pgq.Offset) (*pgq.Transaction, error) {
	data, err := j.ReadRaw(off)
	if err != nil {
		return nil, err
	}
	tx := new(pgq.Transaction)
	if err := pgq.DecodeRecord(data, tx); err != nil {
		return nil, fmt.Errorf("journal: read %d: %w", off, &CorruptError{Offset: off, Err: err})
	}
	tx.Offset, tx.RecordBytes = off, len(data)
	return tx, nil
}

// TruncateFront drops the records below off (retention). It never drops the
// last record, so that LastEndLSN survives a restart: off is capped at
// LastOffset. It never starts the journal inside a multi-part transaction:
// when off holds a part after the first, the cut moves back to its part 0.
// Offsets at or below FirstOffset are a no-op. tidwall/wal
// rewrites the rest of the segment holding off, so call it with offsets
// near segment starts (see Segments).
func (j *Journal) TruncateFront(off pgq.Offset) error {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.mu.Lock()
	closed, first, last := j.closed, j.first, j.last
	j.mu.Unlock()
	if closed {
		return fmt.Errorf("journal: truncate front: %w", ErrClosed)
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
	j.readMu.Lock()
	err = j.w.TruncateFront(uint64(off))
	j.readMu.Unlock()
	if err != nil {
		return fmt.Errorf("journal: truncate front to %d: %w", off, err)
	}
	if err := syncDir(j.dir); err != nil {
		return fmt.Errorf("journal: truncate front to %d: %w", off, err)
	}
	if _, last, size, err := j.tailState(); err == nil {
		j.log.Info("journal: truncated front", "dir", j.dir, "dropped", int64(off-first), "first", off, "last", last, "tail_bytes", size)
	}
	j.mu.Lock()
	j.first = off
	j.mu.Unlock()
	return nil
}

// tailState re-reads the segment list; used after TruncateFront, which may
// have rewritten the tail segment.
func (j *Journal) tailState() (first, last pgq.Offset, tail int64, err error) {
	segs, err := listSegments(j.dir)
	if err != nil || len(segs) == 0 {
		return 0, 0, 0, err
	}
	j.mu.Lock()
	first, last = j.first, j.last
	j.mu.Unlock()
	t := segs[len(segs)-1]
	j.tailSize = int(t.Bytes)
	return first, last, t.Bytes, nil
}

// Segments lists the segment files, oldest first.
func (j *Journal) Segments() ([]Segment, error) {
	j.appendMu.Lock() // no truncate renaming files underneath
	defer j.appendMu.Unlock()
	segs, err := listSegments(j.dir)
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
// return ErrClosed.
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
	if uerr := j.lock.Unlock(); err == nil {
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
func listSegments(dir string) ([]Segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []Segment
	for _, e := range ents {
		idx, ok := segmentIndex(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		segs = append(segs, Segment{FirstOffset: pgq.Offset(idx), Path: filepath.Join(dir, e.Name()), Bytes: info.Size()})
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
