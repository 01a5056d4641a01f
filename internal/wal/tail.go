package wal

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// tailBlock is the size of the blocks the bytes written to a segment are
// kept in. Every block but a segment's last is full, so a position maps
// to its block by a division.
const tailBlock = 1 << 20

// bigEntry is the size from which an entry written to the tail goes to
// the segment file straight from the caller's bytes and is not kept in
// memory: reads of it read the file. Copying a megabyte entry into
// fresh blocks cost more than its write (page faults of new memory: a
// fifth of pgq's CPU in a backfill of 1.2 MB records), while a pread of
// 256 KiB or more costs little next to the copy out that every read does
// anyway. Smaller entries (most records) stay in the blocks, so the many
// readers of recent small records never make a system call.
const bigEntry = 256 << 10

// castagnoli is the CRC32C table of the segments' running checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// gap is an entry of a segment kept only in its file (bigEntry): its
// header and data take the file's bytes [pos, end), none of the
// segment's memory.
type gap struct {
	pos, end int
	// before is the bytes of the segment's earlier gaps: a byte at file
	// position p after this gap is at p-before-(end-pos) in memory.
	before int
}

// Tail returns the tail segment's first index (its file name) and the
// bytes of entries it holds: where the next write will start. The
// journal records it in its durable-point marker after each fsync.
func (l *Log) Tail() (index uint64, size int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segments) == 0 {
		return 0, 0
	}
	s := l.segments[len(l.segments)-1]
	return s.index, int64(s.size())
}

// size returns the bytes of entries s holds: its file's length once
// what was added is written.
func (s *segment) size() int {
	n := s.memSize()
	if k := len(s.gaps); k > 0 {
		g := s.gaps[k-1]
		n += g.before + g.end - g.pos
	}
	return n
}

// memSize returns the bytes of s kept in memory: what was read from its
// file and what was written since, but its gaps.
func (s *segment) memSize() int {
	n := len(s.ebuf)
	if k := len(s.blocks); k > 0 {
		n += (k-1)*tailBlock + len(s.blocks[k-1])
	}
	return n
}

// gapAt returns the gap that starts at file position pos, if any.
func (s *segment) gapAt(pos int) (gap, bool) {
	i := sort.Search(len(s.gaps), func(i int) bool { return s.gaps[i].pos >= pos })
	if i < len(s.gaps) && s.gaps[i].pos == pos {
		return s.gaps[i], true
	}
	return gap{}, false
}

// memPos maps file position pos, outside every gap, to its position in
// s's memory.
func (s *segment) memPos(pos int) int {
	i := sort.Search(len(s.gaps), func(i int) bool { return s.gaps[i].pos >= pos })
	if i == 0 {
		return pos
	}
	g := s.gaps[i-1]
	return pos - g.before - (g.end - g.pos)
}

// pieces appends to dst the pieces of s's memory from byte from up to
// byte to (memory positions, the file's when s has no gaps), in order:
// subslices of its buffers, not copies.
func (s *segment) pieces(dst [][]byte, from, to int) [][]byte {
	if from < to && from < len(s.ebuf) {
		e := min(to, len(s.ebuf))
		dst = append(dst, s.ebuf[from:e])
		from = e
	}
	for from < to {
		rel := from - len(s.ebuf)
		b, off := s.blocks[rel/tailBlock], rel%tailBlock
		e := min(len(b), off+to-from)
		dst = append(dst, b[off:e])
		from += e - off
	}
	return dst
}

// contents returns s's file bytes from file position from up to to,
// both entry bounds, as pieces in order: its memory's, and copies read
// from the file for its gaps.
func (l *Log) contents(s *segment, from, to int) ([][]byte, error) {
	var ps [][]byte
	for _, g := range s.gaps {
		if g.end <= from || g.pos >= to {
			continue
		}
		if from < g.pos {
			m := s.memPos(from)
			ps = s.pieces(ps, m, m+g.pos-from)
		}
		b := make([]byte, g.end-g.pos)
		if err := l.readAt(s, b, g.pos); err != nil {
			return nil, err
		}
		ps = append(ps, b)
		from = g.end
	}
	if from < to {
		m := s.memPos(from)
		ps = s.pieces(ps, m, m+to-from)
	}
	return ps, nil
}

