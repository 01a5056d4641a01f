package index

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
)

// Key prefixes. Every derived key family has a one-byte prefix so that a
// family is one contiguous key range [prefix, prefix+1).
const (
	prefixBlock byte = 'b' // "b" + be64(block start) → block value
	prefixLSN   byte = 'l' // "l" + be64(block's last maxCommitLSN) + be64(block start) → empty
	prefixTime  byte = 't' // "t" + be64(block's last maxCommitMicros ^ 1<<63) + be64(block start) → empty
	prefixGroup byte = 'g' // "g" + name → opaque group value
	// prefixOffsetV1 is the per-offset family of the first format (73-byte
	// entry values). Open drops it: the derived keys are rebuilt from the
	// journal.
	prefixOffsetV1 byte = 'o'
)

// keyLast holds be64(highest offset written to Pebble: the end of the last
// block). It sorts under 'm', apart from every derived family.
var keyLast = []byte("m/last")

// keyFloor holds be64(the TruncateFront floor): offsets below it are not
// indexed even where their block is still stored.
var keyFloor = []byte("m/floor")

// blockLen is the number of offsets a block covers: block b holds offsets
// b*blockLen+1 .. (b+1)*blockLen (the first block after a Reset may start
// later). Only full blocks are written to Pebble; the block being filled
// lives in memory (see the package doc).
const blockLen = 128

// blockStart returns the first offset of the block holding off.
func blockStart(off pgq.Offset) pgq.Offset {
	return (off-1)/blockLen*blockLen + 1
}

// blockEnd returns the last offset of the block holding off.
func blockEnd(off pgq.Offset) pgq.Offset { return blockStart(off) + blockLen - 1 }

// blockVersion is the first byte of every block value written: a set id
// and whether the record ends its transaction per entry. Blocks of
// blockVersionNoEnd (written before the end flag) are read with every
// entry's End unknown, and blocks of blockVersionNoSets (written before
// the subject sets) with its set 0, unknown, too.
const (
	blockVersion       byte = 4
	blockVersionNoEnd  byte = 3
	blockVersionNoSets byte = 2
)

func blockKey(start pgq.Offset) []byte {
	k := make([]byte, 9)
	k[0] = prefixBlock
	binary.BigEndian.PutUint64(k[1:], uint64(start))
	return k
}

func lsnKey(lsn pgq.LSN, off pgq.Offset) []byte {
	k := make([]byte, 17)
	k[0] = prefixLSN
	binary.BigEndian.PutUint64(k[1:], uint64(lsn))
	binary.BigEndian.PutUint64(k[9:], uint64(off))
	return k
}

// timeKey orders signed microsecond timestamps by flipping the sign bit.
func timeKey(us int64, off pgq.Offset) []byte {
	k := make([]byte, 17)
	k[0] = prefixTime
	binary.BigEndian.PutUint64(k[1:], uint64(us)^(1<<63))
	binary.BigEndian.PutUint64(k[9:], uint64(off))
	return k
}

func groupKey(name string) []byte {
	k := make([]byte, 1+len(name))
	k[0] = prefixGroup
	copy(k[1:], name)
	return k
}

// prefixBounds returns the key range holding every key with prefix p.
func prefixBounds(p byte) (lower, upper []byte) {
	return []byte{p}, []byte{p + 1}
}

// offsetOfSeekKey extracts the trailing block start of an "l" or "t" key.
func offsetOfSeekKey(k []byte) (pgq.Offset, error) {
	if len(k) != 17 {
		return 0, fmt.Errorf("%w: seek key of %d bytes, want 17", ErrCorrupt, len(k))
	}
	return pgq.Offset(binary.BigEndian.Uint64(k[9:])), nil
}

// stored is an Entry plus the running values the index keeps per offset.
type stored struct {
	Entry
	// cum is the sum of Bytes over every offset indexed up to and
	// including this one since the index was last empty.
	cum uint64
	// maxLSN and maxTime are the running maxima of CommitLSN and
	// CommitTime (µs) over the same span; a block's last ones key "l"
	// and "t".
	maxLSN  pgq.LSN
	maxTime int64
	// set is the id of the record's subject set, 0 unknown (subjects.go);
	// Entry.Subjects is not kept here.
	set uint32
}

// next returns the stored form of e following prev (havePrev false: e
// starts the running values afresh).
func next(prev stored, havePrev bool, e Entry) stored {
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
	return s
}

