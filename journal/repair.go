package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pgq-dev/pgq"
)

// CorruptError reports the first bad record found. It matches ErrCorrupt
// with errors.Is and unwraps to the cause.
type CorruptError struct {
	Offset pgq.Offset
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: corrupt record at offset %d: %v", e.Offset, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// entryScan is the result of walking the entries of one segment file.
type entryScan struct {
	count int   // complete entries that pass the check
	good  int   // bytes up to the end of the last good entry
	err   error // why the walk stopped before the end of data; nil if it did not
}

// scanEntries walks tidwall/wal binary entries (uvarint length + payload)
// and calls check on each payload until one fails or data ends.
func scanEntries(data []byte, check func(payload []byte) error) entryScan {
	var s entryScan
	for s.good < len(data) {
		rest := data[s.good:]
		size, n := binary.Uvarint(rest)
		if n <= 0 {
			s.err = fmt.Errorf("bad entry length prefix at byte %d", s.good)
			return s
		}
		if size > uint64(len(rest)-n) {
			s.err = fmt.Errorf("entry at byte %d claims %d bytes, %d remain", s.good, size, len(rest)-n)
			return s
		}
		if err := check(rest[n : n+int(size)]); err != nil {
			s.err = fmt.Errorf("entry at byte %d: %w", s.good, err)
			return s
		}
		s.good += n + int(size)
		s.count++
	}
	return s
}

// tailSegmentPath returns the segment file that tidwall/wal will treat as
// its tail: the last of the names it loads (20 digits, optionally .START or
// .END), in directory order.
func tailSegmentPath(dir string) (path string, first uint64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", 0, nil
		}
		return "", 0, err
	}
	var names []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || len(name) < 20 {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".START"), ".END")
		if _, ok := segmentIndex(base); ok && (base == name || len(name) == 26 || len(name) == 24) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", 0, nil
	}
	sort.Strings(names)
	name := names[len(names)-1]
	first, _ = segmentIndex(name[:20])
	return filepath.Join(dir, name), first, nil
}

// repairTail cuts the tail segment file after its last complete entry whose
// payload passes the record checksum, and returns the resulting file size.
func repairTail(dir string, logger *slog.Logger) (int, error) {
	path, first, err := tailSegmentPath(dir)
	if err != nil || path == "" {
		return 0, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("repair: %w", err)
	}
	s := scanEntries(data, pgq.CheckRecord)
	if s.err == nil {
		return len(data), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("repair: %w", err)
	}
	err = f.Truncate(int64(s.good))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("repair: truncate %s to %d bytes: %w", path, s.good, err)
	}
	// Entries after the bad one can be well-formed only if they were part
	// of the same unsynced write; count them for the operator.
	after := scanEntries(data[s.good:], func([]byte) error { return nil }).count
	logger.Warn("journal: cut torn tail",
		"file", path,
		"kept_records", s.count,
		"first_cut_offset", first+uint64(s.count),
		"cut_bytes", len(data)-s.good,
		"cut_entries", after,
		"reason", s.err.Error())
	return s.good, nil
}

// Summary describes a verified journal.
type Summary struct {
	Records    uint64
	First      pgq.Offset
	Last       pgq.Offset
	LastEndLSN pgq.LSN
}

// Verify decodes every record in dir without modifying anything (no lock,
// no repair): run it on a stopped journal, or expect the tail of a running
// one to be in flight. On the first bad record, a torn tail included, it
// returns a *CorruptError (matching ErrCorrupt) naming its offset.
func Verify(dir string) (Summary, error) {
	var sum Summary
	err := scan(dir, 0, true, func(tx *pgq.Transaction) error {
		if sum.First == 0 {
			sum.First = tx.Offset
		}
		sum.Records++
		sum.Last = tx.Offset
		sum.LastEndLSN = tx.EndLSN
		return nil
	})
	if err != nil {
		return sum, fmt.Errorf("journal: verify %s: %w", dir, err)
	}
	return sum, nil
}
