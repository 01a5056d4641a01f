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

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

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
func cleanSpillDir(dir string) (removed int, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, fmt.Errorf("ingest: spill dir %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("ingest: spill dir %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), spillSuffix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("ingest: clean spill dir: %w", err)
		}
		removed++
	}
	return removed, nil
}

// spillTx is one in-progress transaction whose changes go to a spill file
// (see the package documentation for the format). Only the session
// goroutine touches it.
type spillTx struct {
	xid   uint32 // toplevel xid
	path  string
	f     *os.File // nil until the first chunk is written
	chunk int      // limit of the write buffer, bytes

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

func newSpillTx(dir string, xid uint32, chunk int) *spillTx {
	return &spillTx{
		xid:     xid,
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
		f, err := os.OpenFile(t.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("ingest: spill xid %d: %w", t.xid, err)
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
		return fmt.Errorf("ingest: spill xid %d: %w", t.xid, err)
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
	if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("ingest: read spill xid %d: %w", t.xid, err)
	}
	r := bufio.NewReaderSize(t.f, 256<<10)
	var buf []byte
	var read int64
	for read < t.written {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("ingest: read spill xid %d at byte %d: %w", t.xid, read, err)
		}
		if n > maxSpillChunk {
			return fmt.Errorf("ingest: read spill xid %d at byte %d: chunk of %d bytes", t.xid, read, n)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("ingest: read spill xid %d at byte %d: %w", t.xid, read, err)
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
	if err := os.Remove(t.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ingest: remove spill: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("ingest: close spill: %w", cerr)
	}
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