// encodeBlock encodes consecutive entries (one block, see the package doc
// for the layout).
func encodeBlock(es []stored) []byte {
	v := make([]byte, 0, 32+len(es)*12)
	v = append(v, blockVersion)
	v = binary.AppendUvarint(v, uint64(es[0].Offset))
	v = binary.AppendUvarint(v, uint64(len(es)))
	f := &es[0]
	// The running values before the first entry; a fresh start is told by
	// cum: cum(first) == Bytes(first) and maxima equal to its own values.
	v = binary.AppendUvarint(v, f.cum-uint64(f.Bytes))
	v = binary.AppendUvarint(v, uint64(f.maxLSN))
	v = binary.AppendVarint(v, f.maxTime)
	var lsn pgq.LSN
	var us int64
	for i := range es {
		e := &es[i]
		t := e.CommitTime.UnixMicro()
		v = binary.AppendVarint(v, int64(e.CommitLSN-lsn))
		v = binary.AppendVarint(v, int64(e.EndLSN-e.CommitLSN))
		v = binary.AppendVarint(v, t-us)
		v = binary.AppendUvarint(v, uint64(e.Bytes))
		v = binary.AppendUvarint(v, uint64(e.Changes))
		// The end flag shares the set id's uvarint: one byte for the
		// first 31 sets, two up to 4095.
		v = binary.AppendUvarint(v, uint64(e.set)<<2|uint64(e.End))
		lsn, us = e.CommitLSN, t
	}
	return v
}

// blockReader decodes the entries of a block value one by one, without
// allocating.
type blockReader struct {
	start pgq.Offset
	r     varintReader
	n, i  int
	sets  bool   // version 3 and later: a set id per entry
	ends  bool   // version 4: the end flag with the set id
	cur   stored // the entry next decoded
	us    int64  // cur's commit time in µs (delta base)
	err   error
}

// newBlockReader checks the header of a block value stored under start.
func newBlockReader(start pgq.Offset, v []byte) (*blockReader, error) {
	br := &blockReader{start: start}
	if len(v) == 0 || v[0] < blockVersionNoSets || v[0] > blockVersion {
		return nil, fmt.Errorf("%w: block at offset %d: version %d", ErrCorrupt, start, firstByte(v))
	}
	br.sets, br.ends = v[0] >= blockVersionNoEnd, v[0] >= blockVersion
	br.r = varintReader{b: v[1:]}
	first := pgq.Offset(br.r.uvarint())
	n := br.r.uvarint()
	// The header holds the running values of the first entry; cum is
	// kept before it.
	br.cur.cum = br.r.uvarint()
	br.cur.maxLSN = pgq.LSN(br.r.uvarint())
	br.cur.maxTime = br.r.varint()
	if br.r.bad || first < start || n == 0 || n > blockLen || uint64(first-start)+n > blockLen {
		return nil, fmt.Errorf("%w: block at offset %d: header (first %d, %d entries)", ErrCorrupt, start, first, n)
	}
	br.n = int(n)
	br.cur.Offset = first - 1
	return br, nil
}

// next decodes the next entry into br.cur; false at the end or on a
// corrupt value (br.err).
func (br *blockReader) next() bool {
	if br.i >= br.n || br.err != nil {
		return false
	}
	r, s := &br.r, &br.cur
	lsn := s.CommitLSN + pgq.LSN(r.varint())
	end := lsn + pgq.LSN(r.varint())
	br.us += r.varint()
	us := br.us
	s.Offset++
	s.CommitLSN, s.EndLSN = lsn, end
	s.CommitTime = time.UnixMicro(us).UTC()
	s.Bytes = int(r.uvarint())
	s.Changes = int(r.uvarint())
	if br.sets {
		id := r.uvarint()
		if br.ends {
			s.End = End(id & 3)
			id >>= 2
			if s.End > EndPart {
				r.bad = true
			}
		}
		if id > maxSets {
			r.bad = true
		}
		s.set = uint32(id)
	}
	s.cum += uint64(s.Bytes)
	if br.i > 0 {
		s.maxLSN = max(s.maxLSN, lsn)
		s.maxTime = max(s.maxTime, us)
	}
	br.i++
	if r.bad || (br.i == br.n && len(r.b) != 0) {
		br.err = fmt.Errorf("%w: block at offset %d: entries", ErrCorrupt, br.start)
		return false
	}
	return true
}

// decodeBlock decodes every entry of a block value stored under start.
func decodeBlock(start pgq.Offset, v []byte) ([]stored, error) {
	br, err := newBlockReader(start, v)
	if err != nil {
		return nil, err
	}
	es := make([]stored, 0, br.n)
	for br.next() {
		es = append(es, br.cur)
	}
	if br.err != nil {
		return nil, br.err
	}
	return es, nil
}

// varintReader reads varints, remembering the first failure.
type varintReader struct {
	b   []byte
	bad bool
}

func (r *varintReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *varintReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}
