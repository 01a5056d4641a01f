// Copyright (c) 2019 Joshua J Baker. MIT licence, see LICENSE.
// Forked from github.com/tidwall/wal v1.2.1; see doc.go for the changes.

package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/tinylru"

	"github.com/pgq-dev/pgq/internal/vfsutil"
)

var (
	// ErrCorrupt is returned when the log is corrupt.
	ErrCorrupt = errors.New("log corrupt")

	// ErrClosed is returned when an operation cannot be completed because
	// the log is closed.
	ErrClosed = errors.New("log closed")

	// ErrNotFound is returned when an entry is not found.
	ErrNotFound = errors.New("not found")

	// ErrOutOfOrder is returned from Write() when the index is not equal to
	// LastIndex()+1. It's required that log monotonically grows by one and has
	// no gaps. Thus, the series 10,11,12,13,14 is valid, but 10,11,13,14 is
	// not because there's a gap between 11 and 13. Also, 10,12,11,13 is not
	// valid because 12 and 11 are out of order.
	ErrOutOfOrder = errors.New("out of order")

	// ErrOutOfRange is returned from TruncateFront() and TruncateBack() when
	// the index not in the range of the log's first and last index. Or, this
	// may be returned when the caller is attempting to remove *all* entries;
	// The log requires that at least one entry exists following a truncate.
	ErrOutOfRange = errors.New("out of range")

	// ErrEmptyLog is returned by Open() when the `AllowEmpty` option was not
	// provided and log has been emptied due to the use of TruncateFront() or
	// TruncateBack().
	ErrEmptyLog = errors.New("empty log")

	// ErrFailed is returned (wrapped together with the first failure) by
	// every write after a write, fsync or segment cycle failed. Close and
	// Open the log again to recover.
	ErrFailed = errors.New("log failed")
)

// Options for Log
type Options struct {
	// FS is the file system every file operation goes through. Default
	// vfs.Default (the operating system's).
	FS vfs.FS
	// NoSync disables fsync after writes (and of the directory). This is
	// less durable and puts the log at risk of data loss when there's a
	// server crash.
	NoSync bool
	// SegmentSize of each segment. This is just a target value, actual size
	// may differ. Default 20 MB
	SegmentSize int
	// SegmentCacheSize is the maximum number of segments that will be held in
	// memory for caching. Increasing this value may enhance performance for
	// concurrent read operations. Default 1
	SegmentCacheSize int
	// AllowEmpty allows for a log to have all entries removed through the use
	// of TruncateFront() or TruncateBack(). Otherwise without this option,
	// at least one entry must always remain following a truncate operation.
	// Default false
	//
	// Warning: using this option changes the behavior of the log in the
	// following ways:
	// - An empty log will always have the FirstIndex() be equal to
	//   LastIndex()+1.
	// - For a newly created log that has no entries, FirstIndex() and
	//   LastIndex() return 1 and 0, respectively.
	//   Without AllowEmpty, both return 0.
	AllowEmpty bool
	// DirPerms are the permission bits asked for a created log directory.
	// Open wraps FS in vfsutil.OwnerOnly, which makes every directory it
	// creates vfsutil.DirMode (0700) and every file 0600 whatever is asked
	// and whatever the umask, so only 0700 has an effect.
	DirPerms os.FileMode
	// OnSync, when set, is called after every fsync, of a segment file or
	// of the directory (path names which), with its latency, whether it
	// failed or not. It runs with the log locked (for the fsync of a
	// write, only against other writers): keep it short.
	OnSync func(path string, d time.Duration)
	// OnSeal, when set, is called once a segment is sealed by a cycle:
	// after its file was fsynced and closed, before the next segment file
	// is created (so the directory fsync that follows covers what OnSeal
	// creates), with the segment's path, its file's length and the
	// CRC32C (Castagnoli) of its file's bytes, kept as they were written
	// (the segment's big entries are not in memory to sum at the seal).
	// It runs with the log locked. An error fails the log like a failed
	// fsync.
	OnSeal func(path string, size int64, crc uint32) error
	// DropSealed advises the kernel to drop a segment's pages from the
	// page cache once the cycle that seals it has fsynced it
	// (vfsutil.DropCache), so that the pages the next segments take are
	// ones just freed rather than fresh memory. A read of a sealed
	// segment then reads its file from disk, not from the cache. Failed
	// advice is ignored: nothing is lost without it.
	DropSealed bool
}

// DefaultOptions for Open().
var DefaultOptions = &Options{
	NoSync:           false,    // Fsync after every write
	SegmentSize:      20971520, // 20 MB log segment files
	SegmentCacheSize: 2,        // Number of cached in-memory segments
	AllowEmpty:       false,    // Do not allow empty log. 1+ entries required
	DirPerms:         0700,     // Permissions for the created directories
}

