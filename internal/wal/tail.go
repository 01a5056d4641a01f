package wal

// tailBlock is the size of the blocks the bytes written to a segment are
// kept in. Every block but a segment's last is full, so a position maps
// to its block by a division.
const tailBlock = 1 << 20

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

// size returns the bytes of entries s holds: what was read from its file
// and what was written since.
func (s *segment) size() int {
	n := len(s.ebuf)
	if k := len(s.blocks); k > 0 {
		n += (k-1)*tailBlock + len(s.blocks[k-1])
	}
	return n
}

// pieces appends to dst the pieces of s's contents from byte from up to
// byte to, in order: subslices of its buffers, not copies.
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

// copyAt copies len(dst) bytes of s's contents from byte pos into dst.
func (s *segment) copyAt(dst []byte, pos int) {
	var arr [4][]byte
	for _, p := range s.pieces(arr[:0], pos, pos+len(dst)) {
		dst = dst[copy(dst, p):]
	}
}

// appendBytes adds p at the end of s's contents, filling the last block
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
