package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq"
)

// DurableFile is the name of the durable-point marker inside the journal
// directory (format in the package documentation, "Durable point").
const DurableFile = "DURABLE"

const (
	durableMagic    = "pgqD"
	durableVersion  = 1
	durableSlotSize = 512 // one sector: a slot's write is never torn into the other slot
	durableSlots    = 2
	durableLen      = 40 // magic 4, version 1, reserved 3, seq 8, last 8, segment 8, end 8; then CRC32C 4
)

// durablePoint is the journal's last fsynced record, as the marker
// recorded it.
type durablePoint struct {
	seq     uint64     // write sequence; the valid slot with the highest wins
	last    pgq.Offset // last record fsynced (0: none)
	segment pgq.Offset // first offset (file name) of the tail segment then; 0: not recorded
	end     int64      // bytes of entries in that segment file then (where record last ends)
}

// encodeDurable returns one marker slot holding p, in b's memory when it
// has room.
func encodeDurable(b []byte, p durablePoint) []byte {
	if cap(b) < durableSlotSize {
		b = make([]byte, durableSlotSize)
	}
	b = b[:durableSlotSize]
	clear(b)
	copy(b, durableMagic)
	b[4] = durableVersion
	binary.LittleEndian.PutUint64(b[8:], p.seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(p.last))
	binary.LittleEndian.PutUint64(b[24:], uint64(p.segment))
	binary.LittleEndian.PutUint64(b[32:], uint64(p.end))
	binary.LittleEndian.PutUint32(b[durableLen:], crc32.Checksum(b[:durableLen], castagnoli))
	return b
}

// decodeDurable parses one slot; ok is false for a slot that is empty,
// torn, of another magic or of an unknown version.
func decodeDurable(b []byte) (p durablePoint, ok bool) {
	if len(b) < durableLen+4 || !bytes.Equal(b[:4], []byte(durableMagic)) || b[4] != durableVersion ||
		crc32.Checksum(b[:durableLen], castagnoli) != binary.LittleEndian.Uint32(b[durableLen:]) {
		return p, false
	}
	p.seq = binary.LittleEndian.Uint64(b[8:])
	p.last = pgq.Offset(binary.LittleEndian.Uint64(b[16:]))
	p.segment = pgq.Offset(binary.LittleEndian.Uint64(b[24:]))
	p.end = int64(binary.LittleEndian.Uint64(b[32:]))
	return p, p.end >= 0
}

// parseDurable returns the newest valid slot of a marker file's data;
// ok is false when no slot is valid (no durable point known).
func parseDurable(data []byte) (p durablePoint, ok bool) {
	for i := range durableSlots {
		lo := i * durableSlotSize
		if lo >= len(data) {
			break
		}
		if q, good := decodeDurable(data[lo:min(len(data), lo+durableSlotSize)]); good && (!ok || q.seq > p.seq) {
			p, ok = q, true
		}
	}
	return p, ok
}

// readDurable reads dir's marker through fs. ok is false when the file is
// missing (a journal written by a pgq before the marker) or holds no valid
// slot (a marker from a newer pgq, or one whose creation a crash
// interrupted): no durable point is known.
func readDurable(fs vfs.FS, dir string) (p durablePoint, ok bool, err error) {
	data, err := readFile(fs, fs.PathJoin(dir, DurableFile))
	if errors.Is(err, os.ErrNotExist) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("durable point: %w", err)
	}
	p, ok = parseDurable(data)
	return p, ok, nil
}

// marker writes the durable-point file. Open and TruncateAt use it
// before anything else runs; then the journal's writer (AppendRecords) or
// the Committer's publishing goroutine advances it.
type marker struct {
	fs     vfs.FS
	path   string
	noSync bool
	onSync func(path string, d time.Duration)

	// mu guards the fields below and orders the writes to the file.
	mu    sync.Mutex
	file  vfs.File     // nil once closed
	cur   durablePoint // what the newest slot on disk holds
	known bool         // cur was read from or written to the file
	buf   []byte       // one slot, reused
}