// Log represents a write ahead log
type Log struct {
	// wmu serializes the calls that change the log (Write, WriteBatch,
	// TruncateFront, TruncateBack, Sync, Close) and is taken before mu.
	// WriteBatch and Write hold only wmu during their final fsync, so
	// reads go on meanwhile.
	wmu sync.Mutex
	// mu guards the fields below: readers take it shared, changes
	// exclusively.
	mu         sync.RWMutex
	cmu        sync.Mutex  // serializes readers loading sealed segments (tidwall/wal#34)
	fs         vfs.FS      // every file operation goes through it
	path       string      // log directory
	opts       Options     // log options
	closed     bool        // log is closed
	corrupt    bool        // log may be corrupt
	failed     error       // first write/sync failure; writes are refused after it
	segments   []*segment  // all known log segments
	firstIndex uint64      // index of the first entry in log
	lastIndex  uint64      // index of the last entry in log
	sfile      vfs.File    // tail segment file handle, nil once closed
	wbatch     Batch       // reusable write batch
	scache     tinylru.LRU // segment entries cache
	// free holds the blocks of segments evicted from scache, for the
	// next tail segment (added with mu exclusive, or shared with cmu;
	// taken with mu exclusive).
	free [][]byte
	// bigEntry is the size from which a written entry is kept only in
	// the file (the constant bigEntry; tests change it).
	bigEntry int
	// hmu guards every segment's rf (tail.go's reader): tail readers,
	// which share mu, open it concurrently.
	hmu sync.Mutex
}

// segment represents a single segment file.
type segment struct {
	path  string // path of segment file
	index uint64 // first index of segment
	// ebuf holds the entries read from the file (a sealed segment loaded
	// by a read, or the tail as Open or a truncation found it), blocks
	// what was written to it since, in tailBlock-sized blocks (tail.go),
	// but the entries written of bigEntry bytes or more: gaps lists
	// those, which only the file holds. ebuf, then blocks, is the
	// segment's memory; without gaps, the file's bytes.
	ebuf   []byte
	blocks [][]byte
	gaps   []gap
	epos   []bpos // entries' positions in the file
	// crc is the CRC32C of the file's bytes written so far, once summed
	// (sum, tail.go): what OnSeal receives.
	crc    uint32
	summed bool
	// rf reads the file's gaps: opened by the first read of one (reader,
	// tail.go), closed when the gaps go (eviction, truncation, Close).
	// Guarded by Log.hmu.
	rf vfs.File
}

type bpos struct {
	pos int // byte position in the file
	end int // one byte past pos
}

const writeCategory = vfs.WriteCategoryUnspecified

// Open a new write ahead log
func Open(path string, opts *Options) (*Log, error) {
	if opts == nil {
		opts = DefaultOptions
	}
	o := *opts
	if o.SegmentCacheSize <= 0 {
		o.SegmentCacheSize = DefaultOptions.SegmentCacheSize
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultOptions.SegmentSize
	}
	if o.DirPerms == 0 {
		o.DirPerms = DefaultOptions.DirPerms
	}
	o.FS = vfsutil.OwnerOnly(o.FS) // nil: vfs.Default
	if path == "" {
		return nil, errors.New("wal: empty path")
	}
	l := &Log{path: path, opts: o, fs: o.FS, bigEntry: bigEntry}
	l.scache.Resize(l.opts.SegmentCacheSize)
	if err := l.fs.MkdirAll(path, l.opts.DirPerms); err != nil {
		return nil, err
	}
	if err := l.load(); err != nil {
		if l.sfile != nil {
			_ = l.sfile.Close()
			l.sfile = nil
		}
		return nil, err
	}
	return l, nil
}

func (l *Log) join(name string) string { return l.fs.PathJoin(l.path, name) }

func (l *Log) pushCache(segIdx int) {
	_, _, _, v, evicted :=
		l.scache.SetEvicted(segIdx, l.segments[segIdx])
	if evicted {
		s := v.(*segment)
		l.recycle(s.blocks)
		l.closeReader(s)
		s.ebuf, s.blocks, s.gaps, s.epos = nil, nil, nil, nil
	}
}

// syncFile fsyncs f and reports the latency to OnSync.
func (l *Log) syncFile(f vfs.File, path string) error {
	start := time.Now()
	err := f.Sync()
	if l.opts.OnSync != nil {
		l.opts.OnSync(path, time.Since(start))
	}
	return err
}

// syncDir fsyncs the log directory, unless NoSync.
func (l *Log) syncDir() error {
	if l.opts.NoSync {
		return nil
	}
	return vfsutil.SyncDir(l.fs, l.path, l.opts.OnSync)
}