// readAt fills dst with the bytes of s's file from file position pos,
// through its reader (so fault-injecting and crash file systems see it).
func (l *Log) readAt(s *segment, dst []byte, pos int) error {
	f, err := l.reader(s)
	if err == nil {
		var n int
		n, err = f.ReadAt(dst, int64(pos))
		if n == len(dst) {
			err = nil // io.ReaderAt may report EOF with the last byte
		} else if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		return fmt.Errorf("read %d bytes at %d of %s: %w", len(dst), pos, s.path, err)
	}
	return nil
}

// reader returns the handle that reads s's gaps, opening it (through
// l.fs) at the first read: a segment's big entries are read through one
// handle rather than an open and a close each. The handle is used
// outside hmu: ReadAt is a pread, safe beside others, and it is closed
// only where no read of s runs (closeReader).
func (l *Log) reader(s *segment) (vfs.File, error) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if s.rf == nil {
		f, err := l.fs.Open(s.path)
		if err != nil {
			return nil, err
		}
		s.rf = f
	}
	return s.rf, nil
}

// closeReader closes s's reader, if open. Callers hold mu exclusively,
// or cmu for a sealed segment the cache evicts: its reads hold cmu, and
// tail reads never touch it. A read-only handle's Close error says
// nothing about the data: it is dropped.
func (l *Log) closeReader(s *segment) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if s.rf != nil {
		_ = s.rf.Close()
		s.rf = nil
	}
}

// closeReaders closes the readers of every segment (only the tail and
// cached segments have gaps, and so readers). Callers hold mu
// exclusively.
func (l *Log) closeReaders() {
	for _, s := range l.segments {
		l.closeReader(s)
	}
}

// copyAt copies len(dst) bytes of s's memory from memory position pos
// into dst.
func (s *segment) copyAt(dst []byte, pos int) {
	var arr [4][]byte
	for _, p := range s.pieces(arr[:0], pos, pos+len(dst)) {
		dst = dst[copy(dst, p):]
	}
}

// appendBytes adds p at the end of s's memory, filling the last block
// and taking new ones from l (takeBlock): nothing written before moves.
func (s *segment) appendBytes(l *Log, p []byte) {
	for len(p) > 0 {
		k := len(s.blocks)
		if k == 0 || len(s.blocks[k-1]) == tailBlock {
			s.blocks = append(s.blocks, l.takeBlock())
			k++
		}
		b := s.blocks[k-1]
		n := copy(b[len(b):tailBlock], p)
		s.blocks[k-1] = b[:len(b)+n]
		p = p[n:]
	}
}

// writeFile appends ps to s's file (the tail, l.sfile) in order and adds
// them to s's running checksum.
func (l *Log) writeFile(s *segment, ps [][]byte) error {
	crc := s.sum()
	if err := writePieces(l.fs, l.sfile, ps); err != nil {
		return err
	}
	for _, p := range ps {
		crc = crc32.Update(crc, castagnoli, p)
	}
	s.crc = crc
	return nil
}

// sum returns the CRC32C of s's file bytes written so far: a tail read
// from its file starts from the checksum of what was read, computed at
// its first write or its seal (a log opened only to be read never pays
// for it).
func (s *segment) sum() uint32 {
	if !s.summed {
		s.crc, s.summed = crc32.Checksum(s.ebuf, castagnoli), true
	}
	return s.crc
}

// takeBlock returns an empty block, a recycled one when there is one.
func (l *Log) takeBlock() []byte {
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		return b[:0]
	}
	return make([]byte, 0, tailBlock)
}

// recycle keeps the blocks of a segment the cache evicted for the next
// tail segment, up to a segment's worth: nothing refers into them any
// more (reads copy out).
func (l *Log) recycle(blocks [][]byte) {
	keep := l.opts.SegmentSize/tailBlock + 2
	for _, b := range blocks {
		if len(l.free) >= keep {
			return
		}
		l.free = append(l.free, b)
	}
}

// piecesLen returns the bytes of ps together.
func piecesLen(ps [][]byte) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return n
}
