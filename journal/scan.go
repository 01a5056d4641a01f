package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// Scan calls fn for every record at or after from (0: the first), in
// order, reading the segment files directly: no lock, no repair, so it
// works beside a running pgq. An incomplete entry at the very end of the
// last segment (a write in flight) ends the scan quietly; any other bad
// entry returns a *CorruptError naming its offset. fn may stop the scan by
// returning an error, which Scan returns.
func Scan(dir string, from pgq.Offset, fn func(tx *pgq.Transaction) error) error {
	return ScanSized(dir, from, func(tx *pgq.Transaction, _ int) error { return fn(tx) })
}

// ScanSized is Scan that also passes each record's encoded size.
func ScanSized(dir string, from pgq.Offset, fn func(tx *pgq.Transaction, size int) error) error {
	if err := scan(dir, from, false, fn); err != nil {
		return fmt.Errorf("journal: scan %s: %w", dir, err)
	}
	return nil
}

// scan is Scan; with strict, an incomplete last entry is corruption too,
// and so is a gap between segments.
func scan(dir string, from pgq.Offset, strict bool, fn func(tx *pgq.Transaction, size int) error) error {
	segs, err := listSegments(vfs.Default, dir)
	if err != nil {
		return err
	}
	rels, _, err := loadCatalog(vfs.Default, dir)
	if err != nil {
		return err
	}
	lookup := func(id uint64) ([]byte, error) {
		if id > uint64(len(rels)) {
			// A running pgq may have added relations since.
			if more, _, err := loadCatalog(vfs.Default, dir); err == nil {
				rels = more
			}
		}
		if id == 0 || id > uint64(len(rels)) {
			return nil, fmt.Errorf("%w: relation %d not in the catalog (%d relations)", ErrCorrupt, id, len(rels))
		}
		return rels[id-1], nil
	}
	var next pgq.Offset
	for i, seg := range segs {
		if strict && i > 0 && seg.FirstOffset != next {
			return &CorruptError{Offset: next,
				Err: fmt.Errorf("segment %s starts at %d, want %d", filepath.Base(seg.Path), seg.FirstOffset, next)}
		}
		if i+1 < len(segs) && segs[i+1].FirstOffset <= from {
			continue
		}
		data, err := readFile(vfs.Default, seg.Path)
		if err != nil {
			if !strict && errors.Is(err, os.ErrNotExist) {
				continue // removed by retention meanwhile
			}
			return err
		}
		off := seg.FirstOffset
		var fnErr error
		s := scanEntries(data, func(p []byte) error {
			if off < from {
				off++
				return nil
			}
			rec, err := record.Expand(nil, p, lookup)
			if err != nil {
				return err
			}
			tx := &pgq.Transaction{}
			if err := record.DecodeBody(rec[record.HeaderSize:], tx); err != nil {
				return err
			}
			tx.Offset = off
			off++
			if err := fn(tx, len(p)); err != nil {
				fnErr = err
				return errStop
			}
			return nil
		})
		if fnErr != nil {
			return fnErr
		}
		if s.err != nil {
			if !strict && i == len(segs)-1 && isIncompleteTail(data[s.good:]) {
				return nil
			}
			return &CorruptError{Offset: off, Err: fmt.Errorf("%s: %w", filepath.Base(seg.Path), s.err)}
		}
		next = off
	}
	return nil
}

var errStop = errors.New("stop")

// isIncompleteTail reports whether rest is an entry cut short: a length
// prefix that claims more bytes than remain, or a partial prefix.
func isIncompleteTail(rest []byte) bool {
	s := scanEntries(rest, func([]byte) error { return nil })
	return s.count == 0 && s.err != nil
}