// fail records the first write failure and returns err wrapped in
// ErrFailed.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
	}
	return fmt.Errorf("%w: %w", ErrFailed, err)
}

// writable reports why the log refuses writes, nil when it accepts them.
func (l *Log) writable() error {
	switch {
	case l.corrupt:
		return ErrCorrupt
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	return nil
}

// readFile returns the contents of the file at path.
func (l *Log) readFile(path string) ([]byte, error) {
	f, err := l.fs.Open(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data, err
}

// openTail opens the segment file at path for appending and returns its
// contents: reading it to the end leaves the file offset there, so the
// next Write appends (vfs.File has no Seek).
func (l *Log) openTail(path string) ([]byte, error) {
	f, err := l.fs.OpenReadWrite(path, writeCategory)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	l.sfile = f
	return data, nil
}

// load all the segments. This operation also cleans up any START/END
// segments, which a TruncateFront or TruncateBack that did not finish
// leaves behind.
func (l *Log) load() error {
	startIdx, endIdx, err := l.listSegments()
	if err != nil {
		return err
	}
	if len(l.segments) == 0 {
		return l.create()
	}
	// Open existing log. Clean up log if START or END segments exist.
	if startIdx != -1 && endIdx != -1 {
		// There should not be a START and END at the same time
		return ErrCorrupt
	}
	if startIdx != -1 {
		if err := l.finishTruncateFront(startIdx); err != nil {
			return err
		}
	}
	if endIdx != -1 {
		if err := l.finishTruncateBack(endIdx); err != nil {
			return err
		}
	}
	if startIdx != -1 || endIdx != -1 {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	return l.openLast()
}

// listSegments appends the segment files of the log directory to
// l.segments in index order, and returns the position of the START
// segment and of the first END segment in it (-1 when there is none).
func (l *Log) listSegments() (startIdx, endIdx int, err error) {
	names, err := l.fs.List(l.path)
	if err != nil {
		return -1, -1, err
	}
	slices.Sort(names)
	startIdx = -1
	endIdx = -1
	for _, name := range names {
		index, isStart, isEnd, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		fi, err := l.fs.Stat(l.join(name))
		if err != nil {
			return -1, -1, err
		}
		if fi.IsDir() {
			continue
		}
		if isStart {
			startIdx = len(l.segments)
		} else if isEnd && endIdx == -1 {
			endIdx = len(l.segments)
		}
		l.segments = append(l.segments, &segment{
			index: index,
			path:  l.join(name),
		})
	}
	return startIdx, endIdx, nil
}

// parseSegmentName reports whether name is a segment file's (its first
// index in 20 digits, then nothing, .START or .END) and if so its index
// and suffix; other files in the directory are not the log's.
func parseSegmentName(name string) (index uint64, isStart, isEnd, ok bool) {
	if len(name) < 20 {
		return 0, false, false, false
	}
	index, err := strconv.ParseUint(name[:20], 10, 64)
	if err != nil || index == 0 {
		return 0, false, false, false
	}
	isStart = len(name) == 26 && strings.HasSuffix(name, ".START")
	isEnd = len(name) == 24 && strings.HasSuffix(name, ".END")
	return index, isStart, isEnd, len(name) == 20 || isStart || isEnd
}

// create starts a new log: one empty segment whose first index is 1.
func (l *Log) create() error {
	l.segments = append(l.segments, &segment{
		index: 1,
		path:  l.join(segmentName(1)),
	})
	l.firstIndex = 1
	l.lastIndex = 0
	var err error
	l.sfile, err = l.fs.Create(l.segments[0].path, writeCategory)
	if err != nil {
		return err
	}
	return l.syncDir()
}

// finishTruncateFront completes a TruncateFront that left a START segment
// at l.segments[startIdx]: the segments before it go, and it loses its
// suffix.
func (l *Log) finishTruncateFront(startIdx int) error {
	// Delete all files leading up to START
	for i := 0; i < startIdx; i++ {
		if err := l.fs.Remove(l.segments[i].path); err != nil {
			return err
		}
	}
	l.segments = append([]*segment{}, l.segments[startIdx:]...)
	// Rename the START segment
	orgPath := l.segments[0].path
	finalPath := orgPath[:len(orgPath)-len(".START")]
	err := l.fs.Rename(orgPath, finalPath)
	if err != nil {
		return err
	}
	l.segments[0].path = finalPath
	return nil
}

// finishTruncateBack completes a TruncateBack that left an END segment at
// l.segments[endIdx]: the segments after it go, and it loses its suffix.
func (l *Log) finishTruncateBack(endIdx int) error {
	// Delete all files following END
	for i := len(l.segments) - 1; i > endIdx; i-- {
		if err := l.fs.Remove(l.segments[i].path); err != nil {
			return err
		}
	}
	l.segments = append([]*segment{}, l.segments[:endIdx+1]...)
	if len(l.segments) > 1 && l.segments[len(l.segments)-2].index ==
		l.segments[len(l.segments)-1].index {
		// remove the segment prior to the END segment because it shares
		// the same starting index.
		l.segments[len(l.segments)-2] = l.segments[len(l.segments)-1]
		l.segments = l.segments[:len(l.segments)-1]
	}
	// Rename the END segment
	orgPath := l.segments[len(l.segments)-1].path
	finalPath := orgPath[:len(orgPath)-len(".END")]
	err := l.fs.Rename(orgPath, finalPath)
	if err != nil {
		return err
	}
	l.segments[len(l.segments)-1].path = finalPath
	return nil
}

// openLast sets the first index, opens the last segment for appending and
// loads its entries, which give the last index.
func (l *Log) openLast() error {
	l.firstIndex = l.segments[0].index
	lseg := l.segments[len(l.segments)-1]
	data, err := l.openTail(lseg.path)
	if err != nil {
		return err
	}
	if err := lseg.setEntries(data); err != nil {
		return err
	}
	l.lastIndex = lseg.index + uint64(len(lseg.epos)) - 1
	if l.lastIndex > 0 && l.firstIndex > l.lastIndex && !l.opts.AllowEmpty {
		return ErrEmptyLog
	}
	return nil
}

// segmentName returns a 20-byte textual representation of an index
// for lexical ordering. This is used for the file names of log segments.
func segmentName(index uint64) string {
	return fmt.Sprintf("%020d", index)
}

// Close the log. It fsyncs the tail segment, unless the log failed: a
// failed log's files are closed without another fsync.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		if l.corrupt {
			return ErrCorrupt
		}
		return ErrClosed
	}
	l.closed = true
	var err error
	if l.sfile != nil {
		if l.failed == nil {
			if serr := l.syncFile(l.sfile, l.segments[len(l.segments)-1].path); serr != nil {
				err = l.fail(serr)
			}
		}
		if cerr := l.sfile.Close(); err == nil {
			err = cerr
		}
		l.sfile = nil
	}
	l.closeReaders()
	if err == nil && l.corrupt {
		err = ErrCorrupt
	}
	return err
}

