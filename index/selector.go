package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pgq-dev/pgq"
)

// Count is what a Selector counts over a range of offsets.
type Count struct {
	// Records is the number of records whose subjects pass (those with
	// unknown subjects included).
	Records uint64
	// Bytes is the sum of their Entry.Bytes: whole records, also where
	// the filter keeps only some of a record's changes.
	Bytes int64
	// First is the first counted offset and FirstTime its commit time;
	// 0 and the zero time when none.
	First     pgq.Offset
	FirstTime time.Time
}

// Selector counts the records of a range whose subject set passes a
// predicate: a consumer group's filter (package consumers), evaluated once
// per subject set, never per record. Records of the unknown set (indexed
// before the sets, or beyond their bounds) always count.
//
// A Selector remembers its last answer: a Count whose range starts at or
// after the last one's start and ends at or after its end reads only the
// offsets the two ranges do not share, so a group's lag costs what the
// cursor and the journal moved since the last call, not the backlog. A
// Reset of the index voids the memo. Safe for concurrent use.
type Selector struct {
	ix   *Index
	pred func([]Subject) bool

	mu      sync.Mutex
	verdict []int8 // by set id: 0 not yet evaluated, 1 passes, 2 does not
	vgen    uint64 // the index generation verdict holds for
	memo    struct {
		ok       bool
		gen      uint64
		from, to pgq.Offset
		c        Count
	}
}

// NewSelector returns a Selector of the records whose subjects pass pred.
// pred gets each distinct subject set once; it must not call the index.
func (ix *Index) NewSelector(pred func(subjects []Subject) bool) *Selector {
	return &Selector{ix: ix, pred: pred}
}

// passes evaluates set id (under s.mu).
func (s *Selector) passes(id uint32) bool {
	if id == 0 {
		return true
	}
	if int(id) < len(s.verdict) && s.verdict[id] != 0 {
		return s.verdict[id] == 1
	}
	subjects, ok := s.ix.sets.lookup(id)
	ok = !ok || s.pred(subjects) // an id not in the dictionary: unknown
	if int(id) >= len(s.verdict) {
		s.verdict = append(s.verdict, make([]int8, int(id)+1-len(s.verdict))...)
	}
	s.verdict[id] = 2
	if ok {
		s.verdict[id] = 1
	}
	return ok
}

