package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// TruncateResult describes what TruncateAt cut.
type TruncateResult struct {
	Segment  string     // the segment file that now ends the journal
	KeptLast pgq.Offset // the last record kept (the cut offset - 1)
	// CutEntries counts the entries cut as their framing shows them (a
	// damaged length prefix hides the entries after it from the count).
	CutEntries      uint64
	CutBytes        int64
	RemovedSegments int // later segment files removed whole
}

// TruncateAt is the operator's repair of a corrupt journal (`pgq journal
// repair --truncate-at`): it removes the records at and after off, keeping
// those before it, so that Open, which never cuts what was fsynced,
// accepts the journal again. What it cuts was fsynced and may have been
// confirmed to PostgreSQL: it is lost unless the slot can send it again.
//
// It takes the directory lock (ErrLocked while a pgq runs on it) and
// refuses, changing nothing, when off is not a record of the journal
// (ErrNotFound) or a record before off in its segment (in the segment
// before, when off is a segment's first record) is bad too (ErrCorrupt:
// cut lower). It lowers the durable-point marker to off-1
// first, removes the later segment files (last first) and rewrites the
// segment holding off to its prefix (temporary file, fsync, rename,
// directory fsync), so a crash leaves a journal that Open accepts.
// Options.Dir, FS, NoSync and Logger are used.
func TruncateAt(opts Options, off pgq.Offset) (TruncateResult, error) {
	var res TruncateResult
	if err := opts.Validate(); err != nil {
		return res, err
	}
	j := newJournal(opts)
	wrap := func(err error) error { return fmt.Errorf("journal: truncate %s at %d: %w", j.dir, off, err) }
	if _, err := j.fs.Stat(j.dir); err != nil {
		return res, wrap(err)
	}
	lk, err := j.fs.Lock(j.fs.PathJoin(j.dir, LockFile))
	if err != nil {
		if lockHeld(err) {
			return res, wrap(fmt.Errorf("%w (is pgq running? stop it first): %v", ErrLocked, err))
		}
		return res, wrap(fmt.Errorf("lock: %w", err))
	}
	defer lk.Close()
	res, err = j.truncateAt(off)
	if err != nil {
		return res, wrap(err)
	}
	return res, nil
}

// truncateAt is TruncateAt holding the lock.
func (j *Journal) truncateAt(off pgq.Offset) (TruncateResult, error) {
	var res TruncateResult
	segs, err := listSegments(j.fs, j.dir)
	if err != nil {
		return res, err
	}
	if len(segs) == 0 || off < segs[0].FirstOffset || off == 0 {
		return res, fmt.Errorf("%w: the journal's records start at %d", ErrNotFound, firstOf(segs))
	}
	i := len(segs) - 1
	for segs[i].FirstOffset > off {
		i--
	}
	seg := segs[i]
	data, err := readFile(j.fs, seg.Path)
	if err != nil {
		return res, err
	}
	keep, err := keptPrefix(data, seg.FirstOffset, off)
	if err != nil {
		return res, err
	}
	if keep == 0 && i > 0 {
		if err := j.checkBefore(segs[i-1], seg.FirstOffset); err != nil {
			return res, err
		}
	}
	if keep == len(data) && i == len(segs)-1 {
		return res, fmt.Errorf("%w: the journal ends at offset %d, nothing to cut", ErrNotFound, off-1)
	}
	res = TruncateResult{Segment: seg.Path, KeptLast: off - 1, RemovedSegments: len(segs) - 1 - i,
		CutBytes: int64(len(data) - keep), CutEntries: countEntries(data[keep:])}
	for _, later := range segs[i+1:] {
		res.CutBytes += later.Bytes
		if b, err := readFile(j.fs, later.Path); err == nil {
			res.CutEntries += countEntries(b)
		}
	}
	m, err := openMarker(j.fs, j.dir, j.opts.NoSync, j.onSync, j.syncDir)
	if err != nil {
		return res, err
	}
	defer m.close()
	if err := m.lower(off - 1); err != nil {
		return res, err
	}
	for k := len(segs) - 1; k > i; k-- {
		if err := j.removeSegment(segs[k].Path); err != nil {
			return res, err
		}
	}
	if err := j.syncDir(); err != nil {
		return res, err
	}
	// The cut segment becomes the open tail: its seal-time checksum no
	// longer describes it and a new one is written when it seals again.
	if err := j.removeFile(seg.Path + SumSuffix); err != nil {
		return res, err
	}
	if err := j.rewrite(seg.Path, data[:keep]); err != nil {
		return res, err
	}
	j.log.Warn("journal: truncated by the operator; the records cut are lost unless the slot sends them again",
		"dir", j.dir, "file", seg.Path, "first_cut_offset", off, "kept_last_offset", off-1,
		"cut_entries", res.CutEntries, "cut_bytes", res.CutBytes, "removed_segments", res.RemovedSegments)
	return res, nil
}

// keptPrefix returns the bytes of the entries of a segment (first record
// first) before offset off, each of which must be complete and pass the
// record check.
func keptPrefix(data []byte, first, off pgq.Offset) (int, error) {
	pos := 0
	for o := first; o < off; o++ {
		if pos == len(data) {
			return 0, fmt.Errorf("%w: the journal ends at offset %d", ErrNotFound, o-1)
		}
		size, n := binary.Uvarint(data[pos:])
		if n <= 0 || size > uint64(len(data)-pos-n) {
			return 0, &CorruptError{Offset: o, Err: fmt.Errorf("bad entry framing at byte %d: cut at %d or lower", pos, o)}
		}
		if err := record.CheckStored(data[pos+n : pos+n+int(size)]); err != nil {
			return 0, &CorruptError{Offset: o, Err: fmt.Errorf("cut at %d or lower: %w", o, err)}
		}
		pos += n + int(size)
	}
	return pos, nil
}

// checkBefore checks the records of prev, the segment before the one a
// cut starts at its first record (next): those are the records right
// before the cut, as the ones before it in its segment are for a cut
// inside one. A record of 256 KiB or more ends its segment (it takes it
// past the segment size), so a damaged one is often the last before a
// segment's start, and a cut there would otherwise remove good records
// and keep the bad one.
func (j *Journal) checkBefore(prev Segment, next pgq.Offset) error {
	data, err := readFile(j.fs, prev.Path)
	if err != nil {
		return err
	}
	_, err = keptPrefix(data, prev.FirstOffset, next)
	if errors.Is(err, ErrNotFound) {
		o := prev.FirstOffset + pgq.Offset(countEntries(data))
		return &CorruptError{Offset: o, Err: fmt.Errorf("segment %s ends before offset %d: cut at %d or lower", prev.Path, next, o)}
	}
	return err
}

// countEntries counts the entries data's framing shows.
func countEntries(data []byte) uint64 {
	return uint64(scanEntries(data, func([]byte) error { return nil }).count)
}

func firstOf(segs []Segment) pgq.Offset {
	if len(segs) == 0 {
		return 0
	}
	return segs[0].FirstOffset
}

// removeSegment removes a segment file and its seal-time checksum file.
func (j *Journal) removeSegment(path string) error {
	if err := j.removeFile(path + SumSuffix); err != nil {
		return err
	}
	return j.removeFile(path)
}

// removeFile removes a file that may already be gone.
func (j *Journal) removeFile(path string) error {
	if err := j.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