// Write an entry to the log.
func (l *Log) Write(index uint64, data []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	l.wbatch.Clear()
	l.wbatch.Write(index, data)
	return l.writeBatchAndSync(&l.wbatch) // unlocks mu
}

// Cycle the old segment for a new segment: fsync and close the tail,
// create the next segment file and fsync the directory.
func (l *Log) cycle() error {
	tail := l.segments[len(l.segments)-1]
	if err := l.syncFile(l.sfile, tail.path); err != nil {
		return err
	}
	if l.opts.DropSealed && !l.opts.NoSync {
		_ = vfsutil.DropCache(l.sfile) // advice: the data is on disk either way
	}
	err := l.sfile.Close()
	l.sfile = nil
	if err != nil {
		return err
	}
	if l.opts.OnSeal != nil {
		if err := l.opts.OnSeal(tail.path, int64(tail.size()), tail.sum()); err != nil {
			return err
		}
	}
	s := &segment{
		index: l.lastIndex + 1,
		path:  l.join(segmentName(l.lastIndex + 1)),
	}
	l.sfile, err = l.fs.Create(s.path, writeCategory)
	if err != nil {
		return err
	}
	// cache the previous segment, once it is no longer the tail (a cached
	// segment's buffers go when it is evicted)
	l.pushCache(len(l.segments) - 1)
	l.segments = append(l.segments, s)
	return l.syncDir()
}

// Batch of entries. Used to write multiple entries at once using WriteBatch().
type Batch struct {
	entries []batchEntry
	datas   []byte
}

type batchEntry struct {
	index uint64
	size  int
	// ref is WriteRef's data; nil: the entry's bytes are the next size
	// bytes of datas.
	ref []byte
}

// Write an entry to the batch
func (b *Batch) Write(index uint64, data []byte) {
	b.entries = append(b.entries, batchEntry{index: index, size: len(data)})
	b.datas = append(b.datas, data...)
}

// Tail returns the batch's data buffer, for an entry encoded right at its
// end rather than encoded elsewhere and copied by Write: append the
// entry's bytes to it and pass the result to WriteTail before any other
// call on the batch.
func (b *Batch) Tail() []byte { return b.datas }

// WriteTail adds the entry appended to Tail's buffer: data is Tail's
// result extended by the entry's bytes.
func (b *Batch) WriteTail(index uint64, data []byte) {
	b.entries = append(b.entries, batchEntry{index: index, size: len(data) - len(b.datas)})
	b.datas = data
}

