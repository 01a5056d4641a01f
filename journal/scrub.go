package journal

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
	"golang.org/x/time/rate"
)

// DefaultScrubRate is the scrub's read rate (bytes per second) when
// ScrubOptions.Rate is zero.
const DefaultScrubRate = 16 << 20

// DefaultScrubPause is the wait between two scrub passes when
// ScrubOptions.Pause is zero.
const DefaultScrubPause = time.Minute

// Corruption is the first corruption the journal saw (Journal.Corruption):
// by a read (a consumer's fetch) or by the scrub.
type Corruption struct {
	// Segment is the base name of the segment file holding it; empty
	// when it is no longer known (the file was removed meanwhile).
	Segment string
	// Offset is the first record found bad (for a read: the one read).
	Offset pgq.Offset
	// Reason says what was wrong.
	Reason string
	// Source is "read" or "scrub".
	Source string
	// At is when it was found.
	At time.Time
}

// Error describes c in one line.
func (c *Corruption) Error() string {
	seg := c.Segment
	if seg == "" {
		seg = "?"
	}
	return fmt.Sprintf("journal: corrupt record at offset %d (segment %s, found by %s): %s", c.Offset, seg, c.Source, c.Reason)
}

// ScrubStatus is the scrub's progress (Journal.ScrubStatus).
type ScrubStatus struct {
	// Running is true while RunScrub runs.
	Running bool
	// Passes counts the completed passes over every sealed segment.
	Passes uint64
	// Segments and Bytes count the sealed segments and their bytes
	// verified, over every pass.
	Segments uint64
	Bytes    uint64
	// SumsWritten counts the checksum files the scrub wrote for sealed
	// segments that had none.
	SumsWritten uint64
	// LastPassEnd is when the last complete pass ended (zero: none yet).
	LastPassEnd time.Time
}

// ScrubOptions configure RunScrub.
type ScrubOptions struct {
	// Rate bounds the scrub's reads, in bytes per second; zero means
	// DefaultScrubRate (16 MiB/s).
	Rate int64
	// Pause is the wait between two passes; zero means
	// DefaultScrubPause (one minute).
	Pause time.Duration
}

// Validate reports whether the options are usable.
func (o ScrubOptions) Validate() error {
	if o.Rate < 0 {
		return fmt.Errorf("journal: scrub options: Rate %d is negative", o.Rate)
	}
	if o.Pause < 0 {
		return fmt.Errorf("journal: scrub options: Pause %v is negative", o.Pause)
	}
	return nil
}

// scrubState is the corruption and scrub bookkeeping of a Journal.
type scrubState struct {
	// mu guards the fields below; held briefly, never across I/O.
	mu      sync.Mutex
	corrupt *Corruption
	status  ScrubStatus
}

// Corruption returns the first corruption the journal saw since Open (by
// a read or the scrub), nil when none.
func (j *Journal) Corruption() *Corruption {
	j.scrub.mu.Lock()
	defer j.scrub.mu.Unlock()
	if j.scrub.corrupt == nil {
		return nil
	}
	c := *j.scrub.corrupt
	return &c
}

// ScrubStatus returns the scrub's progress.
func (j *Journal) ScrubStatus() ScrubStatus {
	j.scrub.mu.Lock()
	defer j.scrub.mu.Unlock()
	return j.scrub.status
}

// corruptRead returns the *CorruptError of a read of off that failed with
// cause, and notes it as the journal's first corruption if it is.
func (j *Journal) corruptRead(off pgq.Offset, cause error) *CorruptError {
	e := &CorruptError{Offset: off, Err: cause}
	j.scrub.mu.Lock()
	known := j.scrub.corrupt != nil
	j.scrub.mu.Unlock()
	if !known {
		seg := ""
		if segs, err := listSegments(j.fs, j.dir); err == nil {
			for _, s := range segs {
				if s.FirstOffset <= off {
					seg = filepath.Base(s.Path)
				}
			}
		}
		j.noteCorrupt(&Corruption{Segment: seg, Offset: off, Reason: cause.Error(), Source: "read", At: time.Now().UTC()})
	}
	return e
}

// noteCorrupt records c unless a corruption is known already, and logs it.
func (j *Journal) noteCorrupt(c *Corruption) {
	j.scrub.mu.Lock()
	first := j.scrub.corrupt == nil
	if first {
		j.scrub.corrupt = c
	}
	j.scrub.mu.Unlock()
	if first {
		j.log.Error("journal: corrupt record; consumers cannot read past it until an operator repairs the journal (pgq journal verify)",
			"dir", j.dir, "segment", c.Segment, "offset", c.Offset, "found_by", c.Source, "reason", c.Reason)
	}
}