// Count counts the passing records in [from, to]. Every offset of the
// range must be indexed: else an error wrapping ErrNotFound (or ErrStale
// for a to past LastOffset while the index is stale). from > to counts
// nothing.
func (s *Selector) Count(from, to pgq.Offset) (Count, error) {
	if from > to {
		return Count{}, nil
	}
	ix := s.ix
	if err := ix.enter(); err != nil {
		return Count{}, err
	}
	defer ix.exit()
	if err := ix.staleAfter(to); err != nil {
		return Count{}, fmt.Errorf("index: count %d..%d: %w", from, to, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := ix.gen.Load()
	if gen != s.vgen {
		// A reopen may have lost sets and given their ids to others.
		s.verdict, s.vgen = nil, gen
	}
	m := &s.memo
	if m.ok && m.gen == gen && from >= m.from && from <= m.to+1 && to >= m.to {
		if c, err := s.extend(from, to); err == nil {
			m.from, m.to, m.c = from, to, c
			return c, nil
		}
		// The memo's start was truncated away: count afresh.
	}
	c, err := s.scan(from, to, false)
	if err != nil {
		m.ok = false
		return Count{}, fmt.Errorf("index: count %d..%d: %w", from, to, err)
	}
	m.ok, m.gen, m.from, m.to, m.c = true, gen, from, to, c
	return c, nil
}

// Verdict is what the index knows of one record for a filtered fetch
// (Selector.Verdicts).
type Verdict struct {
	// Bytes is the record's stored size as indexed (Entry.Bytes: what
	// the journal reports as the record's size); 0 when not indexed.
	Bytes uint32
	// Rejected: the record is indexed with a known subject set that the
	// predicate fails.
	Rejected bool
	// End is whether it ends its transaction, as indexed (EndUnknown for
	// an entry of a block written before the flag, or not indexed).
	End End
}

// Verdicts fills out[i] with what the index knows of the record at
// offset from+i: whether it is rejected (indexed with a known subject set
// the predicate fails), whether it ends its transaction, its size. An
// offset not indexed (yet) is left zero: not rejected, to be read. A
// record with unknown subjects is not rejected. So a filtered fetch
// passes over what its group does not want without reading it when the
// end is known, by its header alone when not (package consumers), at the
// cost of one walk of the index for a range.
func (s *Selector) Verdicts(from pgq.Offset, out []Verdict) error {
	clear(out)
	if len(out) == 0 {
		return nil
	}
	ix := s.ix
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen := ix.gen.Load(); gen != s.vgen {
		s.verdict, s.vgen = nil, gen
	}
	to := from + pgq.Offset(len(out)) - 1
	_, err := ix.walkRange(from, to, func(e *stored) bool { // a hole leaves the rest unknown
		v := Verdict{Bytes: uint32(min(e.Bytes, math.MaxUint32)), Rejected: !s.passes(e.set), End: e.End} // set 0 (unknown) passes
		if e.Bytes > math.MaxUint32 {
			v.End = EndUnknown // its size does not fit: read it
		}
		out[e.Offset-from] = v
		return true
	})
	if err != nil {
		return fmt.Errorf("index: verdicts from %d: %w", from, err)
	}
	return nil
}

// extend derives the count of [from, to] from the memo's (see Count).
func (s *Selector) extend(from, to pgq.Offset) (Count, error) {
	m := &s.memo
	c := m.c
	if from > m.from {
		sub, err := s.scan(m.from, from-1, false)
		if err != nil {
			return Count{}, err
		}
		c.Records -= sub.Records
		c.Bytes -= sub.Bytes
		if c.First < from {
			c.First, c.FirstTime = 0, time.Time{}
			if c.Records > 0 {
				f, err := s.scan(from, m.to, true)
				if err != nil {
					return Count{}, err
				}
				c.First, c.FirstTime = f.First, f.FirstTime
			}
		}
	}
	if to > m.to {
		add, err := s.scan(m.to+1, to, false)
		if err != nil {
			return Count{}, err
		}
		c.Records += add.Records
		c.Bytes += add.Bytes
		if c.First == 0 {
			c.First, c.FirstTime = add.First, add.FirstTime
		}
	}
	return c, nil
}

// scan counts [from, to] entry by entry (with firstOnly it stops at the
// first passing one). The caller holds s.mu and the index's life.
func (s *Selector) scan(from, to pgq.Offset, firstOnly bool) (Count, error) {
	var c Count
	want, err := s.ix.walkRange(from, to, func(e *stored) bool {
		if s.passes(e.set) {
			c.Records++
			c.Bytes += int64(e.Bytes)
			if c.First == 0 {
				c.First, c.FirstTime = e.Offset, e.CommitTime
				return !firstOnly
			}
		}
		return true
	})
	if err != nil {
		return Count{}, err
	}
	if want <= to && !(firstOnly && c.First != 0) {
		return Count{}, fmt.Errorf("%w: offset %d", ErrNotFound, want) // a hole
	}
	return c, nil
}

// walkRange calls fn on the entries of the offsets from, from+1, … to in
// order until fn returns false or an offset is not indexed (a hole), and
// returns the first offset it did not visit (to+1 when it visited all).
func (ix *Index) walkRange(from, to pgq.Offset, fn func(*stored) bool) (pgq.Offset, error) {
	want := from
	err := ix.walk(from, func(e *stored) bool {
		if e.Offset < want {
			return true
		}
		if e.Offset != want {
			return false
		}
		want++
		return fn(e) && want <= to
	})
	return want, err
}

// walk calls fn on the indexed entries from the block holding from on, in
// offset order, until fn returns false: the stored blocks, then the tail.
// Offsets below the floor are not visited.
func (ix *Index) walk(from pgq.Offset, fn func(*stored) bool) error {
	v := ix.view.Load()
	from = max(from, v.floor, 1)
	if from <= v.stored {
		// Blocks past v.stored (a partial block Close stored, being
		// replaced) are not the view's: the tail is.
		lo, _ := prefixBounds(prefixBlock)
		it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: blockKey(v.stored + 1)})
		if err != nil {
			return fmt.Errorf("index: iterate blocks: %w", err)
		}
		defer it.Close()
		for ok := it.SeekGE(blockKey(blockStart(from))); ok; ok = it.Next() {
			k := it.Key()
			if len(k) != 9 {
				return fmt.Errorf("%w: block key of %d bytes", ErrCorrupt, len(k))
			}
			start := pgq.Offset(binary.BigEndian.Uint64(k[1:]))
			val, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("index: read block %d: %w", start, err)
			}
			br, err := newBlockReader(start, val)
			if err != nil {
				return err
			}
			for br.next() {
				if br.cur.Offset < v.floor {
					continue
				}
				if !fn(&br.cur) {
					return nil
				}
			}
			if br.err != nil {
				return br.err
			}
		}
		if err := it.Error(); err != nil {
			return fmt.Errorf("index: iterate blocks: %w", err)
		}
	}
	for i := range v.tail {
		if v.tail[i].Offset < from {
			continue
		}
		if !fn(&v.tail[i]) {
			return nil
		}
	}
	return nil
}