// WriteRef adds an entry to the batch without copying data: a large entry
// is copied once, into the segment, instead of twice. data must not change
// until the batch is written or cleared.
func (b *Batch) WriteRef(index uint64, data []byte) {
	if data == nil {
		data = []byte{}
	}
	b.entries = append(b.entries, batchEntry{index: index, size: len(data), ref: data})
}

// Clear the batch for reuse.
func (b *Batch) Clear() {
	clear(b.entries) // drop WriteRef's references
	b.entries = b.entries[:0]
	b.datas = b.datas[:0]
}

// WriteBatch writes the entries in the batch to the log in the order that they
// were added to the batch. The batch is cleared upon a successful return.
// Unless NoSync, the batch is fsynced before WriteBatch returns, and so is
// the directory when a segment file was created. Any I/O error fails the
// log (see ErrFailed).
//
// The entries are readable (Read, LastIndex) once written, while their
// fsync still runs: the fsync holds only the writers' lock, so that reads
// of earlier entries never wait for it. A caller that must expose only
// durable entries publishes its own bound after WriteBatch returns (the
// journal does). A failed fsync fails the log.
func (l *Log) WriteBatch(b *Batch) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	if len(b.entries) == 0 {
		l.mu.Unlock()
		return nil
	}
	return l.writeBatchAndSync(b) // unlocks mu
}

// writeBatchAndSync writes b holding mu (locked by the caller, which
// holds wmu), unlocks mu and fsyncs the tail segment: wmu keeps the tail
// file open and current meanwhile.
func (l *Log) writeBatchAndSync(b *Batch) error {
	err := l.writeBatch(b)
	f, path := l.sfile, l.segments[len(l.segments)-1].path
	l.mu.Unlock()
	if err != nil || l.opts.NoSync {
		return err
	}
	if err := l.syncFile(f, path); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.fail(err)
	}
	return nil
}

func (l *Log) writeBatch(b *Batch) error {
	// check that all indexes in batch are sane
	for i := 0; i < len(b.entries); i++ {
		if b.entries[i].index != l.lastIndex+uint64(i+1) {
			return ErrOutOfOrder
		}
	}
	// load the tail segment
	s := l.segments[len(l.segments)-1]
	if s.size() > l.opts.SegmentSize {
		// tail segment has reached capacity. Close it and create a new one.
		if err := l.cycle(); err != nil {
			return l.fail(err)
		}
		s = l.segments[len(l.segments)-1]
	}

	// A small entry is added to the tail's blocks (nothing written
	// before is moved or copied again; tail.go) and written from there;
	// a big one (l.bigEntry) is written from the batch's bytes, valid
	// until WriteBatch returns, after the small ones before it, and
	// kept only in the file. mark is the memory position of the first
	// small bytes not written yet.
	mark := s.memSize()
	datas := b.datas
	var hdr [binary.MaxVarintLen64]byte
	for i := 0; i < len(b.entries); i++ {
		data := b.entries[i].ref
		if data == nil {
			data, datas = datas[:b.entries[i].size], datas[b.entries[i].size:]
		}
		// data_size + data
		pos := s.size()
		h := hdr[:binary.PutUvarint(hdr[:], uint64(len(data)))]
		if len(data) >= l.bigEntry {
			if err := l.write(s, mark); err != nil {
				return l.fail(err)
			}
			mark = s.memSize()
			if err := l.writeFile(s, [][]byte{h, data}); err != nil {
				return l.fail(err)
			}
			s.gaps = append(s.gaps, gap{pos: pos, end: pos + len(h) + len(data), before: pos - s.memSize()})
		} else {
			s.appendBytes(l, h)
			s.appendBytes(l, data)
		}
		s.epos = append(s.epos, bpos{pos, s.size()})
		if s.size() >= l.opts.SegmentSize {
			// segment has reached capacity, cycle now
			if err := l.write(s, mark); err != nil {
				return l.fail(err)
			}
			l.lastIndex = b.entries[i].index
			if err := l.cycle(); err != nil {
				return l.fail(err)
			}
			s = l.segments[len(l.segments)-1]
			mark = 0
		}
	}
	if err := l.write(s, mark); err != nil {
		return l.fail(err)
	}
	l.lastIndex = b.entries[len(b.entries)-1].index
	b.Clear()
	return nil
}

// write appends the tail segment s's memory from mark on to the tail
// file, a block at a time.
func (l *Log) write(s *segment, mark int) error {
	if mark == s.memSize() {
		return nil
	}
	var arr [8][]byte
	return l.writeFile(s, s.pieces(arr[:0], mark, s.memSize()))
}

