package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
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

// repairSuffix names the temporary file a repair writes the kept prefix
// of the tail to before renaming it over the tail (vfs.File has no
// Truncate). tidwall/wal ignores such names; Open removes leftovers.
const repairSuffix = ".REPAIR"

// tailSegmentPath returns the segment file that tidwall/wal will treat as
// its tail: the last of the names it loads (20 digits, optionally .START or
// .END), in directory order, and the leftover repair files, which the
// caller removes once it decided to open the journal.
func (j *Journal) tailSegmentPath() (path string, first uint64, leftovers []string, err error) {
	names, err := j.fs.List(j.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", 0, nil, nil
		}
		return "", 0, nil, err
	}
	var segs []string
	for _, name := range names {
		if strings.HasSuffix(name, repairSuffix) {
			leftovers = append(leftovers, j.fs.PathJoin(j.dir, name))
			continue
		}
		if len(name) < 20 {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".START"), ".END")
		if _, ok := segmentIndex(base); ok && (base == name || len(name) == 26 || len(name) == 24) {
			if fi, err := j.fs.Stat(j.fs.PathJoin(j.dir, name)); err != nil {
				return "", 0, nil, err
			} else if !fi.IsDir() {
				segs = append(segs, name)
			}
		}
	}
	if len(segs) == 0 {
		return "", 0, leftovers, nil
	}
	slices.Sort(segs)
	name := segs[len(segs)-1]
	first, _ = segmentIndex(name[:20])
	return j.fs.PathJoin(j.dir, name), first, leftovers, nil
}

// repairTail cuts the tail segment file after its last complete entry whose
// payload passes the record checksum, when checkTail allows it: the cut
// lies past the durable point dp (or, with none known, nothing valid
// follows the bad entry). Otherwise it returns a *TailCorruptError and
// has changed nothing. It writes the kept prefix to a temporary file,
// fsyncs it, renames it over the tail and fsyncs the directory, so a crash
// during the repair leaves the old or the new tail.
func (j *Journal) repairTail(dp durablePoint, known bool) error {
	path, first, leftovers, err := j.tailSegmentPath()
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	var data []byte
	if path != "" {
		if data, err = readFile(j.fs, path); err != nil {
			return fmt.Errorf("repair: %w", err)
		}
	} else if !known || dp.last == 0 {
		return j.removeAll(leftovers)
	} else {
		return &TailCorruptError{Segment: j.dir, Offset: dp.last, Durable: dp.last, DurableKnown: true,
			Err: fmt.Errorf("no segment file, records up to offset %d were fsynced", dp.last)}
	}
	s := scanEntries(data, record.CheckStored)
	if err := checkTail(path, pgq.Offset(first), data, s, dp, known); err != nil {
		return err
	}
	if err := j.removeAll(leftovers); err != nil || s.err == nil {
		return err
	}
	if err := j.rewrite(path, data[:s.good]); err != nil {
		return fmt.Errorf("repair: truncate %s to %d bytes: %w", path, s.good, err)
	}
	// Entries after the bad one can be well-formed only if they were part
	// of the same unsynced write; count them for the operator.
	after := scanEntries(data[s.good:], func([]byte) error { return nil }).count
	attrs := []any{"file", path,
		"kept_records", s.count,
		"first_cut_offset", first + uint64(s.count),
		"cut_bytes", len(data) - s.good,
		"cut_entries", after}
	if known {
		attrs = append(attrs, "durable_offset", dp.last)
	}
	j.log.Warn("journal: cut torn tail", append(attrs, "reason", s.err.Error())...)
	return nil
}

// removeAll removes the files at paths (leftover repair files).
func (j *Journal) removeAll(paths []string) error {
	for _, p := range paths {
		if err := j.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("repair: %w", err)
		}
	}
	return nil
}

// rewrite atomically replaces the file at path with data.
func (j *Journal) rewrite(path string, data []byte) error {
	if err := j.replaceFile(path+repairSuffix, path, data); err != nil {
		return err
	}
	return j.syncDir()
}

// replaceFile writes data to tmp, fsyncs it (unless NoSync) and renames
// it over final, so final holds its old bytes or data, never a mix; tmp
// is removed on failure. The caller fsyncs the directory.
func (j *Journal) replaceFile(tmp, final string, data []byte) error {
	f, err := j.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err = f.Write(slices.Clone(data)); err == nil && !j.opts.NoSync {
		start := time.Now()
		err = f.Sync()
		j.onSync(tmp, time.Since(start))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = j.fs.Rename(tmp, final)
	}
	if err != nil {
		_ = j.fs.Remove(tmp)
		return err
	}
	return nil
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
	err := scan(dir, 0, true, func(tx *pgq.Transaction, _ int) error {
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
