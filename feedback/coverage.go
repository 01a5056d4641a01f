package feedback

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/vfsutil"
)

// CoverageFile is the name of the coverage file inside the journal
// directory.
const CoverageFile = "COVERAGE"

// coverageVersion is the first byte of the coverage file.
const coverageVersion = 1

// coverageSize is version + three u64 + CRC32C.
const coverageSize = 1 + 3*8 + 4

// ErrCoverageCorrupt is returned when the coverage file does not pass its
// checksum or has the wrong size.
var ErrCoverageCorrupt = errors.New("feedback: coverage file corrupt")

// Coverage is the durable statement "every transaction of the slot that
// ends at or below Covered is in the journal, at or below Offset". pgq
// stores it before it confirms an LSN past the journal's last record (an
// idle keepalive advance, transactions that published nothing), so that a
// restart can tell such a harmless advance from a hole.
//
// Offset and EndLSN identify the journal's last record when the coverage
// was stored (0 and 0 for an empty journal). The statement holds only for
// a journal that still ends with that record or has grown past it: a
// journal whose tail was lost (restored from an older backup, a disk that
// lied about fsync) no longer has it, and Covers says so.
type Coverage struct {
	Offset  pgq.Offset
	EndLSN  pgq.LSN
	Covered pgq.LSN
}

// RecordReader is the part of the journal Covers needs.
type RecordReader interface {
	FirstOffset() pgq.Offset
	LastOffset() pgq.Offset
	Read(off pgq.Offset) (*pgq.Transaction, error)
}

// Covers reports whether the coverage still describes j: its record is
// still the one at Offset (or was removed by retention from the front),
// and the journal has not lost a tail past it.
func (c Coverage) Covers(j RecordReader) bool {
	last := j.LastOffset()
	switch {
	case c.Offset == 0:
		// Stored over an empty journal: valid while nothing was lost, which
		// for an empty journal is all that can be said.
		return true
	case c.Offset > last:
		return false
	case c.Offset < j.FirstOffset():
		return true // retention removed it; the journal went on past it
	}
	tx, err := j.Read(c.Offset)
	return err == nil && tx.EndLSN == c.EndLSN
}

func (c Coverage) encode() []byte {
	b := make([]byte, coverageSize)
	b[0] = coverageVersion
	binary.LittleEndian.PutUint64(b[1:], uint64(c.Offset))
	binary.LittleEndian.PutUint64(b[9:], uint64(c.EndLSN))
	binary.LittleEndian.PutUint64(b[17:], uint64(c.Covered))
	binary.LittleEndian.PutUint32(b[25:], crc32.Checksum(b[:25], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func decodeCoverage(b []byte) (Coverage, error) {
	if len(b) != coverageSize || b[0] != coverageVersion ||
		binary.LittleEndian.Uint32(b[25:]) != crc32.Checksum(b[:25], crc32.MakeTable(crc32.Castagnoli)) {
		return Coverage{}, ErrCoverageCorrupt
	}
	return Coverage{
		Offset:  pgq.Offset(binary.LittleEndian.Uint64(b[1:])),
		EndLSN:  pgq.LSN(binary.LittleEndian.Uint64(b[9:])),
		Covered: pgq.LSN(binary.LittleEndian.Uint64(b[17:])),
	}, nil
}

// LoadCoverage reads the coverage file at path; ok is false when there is
// none.
func LoadCoverage(fs vfs.FS, path string) (c Coverage, ok bool, err error) {
	b, ok, err := vfsutil.ReadSmallFile(fs, path, coverageSize)
	if err != nil {
		return Coverage{}, false, fmt.Errorf("feedback: read coverage %s: %w", path, err)
	}
	if !ok {
		return Coverage{}, false, nil
	}
	c, err = decodeCoverage(b)
	if err != nil {
		return Coverage{}, false, fmt.Errorf("%w: %s", err, path)
	}
	return c, true, nil
}

// StoreCoverage replaces the coverage file at path atomically and durably:
// write a temporary file, fsync it, rename it over path, fsync the
// directory. It returns how long that took (the caller's sync histogram).
func StoreCoverage(fs vfs.FS, path string, c Coverage) (time.Duration, error) {
	start := time.Now()
	if err := vfsutil.ReplaceFile(fs, path, c.encode()); err != nil {
		return 0, fmt.Errorf("feedback: store coverage %s: %w", path, err)
	}
	return time.Since(start), nil
}