// writePieces writes ps to f in order. vfs.File.Write may modify its
// argument, so it writes copies when fs is not the OS one.
func writePieces(fs vfs.FS, f vfs.File, ps [][]byte) error {
	for _, p := range ps {
		if !vfsutil.IsDefault(fs) {
			p = slices.Clone(p)
		}
		n, err := f.Write(p)
		if err == nil && n != len(p) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// FirstIndex returns the index of the first entry in the log.
// Returns zero when log has no entries.
// When using the `AllowEmpty` option and when the log is empty, this will
// return LastIndex+1, which is the next future index.
func (l *Log) FirstIndex() (index uint64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.corrupt {
		return 0, ErrCorrupt
	} else if l.closed {
		return 0, ErrClosed
	}
	if !l.opts.AllowEmpty && l.lastIndex == 0 {
		return 0, nil
	}
	return l.firstIndex, nil
}

// LastIndex returns the index of the last entry in the log.
// Returns zero when log has no entries.
// When using the `AllowEmpty` option and when the log is empty, this will
// return FirstIndex()-1, which is the last known deleted index.
func (l *Log) LastIndex() (index uint64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.corrupt {
		return 0, ErrCorrupt
	} else if l.closed {
		return 0, ErrClosed
	}
	if !l.opts.AllowEmpty && l.firstIndex == 0 {
		return 0, nil
	}
	return l.lastIndex, nil
}

// findSegment performs a bsearch on the segments
func (l *Log) findSegment(index uint64) int {
	i, j := 0, len(l.segments)
	for i < j {
		h := i + (j-i)/2
		if index >= l.segments[h].index {
			i = h + 1
		} else {
			j = h
		}
	}
	return i - 1
}

func (l *Log) loadSegmentEntries(s *segment) error {
	data, err := l.readFile(s.path)
	if err != nil {
		return err
	}
	return s.setEntries(data)
}

// setEntries indexes the entries of data, the contents of s's file.
func (s *segment) setEntries(data []byte) error {
	ebuf := data
	var epos []bpos
	var pos int
	for len(data) > 0 {
		n, err := loadNextBinaryEntry(data)
		if err != nil {
			return err
		}
		data = data[n:]
		epos = append(epos, bpos{pos, pos + n})
		pos += n
	}
	s.ebuf, s.blocks, s.gaps = ebuf, nil, nil
	s.epos = epos
	s.crc, s.summed = 0, false
	return nil
}

func loadNextBinaryEntry(data []byte) (n int, err error) {
	// data_size + data
	size, n := binary.Uvarint(data)
	if n <= 0 {
		return 0, ErrCorrupt
	}
	if uint64(len(data)-n) < size {
		return 0, ErrCorrupt
	}
	return n + int(size), nil
}

// loadSegment loads the segment entries into memory, pushes it to the front
// of the lru cache, and returns it. Readers call it with cmu held.
func (l *Log) loadSegment(index uint64) (*segment, error) {
	// check the last segment first.
	lseg := l.segments[len(l.segments)-1]
	if index >= lseg.index {
		return lseg, nil
	}
	// check the most recent cached segment
	var rseg *segment
	l.scache.Range(func(_, v interface{}) bool {
		s := v.(*segment)
		if index >= s.index && index < s.index+uint64(len(s.epos)) {
			rseg = s
		}
		return false
	})
	if rseg != nil {
		return rseg, nil
	}
	// find in the segment array
	idx := l.findSegment(index)
	s := l.segments[idx]
	if len(s.epos) == 0 {
		// load the entries from cache
		if err := l.loadSegmentEntries(s); err != nil {
			return nil, err
		}
	}
	// push the segment to the front of the cache
	l.pushCache(idx)
	return s, nil
}

// Read an entry from the log. Returns a byte slice containing the data
// entry, a copy. Concurrent calls are safe.
func (l *Log) Read(index uint64) (data []byte, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.corrupt {
		return nil, ErrCorrupt
	} else if l.closed {
		return nil, ErrClosed
	}
	if index < l.firstIndex || index > l.lastIndex {
		return nil, ErrNotFound
	}
	if lseg := l.segments[len(l.segments)-1]; index >= lseg.index {
		// The tail changes only under the write lock.
		return l.readEntry(lseg, index)
	}
	// Loading a sealed segment mutates the cache and may evict (nil out)
	// another reader's segment: one reader at a time (tidwall/wal#34).
	l.cmu.Lock()
	defer l.cmu.Unlock()
	s, err := l.loadSegment(index)
	if err != nil {
		return nil, err
	}
	return l.readEntry(s, index)
}

// readEntry returns a copy of the data of entry index of s: from its
// memory, or for an entry only its file holds (a gap), from the file.
func (l *Log) readEntry(s *segment, index uint64) ([]byte, error) {
	if index-s.index >= uint64(len(s.epos)) {
		return nil, ErrCorrupt
	}
	epos := s.epos[index-s.index]
	if _, ok := s.gapAt(epos.pos); ok {
		// One read of header and data; the data is returned in place.
		buf := make([]byte, epos.end-epos.pos)
		if err := l.readAt(s, buf, epos.pos); err != nil {
			return nil, err
		}
		size, n := binary.Uvarint(buf)
		if n <= 0 || uint64(len(buf)-n) != size {
			return nil, ErrCorrupt
		}
		return buf[n:], nil
	}
	mpos := s.memPos(epos.pos)
	// binary read: the header, then the data (either may span blocks)
	var hdr [binary.MaxVarintLen64]byte
	h := hdr[:min(len(hdr), epos.end-epos.pos)]
	s.copyAt(h, mpos)
	size, n := binary.Uvarint(h)
	if n <= 0 {
		return nil, ErrCorrupt
	}
	if uint64(epos.end-epos.pos-n) < size {
		return nil, ErrCorrupt
	}
	data := make([]byte, size)
	s.copyAt(data, mpos+n)
	return data, nil
}

func (l *Log) clearCache() {
	l.scache.Range(func(_, v interface{}) bool {
		s := v.(*segment)
		l.closeReader(s)
		s.ebuf, s.blocks, s.gaps, s.epos = nil, nil, nil, nil
		return true
	})
	l.scache = tinylru.LRU{}
	l.scache.Resize(l.opts.SegmentCacheSize)
}

// atomicWrite performs an temp write + rename to ensure the file writing is
// and atomic operation. One os.WriteFile alone is not good enough.
func (l *Log) atomicWrite(name string, data [][]byte) error {
	// Create a TEMP file
	tempName := name + ".TEMP"
	defer func() { _ = l.fs.Remove(tempName) }()
	if err := func() error {
		f, err := l.fs.Create(tempName, writeCategory)
		if err != nil {
			return err
		}
		if err := writePieces(l.fs, f, data); err != nil {
			_ = f.Close()
			return err
		}
		if err := l.syncFile(f, tempName); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}(); err != nil {
		return err
	}
	// Rename the TEMP file to final name
	return l.fs.Rename(tempName, name)
}

// TruncateFront truncates the front of the log by removing all entries that
// are before the provided `index`. In other words the entry at `index` becomes
// the first entry in the log.
//
// The `AllowEmpty` option may be used to allow for removing all entries in the
// log by providing `LastIndex+1` as the index. Otherwise without `AllowEmpty`,
// at least one entry must always remain following a truncate.
func (l *Log) TruncateFront(index uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.truncateFront(index); err != nil {
		return err
	}
	// The files are in place; make their names durable. A failure here
	// leaves a consistent log that Open finds again, but fails writes.
	if err := l.syncDir(); err != nil {
		return l.fail(err)
	}
	return nil
}

func (l *Log) truncateFront(index uint64) (err error) {
	if index < l.firstIndex || index > l.lastIndex+1 {
		return ErrOutOfRange
	}
	if !l.opts.AllowEmpty && index == l.lastIndex+1 {
		return ErrOutOfRange
	}
	if index == l.firstIndex {
		// nothing to truncate
		return nil
	}
	var segIdx int
	var s *segment
	var ebuf [][]byte
	if index == l.lastIndex+1 {
		// Truncate all entries, only care about the last segment
		segIdx = len(l.segments) - 1
		s = l.segments[segIdx]
		ebuf = nil
	} else {
		segIdx = l.findSegment(index)
		s, err = l.loadSegment(index)
		if err != nil {
			return err
		}
		epos := s.epos[index-s.index:]
		if ebuf, err = l.contents(s, epos[0].pos, s.size()); err != nil {
			return err
		}
	}
	// Create a START file contains the truncated segment.
	startName := l.join(segmentName(index) + ".START")
	if err = l.atomicWrite(startName, ebuf); err != nil {
		return fmt.Errorf("failed to create start segment: %w", err)
	}
	// The log was truncated but still needs some file cleanup. An error
	// from here on does not corrupt the files (Open finishes the
	// truncation), but the files no longer match the in-memory state: the
	// log fails (upstream marks it corrupt, which also refuses reads). The
	// in-memory state changes only once the files are done, so reads go on
	// returning the right entries, or an error for a removed file.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: panic: %v", ErrCorrupt, v)
			l.corrupt = true
		}
		if err != nil {
			err = l.fail(err)
		}
	}()
	// The files read for gaps are removed or renamed below (and the
	// segments' gaps go): close them, whatever happens next.
	l.closeReaders()
	tail := segIdx == len(l.segments)-1
	if tail {
		// Close the tail segment file
		err = l.sfile.Close()
		l.sfile = nil
		if err != nil {
			return err
		}
	}
	// Delete truncated segment files
	for i := 0; i <= segIdx; i++ {
		if err = l.fs.Remove(l.segments[i].path); err != nil {
			return err
		}
	}
	// Rename the START file to the final truncated segment name.
	newName := l.join(segmentName(index))
	if err = l.fs.Rename(startName, newName); err != nil {
		return err
	}
	var data []byte
	if tail {
		// Reopen the tail segment file
		if data, err = l.openTail(newName); err != nil {
			return err
		}
		if len(data) != piecesLen(ebuf) {
			err = errors.New("invalid seek")
			return err
		}
	}
	s.path = newName
	s.index = index
	if tail {
		// Load the last segment entries
		if err = s.setEntries(data); err != nil {
			return err
		}
	}
	l.segments = append([]*segment{}, l.segments[segIdx:]...)
	l.firstIndex = index
	l.clearCache()
	return nil
}

