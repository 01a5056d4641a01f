package ingest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/vfsutil"
	"github.com/pgq-dev/pgq/record"
)

// ErrSpill marks a failed read or write of a spill file (a full disk: the
// error also wraps syscall.ENOSPC). It is not fatal: the session ends,
// its spill files are removed, and ingest reconnects with a growing
// backoff (see Options.ReconnectGiveUp) while Status.SpillError shows it.
var ErrSpill = errors.New("spill file I/O failed")

// spillSuffix names spill files: <toplevel xid>.spill.
const spillSuffix = ".spill"

// spillChunkBytes is the per-transaction write buffer: changes are held in
// RAM until their estimated size reaches it (or the subtransaction
// changes), then encoded as one chunk and written.
const spillChunkBytes = 128 << 10

// maxSpillChunk bounds a chunk read back, against a corrupt length prefix.
const maxSpillChunk = 1 << 30

// cleanSpillDir creates dir and removes the spill files a previous process
// left behind (a spill never outlives its replication session).
func cleanSpillDir(fs vfs.FS, dir string) (removed int, err error) {
	if err := fs.MkdirAll(dir, vfsutil.DirMode); err != nil {
		return 0, fmt.Errorf("ingest: spill dir %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return 0, fmt.Errorf("ingest: spill dir %s: %w", dir, err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, spillSuffix) {
			continue
		}
		if st, err := fs.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			continue
		}
		if err := fs.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("ingest: clean spill dir: %w", err)
		}
		removed++
	}
	return removed, nil
}

// newSpill starts the spill of the transaction xid. Its files go through
// Options.FS, like every other file of pgq's.
func (s *session) newSpill(xid uint32) *spillTx {
	t := newSpillTx(s.in.o.FS, s.in.o.SpillDir, xid, s.chunkBytes())
	t.onWrite = s.in.spillWritten
	return t
}

// noteSpillErr shows err in Status.SpillError when it is a spill failure,
// until a spill write succeeds again or the journal covers the LSN where
// it happened (see spillRecovered).
func (in *Ingester) noteSpillErr(err error) {
	if !errors.Is(err, ErrSpill) {
		return
	}
	in.mu.Lock()
	in.spillErr, in.spillErrLSN = err.Error(), pgq.LSN(in.received.Load())
	in.mu.Unlock()
	in.spillFailed.Store(true)
}

// spillWritten runs after every successful spill write: the directory
// takes writes again.
func (in *Ingester) spillWritten() { in.spillRecovered(0) }

// spillRecovered clears the spill error once the journal covers lsn past
// the failure (0: unconditionally). The flag keeps the hot paths
// (committer hook, every spill write) lock-free while nothing failed.
func (in *Ingester) spillRecovered(lsn pgq.LSN) {
	if !in.spillFailed.Load() {
		return
	}
	in.mu.Lock()
	if lsn == 0 || lsn > in.spillErrLSN {
		in.spillErr = ""
		in.spillFailed.Store(false)
	}
	in.mu.Unlock()
}

// spillTx is one in-progress transaction whose changes go to a spill file
// (see the package documentation for the format). Only the session
// goroutine touches it.
type spillTx struct {
	xid   uint32 // toplevel xid
	fs    vfs.FS
	path  string
	f     vfs.File // nil until the first chunk is written
	chunk int      // limit of the write buffer, bytes
	// onWrite (may be nil) runs after each chunk written.
	onWrite func()

	pending      []pgq.Change // the write buffer: changes of pendingXid
	pendingXid   uint32
	pendingBytes int
	enc          []byte // encode buffer, reused

	origin  string
	written int64               // bytes in the file
	subxids map[uint32]struct{} // every (sub)xid that made a change
	aborted map[uint32]struct{} // aborted subxids: their changes are skipped on read
	ddl     ddlProof            // DDL capture state of a streamed transaction (ddl.go)
}

func newSpillTx(fs vfs.FS, dir string, xid uint32, chunk int) *spillTx {
	return &spillTx{
		xid:     xid,
		fs:      fs,
		path:    filepath.Join(dir, strconv.FormatUint(uint64(xid), 10)+spillSuffix),
		chunk:   chunk,
		subxids: map[uint32]struct{}{},
	}
}

// add appends one change made by subxid (the toplevel xid for changes of
// the toplevel transaction itself).
func (t *spillTx) add(subxid uint32, c *pgq.Change) error {
	if len(t.pending) > 0 && subxid != t.pendingXid {
		if err := t.flush(); err != nil {
			return err
		}
	}
	if _, ok := t.subxids[subxid]; !ok {
		t.subxids[subxid] = struct{}{}
	}
	t.pendingXid = subxid
	t.pending = append(t.pending, *c)
	enc, _ := changeSize(c)
	t.pendingBytes += enc
	if t.pendingBytes >= t.chunk {
		return t.flush()
	}
	return nil
}

