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
	prefixOffset byte = 'o' // "o" + be64(offset) → entry value
	prefixLSN    byte = 'l' // "l" + be64(maxCommitLSN) + be64(offset) → empty
	prefixTime   byte = 't' // "t" + be64(maxCommitMicros ^ 1<<63) + be64(offset) → empty
	prefixGroup  byte = 'g' // "g" + name → opaque group value
)

// keyLast holds be64(highest indexed offset). It sorts under 'm', apart
// from every derived family.
var keyLast = []byte("m/last")

// entryVersion is the first byte of every "o" value.
const entryVersion byte = 1

// entryValueLen is the encoded length of an "o" value (version 1).
const entryValueLen = 1 + 9*8

func offsetKey(off pgq.Offset) []byte {
	k := make([]byte, 9)
	k[0] = prefixOffset
	binary.BigEndian.PutUint64(k[1:], uint64(off))
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

// offsetOfSeekKey extracts the trailing offset of an "l" or "t" key.
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
	// CommitTime (µs) over the same span; they key "l" and "t".
	maxLSN  pgq.LSN
	maxTime int64
}

func encodeStored(s stored) []byte {
	v := make([]byte, entryValueLen)
	v[0] = entryVersion
	b := v[1:]
	binary.BigEndian.PutUint64(b[0:], uint64(s.CommitLSN))
	binary.BigEndian.PutUint64(b[8:], uint64(s.EndLSN))
	binary.BigEndian.PutUint64(b[16:], uint64(s.CommitTime.UnixMicro()))
	binary.BigEndian.PutUint64(b[24:], uint64(s.Bytes))
	binary.BigEndian.PutUint64(b[32:], uint64(s.Changes))
	binary.BigEndian.PutUint64(b[40:], s.cum)
	binary.BigEndian.PutUint64(b[48:], uint64(s.maxLSN))
	binary.BigEndian.PutUint64(b[56:], uint64(s.maxTime))
	binary.BigEndian.PutUint64(b[64:], 0) // reserved
	return v
}

func decodeStored(off pgq.Offset, v []byte) (stored, error) {
	if len(v) != entryValueLen || v[0] != entryVersion {
		return stored{}, fmt.Errorf("%w: entry at offset %d: %d bytes, version %d", ErrCorrupt, off, len(v), firstByte(v))
	}
	b := v[1:]
	var s stored
	s.Offset = off
	s.CommitLSN = pgq.LSN(binary.BigEndian.Uint64(b[0:]))
	s.EndLSN = pgq.LSN(binary.BigEndian.Uint64(b[8:]))
	s.CommitTime = time.UnixMicro(int64(binary.BigEndian.Uint64(b[16:]))).UTC()
	s.Bytes = int(binary.BigEndian.Uint64(b[24:]))
	s.Changes = int(binary.BigEndian.Uint64(b[32:]))
	s.cum = binary.BigEndian.Uint64(b[40:])
	s.maxLSN = pgq.LSN(binary.BigEndian.Uint64(b[48:]))
	s.maxTime = int64(binary.BigEndian.Uint64(b[56:]))
	return s, nil
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}