// TruncateBack truncates the back of the log by removing all entries that
// are after the provided `index`. In other words the entry at `index` becomes
// the last entry in the log.
//
// The `AllowEmpty` option may be used to allow for removing all entries in the
// log by providing `FirstIndex()-1` as the index. Otherwise without
// `AllowEmpty`, at least one entry must always remain following a truncate.
func (l *Log) TruncateBack(index uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.truncateBack(index); err != nil {
		return err
	}
	// The files are in place; make their names durable. A failure here
	// leaves a consistent log that Open finds again, but fails writes.
	if err := l.syncDir(); err != nil {
		return l.fail(err)
	}
	return nil
}

func (l *Log) truncateBack(index uint64) (err error) {
	if index < l.firstIndex-1 || index > l.lastIndex {
		return ErrOutOfRange
	}
	if !l.opts.AllowEmpty && index == l.firstIndex-1 {
		return ErrOutOfRange
	}
	if index == l.lastIndex {
		// nothing to truncate
		return nil
	}
	var segIdx int
	var s *segment
	var ebuf [][]byte
	if index == l.firstIndex-1 {
		// Truncate all entries, only care about the first segment
		segIdx = 0
		s = l.segments[segIdx]
		ebuf = nil
	} else {
		segIdx = l.findSegment(index)
		s, err = l.loadSegment(index)
		if err != nil {
			return err
		}
		epos := s.epos[:index-s.index+1]
		if ebuf, err = l.contents(s, 0, epos[len(epos)-1].end); err != nil {
			return err
		}
	}
	// Create an END file contains the truncated segment.
	endName := l.join(segmentName(s.index) + ".END")
	if err = l.atomicWrite(endName, ebuf); err != nil {
		return fmt.Errorf("failed to create end segment: %w", err)
	}
	// As in truncateFront: an error from here on fails the log, and the
	// in-memory state changes only once the files are done.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: panic: %v", ErrCorrupt, v)
			l.corrupt = true
		}
		if err != nil {
			err = l.fail(err)
		}
	}()

	// As in truncateFront, the files read for gaps go.
	l.closeReaders()
	// Close the tail segment file
	err = l.sfile.Close()
	l.sfile = nil
	if err != nil {
		return err
	}
	// Delete truncated segment files
	for i := segIdx; i < len(l.segments); i++ {
		if err = l.fs.Remove(l.segments[i].path); err != nil {
			return err
		}
	}
	// Rename the END file to the final truncated segment name.
	newName := l.join(segmentName(s.index))
	if err = l.fs.Rename(endName, newName); err != nil {
		return err
	}
	// Reopen the tail segment file
	var data []byte
	if data, err = l.openTail(newName); err != nil {
		return err
	}
	if len(data) != piecesLen(ebuf) {
		err = errors.New("invalid seek")
		return err
	}
	s.path = newName
	l.segments = append([]*segment{}, l.segments[:segIdx+1]...)
	l.lastIndex = index
	l.clearCache()
	return s.setEntries(data)
}

// Sync performs an fsync on the log. This is not necessary when the
// NoSync option is set to false. A failed fsync fails the log.
func (l *Log) Sync() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.syncFile(l.sfile, l.segments[len(l.segments)-1].path); err != nil {
		return l.fail(err)
	}
	return nil
}

// IsEmpty returns true if there are no entries in the log.
func (l *Log) IsEmpty() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.corrupt {
		return false, ErrCorrupt
	} else if l.closed {
		return false, ErrClosed
	}
	return (l.firstIndex == 0 && l.lastIndex == 0) ||
		l.firstIndex > l.lastIndex, nil
}