// flush writes the write buffer as one chunk.
func (t *spillTx) flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	if t.f == nil {
		f, err := t.fs.Create(t.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return t.failed(err)
		}
		t.f = f
	}
	chunk := pgq.Transaction{Xid: t.pendingXid, Changes: t.pending}
	// Reserve room for the longest uvarint, encode the record behind it,
	// then put the real length prefix just before the record.
	var hdr [binary.MaxVarintLen64]byte
	t.enc = append(t.enc[:0], hdr[:]...)
	t.enc = record.Append(t.enc, &chunk)
	n := binary.PutUvarint(hdr[:], uint64(len(t.enc)-len(hdr)))
	start := len(hdr) - n
	copy(t.enc[start:], hdr[:n])
	if _, err := t.f.Write(t.enc[start:]); err != nil {
		return t.failed(err)
	}
	if t.onWrite != nil {
		t.onWrite()
	}
	t.written += int64(len(t.enc) - start)
	if cap(t.enc) > 4*t.chunk {
		t.enc = nil
	}
	clear(t.pending)
	t.pending = t.pending[:0]
	t.pendingBytes = 0
	return nil
}

// abortSub discards the changes of one aborted subtransaction. PostgreSQL
// sends one StreamAbort per aborted subxid that streamed changes, also for
// subtransactions nested in the one rolled back, so matching the exact
// subxid is enough.
func (t *spillTx) abortSub(subxid uint32) {
	if _, ok := t.subxids[subxid]; !ok {
		return // it made no change we hold
	}
	if t.aborted == nil {
		t.aborted = map[uint32]struct{}{}
	}
	t.aborted[subxid] = struct{}{}
	if len(t.pending) > 0 && t.pendingXid == subxid {
		clear(t.pending)
		t.pending = t.pending[:0]
		t.pendingBytes = 0
	}
}

// replayChunks flushes the write buffer, then calls fn with every chunk
// record (see the package documentation) not discarded by a subtransaction
// abort, in order. rec is only valid during the call.
func (t *spillTx) replayChunks(fn func(rec []byte) error) error {
	if err := t.flush(); err != nil {
		return err
	}
	if t.f == nil {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(t.f, 0, t.written), 256<<10)
	var buf []byte
	var read int64
	for read < t.written {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return t.failed(fmt.Errorf("read at byte %d: %w", read, err))
		}
		if n > maxSpillChunk {
			return fmt.Errorf("ingest: read spill xid %d at byte %d: chunk of %d bytes", t.xid, read, n)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return t.failed(fmt.Errorf("read at byte %d: %w", read, err))
		}
		info, err := record.Peek(buf)
		if err != nil {
			return fmt.Errorf("ingest: read spill xid %d at byte %d: %w", t.xid, read, err)
		}
		read += int64(uvarintLen(n)) + int64(n)
		if _, gone := t.aborted[info.Xid]; gone {
			continue
		}
		if err := fn(buf); err != nil {
			return err
		}
	}
	return nil
}

// discard closes and removes the spill file.
func (t *spillTx) discard() error {
	t.pending = nil
	if t.f == nil {
		return nil
	}
	cerr := t.f.Close()
	t.f = nil
	if err := t.fs.Remove(t.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ingest: remove spill: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("ingest: close spill: %w", cerr)
	}
	return nil
}

// failed wraps an I/O error of t's file as ErrSpill, naming the directory
// the operator must free.
func (t *spillTx) failed(err error) error {
	return fmt.Errorf("ingest: %w in %s: xid %d: %w", ErrSpill, filepath.Dir(t.path), t.xid, err)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// Sizes used for estimates of a decoded change.
const (
	changeHeapBytes = int(unsafe.Sizeof(pgq.Change{}))
	valueHeapBytes  = int(unsafe.Sizeof(pgq.Value{}))
)

// changeSize estimates c's bytes in a journal record (enc) and in memory
// once decoded (mem). Parts are cut on enc; the committer's pending-bytes
// bound is fed mem.
func changeSize(c *pgq.Change) (enc, mem int) {
	enc = 8 + len(c.Prefix) + len(c.Content)
	for _, s := range c.Tables {
		enc += 2 + len(s)
	}
	for i := range c.New {
		enc += 3 + len(c.New[i].Data)
	}
	for i := range c.Old {
		enc += 3 + len(c.Old[i].Data)
	}
	mem = enc + changeHeapBytes + valueHeapBytes*(len(c.New)+len(c.Old))
	return enc, mem
}
