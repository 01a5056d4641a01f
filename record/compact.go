package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/pgq-dev/pgq"
)

// VersionCompact is the version byte of the journal's stored form of a
// record (Compact): a Version 1 record whose relation table is replaced by
// the ids of its relations in the journal's relation catalog and whose end
// LSN is stored as its distance from the commit LSN (layout: the package
// documentation, # Format). A compact record does not decode alone:
// Expand turns it back into the Version 1 record, byte for byte, given the
// catalog.
const VersionCompact = 2

// Compact appends to dst the compact form of the framed Version 1 record
// rec, which must encode its xid and LSNs in the shortest form (Append
// and Restamp do). intern returns the catalog id of one relation, given its encoded
// bytes (one element of the relation table: [schema, table, columns]).
// Errors wrap ErrBadVersion, ErrChecksum or ErrCorruptRecord, or are
// intern's.
func Compact(dst, rec []byte, intern func(rel []byte) (uint64, error)) ([]byte, error) {
	var ids [8]uint64
	l, err := parseForCompact(rec, ids[:0], intern)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = l.appendPrefix(dst, rec)
	dst = append(dst, rec[l.changesAt:]...)
	seal(dst[start:])
	return dst, nil
}

// AppendCompact appends to dst the compact form of tx's record, byte for
// byte what Compact makes of Append(tx), in one pass: the changes are
// encoded once, where they are stored, and checksummed once. Each
// relation is encoded into scratch for intern (the grown scratch is
// returned for reuse). It fails, before appending anything, where
// Compact refuses (tx's end LSN before its commit LSN) and on intern's
// errors; the caller then stores Append(tx) as is.
func AppendCompact(dst []byte, tx *pgq.Transaction, scratch []byte, intern func(rel []byte) (uint64, error)) (out, scratchOut []byte, err error) {
	if tx.EndLSN < tx.CommitLSN {
		return dst, scratch, fmt.Errorf("%w: end LSN %d before commit LSN %d", ErrCorruptRecord, tx.EndLSN, tx.CommitLSN)
	}
	var relsBuf [8]relRef
	rels := relationsOf(tx, relsBuf[:0])
	var idsBuf [8]uint64
	ids := idsBuf[:0]
	for k := range rels {
		scratch = appendRelation(scratch[:0], &rels[k])
		id, err := intern(scratch)
		if err != nil {
			return dst, scratch, err
		}
		ids = append(ids, id)
	}
	start := len(dst)
	nbody := bodyLen(tx)
	dst = append(dst, VersionCompact, 0, 0, 0, 0)
	dst = appendHeaderEnd(dst, tx, nbody, uint64(tx.EndLSN-tx.CommitLSN))
	dst = appendIDs(dst, ids)
	dst = appendChanges(dst, tx, rels, nbody)
	seal(dst[start:])
	return dst, scratch, nil
}

// appendIDs appends a compact record's relation table: the catalog ids.
func appendIDs(dst []byte, ids []uint64) []byte {
	dst = appendArrayHdr(dst, len(ids))
	for _, id := range ids {
		dst = appendUint(dst, id)
	}
	return dst
}

// CompactInPlace is Compact writing the compact form over rec itself
// (never longer: relation ids replace whole relations), so that a large
// record is not copied: it returns the compact record, a prefix of rec.
// scratch holds the rewritten head (header to relation ids) meanwhile;
// the grown scratch is returned for reuse. On error rec is unchanged.
func CompactInPlace(rec, scratch []byte, intern func(rel []byte) (uint64, error)) (out, scratchOut []byte, err error) {
	var ids [8]uint64
	l, err := parseForCompact(rec, ids[:0], intern)
	if err != nil {
		return nil, scratch, err
	}
	head := l.appendPrefix(scratch[:0], rec)
	if len(head) > l.changesAt {
		// Cannot happen for a record in the shortest encoding; refuse
		// rather than overwrite changes not yet moved.
		return nil, head, fmt.Errorf("%w: compact head of %d bytes longer than the %d it replaces", ErrCorruptRecord, len(head), l.changesAt)
	}
	// parseForCompact checked rec's checksum: the changes' part of it
	// carries over (crc.go).
	oldCRC := binary.LittleEndian.Uint32(rec[1:])
	oldHeadCRC := crc32.Checksum(rec[HeaderSize:l.changesAt], castagnoli)
	n := copy(rec[len(head):], rec[l.changesAt:])
	copy(rec, head)
	out = rec[:len(head)+n]
	resealHead(out, len(head), oldCRC, oldHeadCRC)
	return out, head, nil
}

// compactLayout is what Compact keeps of a Version 1 record: the header
// fields it re-encodes, where the unchanged spans are, the relation ids.
type compactLayout struct {
	nbody            int
	xid, commit, end uint64
	restAt, tableAt  int // rec offsets: commit time..final, the relation table
	changesAt        int // rec offset of the change array (and what follows)
	ids              []uint64
}