// RunScrub verifies the sealed segments (every segment file but the last)
// over and over, pausing o.Pause between passes, until ctx is done (it
// then returns nil). Its reads are paced at o.Rate bytes per second. Each
// segment file is read once per pass, in chunks: its CRC32C is compared
// with its checksum file (see the package documentation), each entry's
// record is checked (version byte and CRC32C), and its record count with
// the offsets of the next segment. A segment without a valid checksum file
// whose records all verify gets one. The first corruption found is noted
// (Corruption) and logged; the scrub goes on with the next segment. It
// never changes a segment file.
func (j *Journal) RunScrub(ctx context.Context, o ScrubOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Rate == 0 {
		o.Rate = DefaultScrubRate
	}
	if o.Pause == 0 {
		o.Pause = DefaultScrubPause
	}
	chunk := int(min(o.Rate, 256<<10))
	lim := rate.NewLimiter(rate.Limit(o.Rate), chunk)
	j.setScrubRunning(true)
	defer j.setScrubRunning(false)
	for {
		if err := j.scrubPass(ctx, lim, chunk); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrClosed) {
				return err
			}
			j.log.Warn("journal: scrub pass failed; retrying after the pause", "err", err.Error())
		} else {
			j.scrub.mu.Lock()
			j.scrub.status.Passes++
			j.scrub.status.LastPassEnd = time.Now().UTC()
			j.scrub.mu.Unlock()
		}
		t := time.NewTimer(o.Pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (j *Journal) setScrubRunning(on bool) {
	j.scrub.mu.Lock()
	j.scrub.status.Running = on
	j.scrub.mu.Unlock()
}

// scrubPass verifies every sealed segment once.
func (j *Journal) scrubPass(ctx context.Context, lim *rate.Limiter, chunk int) error {
	j.mu.Lock()
	closed := j.closed
	j.mu.Unlock()
	if closed {
		return ErrClosed
	}
	names, err := j.fs.List(j.dir)
	if err != nil {
		return fmt.Errorf("journal: scrub: %w", err)
	}
	j.removeOrphanSums(names)
	segs, err := j.Segments()
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(segs); i++ {
		want := int64(segs[i+1].FirstOffset - segs[i].FirstOffset)
		n, err := j.scrubSegment(ctx, segs[i], want, lim, chunk)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed by retention meanwhile
			}
			return err
		}
		j.scrub.mu.Lock()
		j.scrub.status.Segments++
		j.scrub.status.Bytes += uint64(n)
		j.scrub.mu.Unlock()
	}
	return nil
}

// pacedReader reads through a rate limiter, at most chunk bytes a call,
// and keeps the CRC32C and the count of what it read.
type pacedReader struct {
	ctx   context.Context
	r     io.Reader
	lim   *rate.Limiter
	chunk int
	crc   uint32
	n     int64
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(b) > p.chunk {
		b = b[:p.chunk]
	}
	if err := p.lim.WaitN(p.ctx, len(b)); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.crc = crc32.Update(p.crc, castagnoli, b[:n])
	p.n += int64(n)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errIO, err)
	}
	return n, err
}

// scrubSegment verifies one sealed segment, want records long, and returns
// the bytes it read. Corruption is noted, not returned; an error is an
// I/O error or ctx's.
func (j *Journal) scrubSegment(ctx context.Context, seg Segment, want int64, lim *rate.Limiter, chunk int) (int64, error) {
	f, err := j.fs.Open(seg.Path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	pr := &pacedReader{ctx: ctx, r: f, lim: lim, chunk: chunk}
	br := bufio.NewReaderSize(pr, chunk)
	count, bad := checkEntries(br, size)
	if ctx.Err() != nil {
		return pr.n, ctx.Err()
	}
	name := filepath.Base(seg.Path)
	corrupt := func(off pgq.Offset, reason string) {
		j.noteCorrupt(&Corruption{Segment: name, Offset: off, Reason: reason, Source: "scrub", At: time.Now().UTC()})
	}
	switch {
	case bad != nil && errors.Is(bad, errIO):
		return pr.n, bad
	case bad != nil:
		corrupt(seg.FirstOffset+pgq.Offset(count), bad.Error())
		return pr.n, nil
	case count != want:
		corrupt(seg.FirstOffset+pgq.Offset(min(count, want)), fmt.Sprintf("segment holds %d records, the next segment starts %d records after it", count, want))
		return pr.n, nil
	}
	sum, ok, err := j.readSum(seg.Path)
	if err != nil {
		return pr.n, err
	}
	if !ok {
		// Every record verified: what the file holds is what was written.
		if err := j.writeSum(seg.Path, segmentSum{Bytes: pr.n, CRC: pr.crc}); err != nil {
			return pr.n, fmt.Errorf("journal: scrub: write checksum of %s: %w", name, err)
		}
		if err := j.syncDir(); err != nil {
			return pr.n, fmt.Errorf("journal: scrub: %w", err)
		}
		j.scrub.mu.Lock()
		j.scrub.status.SumsWritten++
		j.scrub.mu.Unlock()
		return pr.n, nil
	}
	if sum.Bytes != pr.n || sum.CRC != pr.crc {
		corrupt(seg.FirstOffset, fmt.Sprintf("segment checksum mismatch: %s%s records %d bytes CRC32C %08x, file has %d bytes CRC32C %08x (every record verifies: the checksum file may be the damaged one)",
			name, SumSuffix, sum.Bytes, sum.CRC, pr.n, pr.crc))
	}
	return pr.n, nil
}

// errIO marks a read error (not corruption) in checkEntries.
var errIO = errors.New("read error")

// checkEntries walks the entries of a segment file of size bytes read
// from br and checks each record (record.CheckStored). It returns the
// number of good entries before the first bad one and why that one is
// bad (nil: all good to the end). A read error (br's reader wraps them
// with errIO) is returned as is.
func checkEntries(br *bufio.Reader, size int64) (int64, error) {
	var count, pos int64
	var buf []byte
	for pos < size {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			if errors.Is(err, errIO) {
				return count, err
			}
			return count, fmt.Errorf("bad entry length prefix at byte %d", pos) // cut short, or overflows
		}
		head := int64(uvarintLen(n))
		if n > uint64(size-pos-head) {
			return count, fmt.Errorf("entry at byte %d claims %d bytes, %d remain", pos, n, size-pos-head)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			if errors.Is(err, errIO) {
				return count, err
			}
			return count, fmt.Errorf("entry at byte %d cut short", pos)
		}
		if err := record.CheckStored(buf); err != nil {
			return count, fmt.Errorf("entry at byte %d: %w", pos, err)
		}
		pos += head + int64(n)
		count++
	}
	return count, nil
}

// uvarintLen is the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
