package journal

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// TailCorruptError is why Open refuses a journal: a bad entry (or missing
// bytes) in the tail segment that a crash cannot have left, so that
// cutting it could lose records that were fsynced and confirmed. Open
// changes nothing on disk when it returns one. It matches ErrCorrupt with
// errors.Is and unwraps to the cause.
type TailCorruptError struct {
	Segment string     // the segment file
	Offset  pgq.Offset // the first record that is bad or missing
	Byte    int64      // its position in Segment
	// Durable is the last record the durable-point marker says was
	// fsynced; DurableKnown is false for a journal without a usable marker
	// (written by a pgq before it), where a valid record after the bad one
	// is the reason for refusing.
	Durable      pgq.Offset
	DurableKnown bool
	Err          error
}

func (e *TailCorruptError) Error() string {
	why := "a valid record follows it and the journal records no durable point"
	if e.DurableKnown {
		why = fmt.Sprintf("at or before the last fsynced record %d", e.Durable)
	}
	return fmt.Sprintf("journal: corrupt record at offset %d in segment %s (byte %d), %s: refusing to open, nothing was changed; inspect it with `pgq journal verify`, cut the journal there with `pgq journal repair --truncate-at %d` (what is cut is lost unless the slot re-sends it): %v",
		e.Offset, e.Segment, e.Byte, why, e.Offset, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *TailCorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause.
func (e *TailCorruptError) Unwrap() error { return e.Err }

// checkTail decides whether the tail segment at path (first offset
// first, contents data, scanned into s) may be cut at s.good: only when
// everything cut lies past the durable point, or, with no durable point
// known, when nothing valid follows the bad entry. It returns a
// *TailCorruptError when it may not, and nil when the tail is sound or
// torn.
func checkTail(path string, first pgq.Offset, data []byte, s entryScan, dp durablePoint, known bool) error {
	bad := first + pgq.Offset(s.count) // the first offset not kept
	e := &TailCorruptError{Segment: path, Offset: bad, Byte: int64(s.good), Durable: dp.last, DurableKnown: known, Err: s.err}
	if !known {
		if s.err != nil && validFollows(data[s.good:]) {
			return e
		}
		return nil
	}
	short := dp.segment == first && dp.end > int64(s.good)
	if bad > dp.last && !short {
		return nil // sound, or a cut past the durable point: a torn tail
	}
	if s.err == nil {
		e.Err = fmt.Errorf("%s holds %d bytes, records up to offset %d were fsynced", filepath.Base(path), len(data), dp.last)
	}
	return e
}

// validFollows reports whether rest, which starts with a bad entry, holds
// a complete entry passing the record check at any later byte: then the
// damage is not the end of the last write (nothing of a crash's torn
// write is followed by a record the journal wrote before it), and with
// no durable point known it must not be cut. It tries every byte, since
// a damaged length prefix hides where the next entry starts.
func validFollows(rest []byte) bool {
	for p := 1; p < len(rest); p++ {
		size, n := binary.Uvarint(rest[p:])
		if n <= 0 || size <= record.HeaderSize || size > uint64(len(rest)-p-n) {
			continue
		}
		payload := rest[p+n : p+n+int(size)]
		if v := payload[0]; v != record.Version && v != record.VersionCompact {
			continue
		}
		if record.CheckStored(payload) == nil {
			return true
		}
	}
	return false
}