// parseForCompact checks rec and interns its relations (ids are appended
// to ids).
func parseForCompact(rec []byte, ids []uint64, intern func(rel []byte) (uint64, error)) (compactLayout, error) {
	var l compactLayout
	if err := Check(rec); err != nil {
		return l, err
	}
	d := newReader(rec[HeaderSize:])
	l.nbody = d.bodyArray()
	l.xid = d.Uint(math.MaxUint32, "xid")
	l.commit = d.Uint(math.MaxUint64, "commit LSN")
	l.end = d.Uint(math.MaxUint64, "end LSN")
	rest := d.P // commit time, origin, part, final
	if d.Err == nil {
		// Expand re-encodes these three in the shortest form: only a
		// record written so comes back byte for byte.
		var canon [32]byte
		c := appendUint(appendUint(appendUint(appendArrayHdr(canon[:0], l.nbody), l.xid), l.commit), l.end)
		if string(c) != string(d.B[:rest]) {
			d.Fail("header not in the shortest encoding")
		}
	}
	d.Int64()
	d.Bytes()
	d.Uint(math.MaxUint32, "part")
	d.Bool()
	tableAt := d.P
	nrel := d.ArrayLen()
	if d.Err == nil && l.end < l.commit {
		d.Fail("end LSN %d before commit LSN %d", l.end, l.commit)
	}
	if d.Err != nil {
		return l, d.Err
	}
	for k := 0; k < nrel; k++ {
		from := d.P
		d.skipRelation()
		if d.Err != nil {
			return l, d.Err
		}
		id, err := intern(d.B[from:d.P])
		if err != nil {
			return l, err
		}
		ids = append(ids, id)
	}
	l.restAt, l.tableAt, l.changesAt = HeaderSize+rest, HeaderSize+tableAt, HeaderSize+d.P
	l.ids = ids
	return l, nil
}

// appendPrefix appends the compact record's head: the framing with a zero
// checksum, the re-encoded header fields, the unchanged span between them
// and the relation ids.
func (l *compactLayout) appendPrefix(dst, rec []byte) []byte {
	dst = append(dst, VersionCompact, 0, 0, 0, 0)
	dst = appendArrayHdr(dst, l.nbody)
	dst = appendUint(dst, l.xid)
	dst = appendUint(dst, l.commit)
	dst = appendUint(dst, l.end-l.commit)
	dst = append(dst, rec[l.restAt:l.tableAt]...)
	return appendIDs(dst, l.ids)
}

// Expand appends to dst the Version 1 record a compact record was made
// from, byte for byte; lookup returns a relation's encoded bytes by
// catalog id. A Version 1 record is appended as is, after Check. Errors
// wrap ErrBadVersion, ErrChecksum or ErrCorruptRecord, or are lookup's.
func Expand(dst, rec []byte, lookup func(id uint64) ([]byte, error)) ([]byte, error) {
	if len(rec) > 0 && rec[0] == Version {
		if err := Check(rec); err != nil {
			return dst, err
		}
		return append(dst, rec...), nil
	}
	if len(rec) < HeaderSize {
		return dst, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptRecord, len(rec), HeaderSize)
	}
	if rec[0] != VersionCompact {
		return dst, fmt.Errorf("%w: %d", ErrBadVersion, rec[0])
	}
	want := binary.LittleEndian.Uint32(rec[1:5])
	if got := crc32.Checksum(rec[HeaderSize:], castagnoli); got != want {
		return dst, fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	d := newReader(rec[HeaderSize:])
	nbody := d.bodyArray()
	xid := d.Uint(math.MaxUint32, "xid")
	commit := d.Uint(math.MaxUint64, "commit LSN")
	delta := d.Uint(math.MaxUint64, "end LSN distance")
	rest := d.P
	d.Int64()
	d.Bytes()
	d.Uint(math.MaxUint32, "part")
	d.Bool()
	tableAt := d.P
	nrel := d.ArrayLen()
	if d.Err == nil && commit+delta < commit {
		d.Fail("end LSN overflows")
	}
	if d.Err != nil {
		return dst, d.Err
	}
	// The relations first, so that dst grows once.
	var relsBuf [8][]byte
	rels := relsBuf[:0]
	size := len(rec) + 16
	for k := 0; k < nrel; k++ {
		id := d.Uint(math.MaxUint64, "relation id")
		if d.Err != nil {
			return dst, d.Err
		}
		rel, err := lookup(id)
		if err != nil {
			return dst, err
		}
		rels = append(rels, rel)
		size += len(rel)
	}
	start := len(dst)
	dst = slices.Grow(dst, size)
	dst = append(dst, Version, 0, 0, 0, 0)
	dst = appendArrayHdr(dst, nbody)
	dst = appendUint(dst, xid)
	dst = appendUint(dst, commit)
	dst = appendUint(dst, commit+delta)
	dst = append(dst, d.B[rest:tableAt]...)
	dst = appendArrayHdr(dst, nrel)
	for _, rel := range rels {
		dst = append(dst, rel...)
	}
	dst = append(dst, d.B[d.P:]...)
	seal(dst[start:])
	return dst, nil
}

// CheckRelation reports whether rel is one well-formed element of a
// relation table (what Compact passes to intern).
func CheckRelation(rel []byte) error {
	d := newReader(rel)
	d.skipRelation()
	if d.Err == nil && d.P != len(rel) {
		d.Fail("%d trailing bytes after the relation", len(rel)-d.P)
	}
	return d.Err
}

// CheckStored is Check for what the journal stores: a Version 1 or a
// compact record (VersionCompact), version byte and checksum only.
func CheckStored(data []byte) error {
	if len(data) > 0 && data[0] == VersionCompact {
		if len(data) < HeaderSize {
			return fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptRecord, len(data), HeaderSize)
		}
		want := binary.LittleEndian.Uint32(data[1:5])
		if got := crc32.Checksum(data[HeaderSize:], castagnoli); got != want {
			return fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
		}
		return nil
	}
	return Check(data)
}