// openMarker opens (creating it if missing, and then fsyncing the
// directory with syncDir) the marker file of dir and loads its newest
// valid slot.
func openMarker(fs vfs.FS, dir string, noSync bool, onSync func(string, time.Duration), syncDir func() error) (*marker, error) {
	m := &marker{fs: fs, path: fs.PathJoin(dir, DurableFile), noSync: noSync, onSync: onSync}
	p, ok, err := readDurable(fs, dir)
	if err != nil {
		return nil, err
	}
	m.cur, m.known = p, ok
	_, statErr := fs.Stat(m.path)
	f, err := fs.OpenReadWrite(m.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("durable point: open: %w", err)
	}
	m.file = f
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("durable point: %w", err)
		}
	}
	return m, nil
}

// set records p (its seq is assigned) in the slot not holding the current
// point, so that a torn write leaves the previous point readable, and
// fsyncs it (fdatasync: the file's size no longer changes after the first
// two writes). The caller holds mu.
func (m *marker) set(p durablePoint) error {
	if m.file == nil {
		return fmt.Errorf("durable point: %w", ErrClosed)
	}
	p.seq = m.cur.seq + 1
	slot := int64(p.seq%durableSlots) * durableSlotSize
	m.buf = encodeDurable(m.buf, p)
	if _, err := m.file.WriteAt(m.buf, slot); err != nil {
		return fmt.Errorf("durable point: write: %w", err)
	}
	if !m.noSync {
		start := time.Now()
		err := m.file.SyncData()
		m.onSync(m.path, time.Since(start))
		if err != nil {
			return fmt.Errorf("durable point: sync: %w", err)
		}
	}
	m.cur, m.known = p, true
	return nil
}

// lower makes the recorded point at most last (with no byte position)
// before the records after last are removed, so that a crash during the
// removal never leaves a marker past the journal's end.
func (m *marker) lower(last pgq.Offset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known && m.cur.last <= last {
		return nil
	}
	return m.set(durablePoint{last: last})
}

// advance records p unless the marker already holds a later point (a
// batch's mark that arrives after a later one's).
func (m *marker) advance(p durablePoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known && p.last <= m.cur.last {
		return nil
	}
	return m.set(p)
}

func (m *marker) close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.file == nil {
		return nil
	}
	err := m.file.Close()
	m.file = nil
	return err
}

// tailPoint is the durable point once the batch just written (last its
// last record) has been fsynced: its offset and the tail's end (the
// caller holds appendMu, so the tail has not moved since).
func (j *Journal) tailPoint(last pgq.Offset) durablePoint {
	seg, end := j.w.Tail()
	return durablePoint{last: last, segment: pgq.Offset(seg), end: end}
}

// markDurable records p, the point a fsynced batch reached, in the
// marker (write and fsync) unless a later point is there already. It must
// return before anyone is told the batch is durable; a failure fails the
// journal (see the package documentation, "Durable point").
func (j *Journal) markDurable(p durablePoint) error {
	if j.opts.noDurable {
		return nil
	}
	if err := j.mark.advance(p); err != nil {
		return j.fail(fmt.Errorf("mark record %d durable: %w", p.last, err))
	}
	return nil
}

// settleDurable runs at the end of Open: it makes the marker name the
// journal's last record. Records past the recorded point (the complete
// part of an unsynced write that reached the disk, or a journal written
// before the marker existed) are kept as ordinary records, so they are
// fsynced first: from now on a bad byte in them is corruption, never a
// torn write.
func (j *Journal) settleDurable() error {
	li, err := j.w.LastIndex()
	if err != nil {
		return err
	}
	last := pgq.Offset(li)
	seg, end := j.w.Tail()
	p := durablePoint{seq: j.mark.cur.seq, last: last, segment: pgq.Offset(seg), end: end}
	j.mark.mu.Lock()
	defer j.mark.mu.Unlock()
	if j.mark.known && j.mark.cur == p {
		return nil
	}
	if (!j.mark.known || j.mark.cur.last < last) && !j.opts.NoSync {
		if err := j.w.Sync(); err != nil {
			return fmt.Errorf("durable point: sync the tail: %w", err)
		}
	}
	return j.mark.set(p)
}
