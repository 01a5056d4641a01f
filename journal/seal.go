package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
)

// SumSuffix is appended to a sealed segment file's name to name its
// checksum file (see the package documentation, Sealed segments).
const SumSuffix = ".sum"

// sumTmpSuffix names the temporary file a checksum file is written to
// before it is renamed into place.
const sumTmpSuffix = ".sum.tmp"

// sumMagic starts every checksum file.
const sumMagic = "PGQS"

// sumVersion is the checksum file's format version.
const sumVersion = 1

// sumSize is the size of a checksum file: magic, version, length, CRC32C
// of the segment, CRC32C of the preceding bytes.
const sumSize = 4 + 1 + 8 + 4 + 4

// segmentSum is what a checksum file says about its segment file.
type segmentSum struct {
	Bytes int64  // the segment file's length
	CRC   uint32 // CRC32C (Castagnoli) of its bytes
}

// encodeSum returns the bytes of the checksum file for s.
func encodeSum(s segmentSum) []byte {
	b := make([]byte, 0, sumSize)
	b = append(b, sumMagic...)
	b = append(b, sumVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Bytes))
	b = binary.LittleEndian.AppendUint32(b, s.CRC)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errBadSum is returned by decodeSum for a checksum file that is not one
// (torn by a crash, damaged): the scrub treats it as missing.
var errBadSum = errors.New("not a valid checksum file")

// decodeSum parses a checksum file.
func decodeSum(b []byte) (segmentSum, error) {
	if len(b) != sumSize || string(b[:4]) != sumMagic || b[4] != sumVersion ||
		crc32.Checksum(b[:sumSize-4], castagnoli) != binary.LittleEndian.Uint32(b[sumSize-4:]) {
		return segmentSum{}, errBadSum
	}
	n := binary.LittleEndian.Uint64(b[5:13])
	if n > 1<<62 {
		return segmentSum{}, errBadSum
	}
	return segmentSum{Bytes: int64(n), CRC: binary.LittleEndian.Uint32(b[13:17])}, nil
}

// onSeal is internal/wal's OnSeal hook: it writes the checksum file of the
// segment the log just sealed, from the length and CRC32C the log kept as
// it wrote the file (its big records are not in memory to sum again).
// The log's directory fsync, which follows before the write that rolled
// returns, makes its name durable.
func (j *Journal) onSeal(path string, size int64, crc uint32) error {
	s := segmentSum{Bytes: size, CRC: crc}
	if err := j.writeSum(path, s); err != nil {
		return fmt.Errorf("seal %s: %w", path, err)
	}
	return nil
}

// writeSum writes the checksum file of the segment at path: to a
// temporary file, fsynced (unless NoSync), then renamed into place. The
// caller fsyncs the directory.
func (j *Journal) writeSum(path string, s segmentSum) error {
	return j.replaceFile(path+sumTmpSuffix, path+SumSuffix, encodeSum(s))
}

// readSum returns the checksum recorded for the segment at path; ok is
// false when there is no valid checksum file (none written yet: a journal
// from before checksum files, a crash between the seal and the rename,
// the first segment after a TruncateFront; or a damaged one).
func (j *Journal) readSum(path string) (s segmentSum, ok bool, err error) {
	f, err := j.fs.Open(path + SumSuffix)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return segmentSum{}, false, nil
		}
		return segmentSum{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, sumSize+1))
	if err != nil {
		return segmentSum{}, false, err
	}
	s, err = decodeSum(b)
	return s, err == nil, nil
}

// removeOrphanSums removes the checksum files whose segment file is gone
// (retention removed it, or a truncation renamed it). names is a listing
// of the journal directory.
func (j *Journal) removeOrphanSums(names []string) {
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	for _, n := range names {
		seg, ok := strings.CutSuffix(n, SumSuffix)
		if !ok || have[seg] {
			continue
		}
		if _, isSeg := segmentIndex(seg); !isSeg {
			continue
		}
		if err := j.fs.Remove(j.fs.PathJoin(j.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			j.log.Warn("journal: remove orphan checksum file", "file", n, "err", err.Error())
		}
	}
}
