package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pgq-dev/pgq"
)

// view is what readers see of the derived entries (see Index.view).
type view struct {
	// floor is the TruncateFront floor: offsets below it are not indexed.
	floor pgq.Offset
	// stored is the last offset written to Pebble, the end of the last
	// block; 0 when none.
	stored pgq.Offset
	// tail holds the entries after stored, consecutive: the block being
	// filled, kept in memory until it is full. Its elements are never
	// changed once published.
	tail []stored
	// end is the highest offset indexed (LastOffset), 0 when none; it
	// stays across TruncateFront.
	end pgq.Offset
}

// last returns the highest offset indexed, 0 when none.
func (v *view) last() pgq.Offset { return v.end }

// inTail returns the tail entry at off.
func (v *view) inTail(off pgq.Offset) (stored, bool) {
	if len(v.tail) == 0 || off < v.tail[0].Offset || off > v.tail[len(v.tail)-1].Offset {
		return stored{}, false
	}
	return v.tail[off-v.tail[0].Offset], true
}

// publish makes v the readers' view.
func (ix *Index) publish(v *view) {
	ix.view.Store(v)
	ix.last.Store(uint64(v.last()))
}

// loadDerived reads the derived state after Pebble opened. An index of the
// first format (one "o" entry per offset) is dropped: CatchUp rebuilds it
// from the journal.
func (ix *Index) loadDerived() error {
	lo, hi := prefixBounds(prefixOffsetV1)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("index: look for the first format: %w", err)
	}
	old := it.First()
	err = errors.Join(it.Error(), it.Close())
	if err != nil {
		return fmt.Errorf("index: look for the first format: %w", err)
	}
	if old {
		ix.log.Info("index: dropping the derived entries of the first format; they are rebuilt from the journal")
		b := ix.db.NewBatch()
		err := deleteDerived(b)
		if err == nil {
			err = ix.commit(b, pebble.Sync)
		}
		b.Close()
		if err != nil {
			return fmt.Errorf("index: drop the first format: %w", err)
		}
	}
	if err := ix.loadSets(); err != nil {
		return err
	}
	last, err := ix.readU64(keyLast)
	if err != nil {
		return err
	}
	floor, err := ix.readU64(keyFloor)
	if err != nil {
		return err
	}
	v := &view{floor: pgq.Offset(floor), stored: pgq.Offset(last), end: pgq.Offset(last)}
	if last != 0 && v.stored != blockEnd(v.stored) {
		// Close stored the block being filled: it is the tail again.
		start := blockStart(v.stored)
		es, err := ix.block(start)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err == nil && es[len(es)-1].Offset == v.stored {
			v.tail = es
			v.stored = start - 1
		}
		// Else keyLast names a block that is gone (a truncation
		// removed it): get finds nothing there, CatchUp re-adds.
	}
	ix.publish(v)
	return nil
}

// storeTail writes the block being filled (a partial block, without "l"
// and "t" keys: loadDerived makes it the tail again). The caller excludes
// every writer.
func (ix *Index) storeTail() error {
	if ix.failedErr() != nil {
		return nil
	}
	v := ix.view.Load()
	if v == nil || v.end == v.stored {
		return nil
	}
	b := ix.db.NewBatch()
	defer b.Close()
	if len(v.tail) > 0 {
		if err := b.Set(blockKey(blockStart(v.tail[0].Offset)), encodeBlock(v.tail), nil); err != nil {
			return err
		}
	}
	if err := putU64(b, keyLast, uint64(v.last())); err != nil {
		return err
	}
	return ix.commit(b, pebble.NoSync)
}

func (ix *Index) readU64(key []byte) (uint64, error) {
	v, closer, err := ix.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("index: read %s: %w", key, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s of %d bytes", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func putU64(b *pebble.Batch, key []byte, v uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return b.Set(key, buf[:], nil)
}

// FirstOffset returns the lowest offset still indexed, 0 when none.
func (ix *Index) FirstOffset() (pgq.Offset, error) {
	if err := ix.enter(); err != nil {
		return 0, err
	}
	defer ix.exit()
	s, err := ix.firstAtOrAfter(ix.view.Load(), 0)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.Offset, nil
}

func (ix *Index) addLocked(entries []Entry) error {
	v := ix.view.Load()
	last := v.last()
	for len(entries) > 0 && entries[0].Offset != 0 && entries[0].Offset <= last {
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil
	}
	for i, e := range entries {
		if e.Offset == 0 || e.Bytes < 0 || e.Changes < 0 {
			return fmt.Errorf("%w: offset %d, bytes %d, changes %d", ErrInvalidEntry, e.Offset, e.Bytes, e.Changes)
		}
		if i > 0 && e.Offset != entries[i-1].Offset+1 {
			return fmt.Errorf("%w: offset %d follows %d", ErrGap, e.Offset, entries[i-1].Offset)
		}
	}
	var prev stored
	havePrev := false
	if last != 0 {
		if entries[0].Offset != last+1 {
			return fmt.Errorf("%w: offset %d does not follow last indexed offset %d", ErrGap, entries[0].Offset, last)
		}
		p, err := ix.getIn(v, last)
		switch {
		case err == nil:
			prev, havePrev = p, true
		case errors.Is(err, ErrNotFound):
			// TruncateFront removed the tail too: start the running
			// values afresh, as after Reset.
		default:
			return err
		}
	}

	nv := &view{floor: v.floor, stored: v.stored, tail: v.tail, end: entries[len(entries)-1].Offset}
	var b *pebble.Batch
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	var ps pendingSets
	for _, e := range entries {
		s := next(prev, havePrev, e)
		s.Subjects = "" // kept as the set id
		if e.Subjects.Known() {
			s.set = ix.setID(&ps, e.Subjects)
		}
		// Appending may reuse the tail's array past the published
		// length: no reader looks there.
		nv.tail = append(nv.tail, s)
		prev, havePrev = s, true
		if s.Offset != blockEnd(s.Offset) {
			continue
		}
		// The block is full: store it.
		if b == nil {
			b = ix.db.NewBatch()
		}
		start := blockStart(s.Offset)
		if err := b.Set(blockKey(start), encodeBlock(nv.tail), nil); err != nil {
			return fmt.Errorf("index: add offset %d: %w", s.Offset, err)
		}
		if err := b.Set(lsnKey(s.maxLSN, start), nil, nil); err != nil {
			return fmt.Errorf("index: add offset %d: %w", s.Offset, err)
		}
		if err := b.Set(timeKey(s.maxTime, start), nil, nil); err != nil {
			return fmt.Errorf("index: add offset %d: %w", s.Offset, err)
		}
		nv.stored, nv.tail = s.Offset, nil
	}
	newLast := entries[len(entries)-1].Offset
	if len(ps.vals) > 0 {
		// New sets are written with the first Add using them, so they
		// are in Pebble before (or with) any block that refers to them.
		if b == nil {
			b = ix.db.NewBatch()
		}
		if err := ps.write(b); err != nil {
			return fmt.Errorf("index: add: %w", err)
		}
	}
	if b != nil {
		if err := putU64(b, keyLast, uint64(nv.stored)); err != nil {
			return fmt.Errorf("index: add: %w", err)
		}
		if err := ix.commit(b, pebble.NoSync); err != nil {
			return fmt.Errorf("index: add offsets %d..%d: %w", entries[0].Offset, newLast, err)
		}
	}
	ix.publishSets(&ps)
	ix.publish(nv)
	return nil
}

// get reads the stored entry at off in the current view.
func (ix *Index) get(off pgq.Offset) (stored, error) {
	return ix.getIn(ix.view.Load(), off)
}

// getIn reads the stored entry at off in v.
func (ix *Index) getIn(v *view, off pgq.Offset) (stored, error) {
	if off == 0 || off < v.floor {
		return stored{}, fmt.Errorf("%w: offset %d", ErrNotFound, off)
	}
	if off > v.stored {
		if s, ok := v.inTail(off); ok {
			return s, nil
		}
		return stored{}, fmt.Errorf("%w: offset %d", ErrNotFound, off)
	}
	var s stored
	found := false
	err := ix.withBlock(blockStart(off), func(br *blockReader) {
		for br.next() {
			if br.cur.Offset == off {
				s, found = br.cur, true
				return
			}
		}
	})
	if err != nil {
		return stored{}, err
	}
	if !found {
		return stored{}, fmt.Errorf("%w: offset %d", ErrNotFound, off)
	}
	return s, nil
}

// withBlock runs fn on a reader of the block starting at start; a corrupt
// block is reported after fn.
func (ix *Index) withBlock(start pgq.Offset, fn func(br *blockReader)) error {
	val, closer, err := ix.db.Get(blockKey(start))
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: offset %d", ErrNotFound, start)
	}
	if err != nil {
		return fmt.Errorf("index: read block %d: %w", start, err)
	}
	defer closer.Close()
	br, err := newBlockReader(start, val)
	if err != nil {
		return err
	}
	fn(br)
	return br.err
}

// block reads and decodes the block starting at start.
func (ix *Index) block(start pgq.Offset) ([]stored, error) {
	val, closer, err := ix.db.Get(blockKey(start))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: offset %d", ErrNotFound, start)
	}
	if err != nil {
		return nil, fmt.Errorf("index: read block %d: %w", start, err)
	}
	defer closer.Close()
	return decodeBlock(start, val)
}

// firstAtOrAfter returns the first entry of v with offset >= off (and at
// or above the floor).
func (ix *Index) firstAtOrAfter(v *view, off pgq.Offset) (stored, error) {
	off = max(off, v.floor, 1)
	if off <= v.stored {
		lo, hi := prefixBounds(prefixBlock)
		it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return stored{}, fmt.Errorf("index: iterate blocks: %w", err)
		}
		defer it.Close()
		for ok := it.SeekGE(blockKey(blockStart(off))); ok; ok = it.Next() {
			k := it.Key()
			if len(k) != 9 {
				return stored{}, fmt.Errorf("%w: block key of %d bytes", ErrCorrupt, len(k))
			}
			start := pgq.Offset(binary.BigEndian.Uint64(k[1:]))
			val, err := it.ValueAndErr()
			if err != nil {
				return stored{}, fmt.Errorf("index: read block %d: %w", start, err)
			}
			br, err := newBlockReader(start, val)
			if err != nil {
				return stored{}, err
			}
			for br.next() {
				if br.cur.Offset >= off {
					return br.cur, nil
				}
			}
			if br.err != nil {
				return stored{}, br.err
			}
		}
		if err := it.Error(); err != nil {
			return stored{}, fmt.Errorf("index: iterate blocks: %w", err)
		}
	}
	for _, s := range v.tail {
		if s.Offset >= off {
			return s, nil
		}
	}
	return stored{}, fmt.Errorf("%w: no offset at or after %d", ErrNotFound, off)
}

// seekLSN and seekTime find the first offset whose running maximum
// reaches x: the stored blocks first (one SeekGE in "l"/"t" names the
// block, then a scan of it), then the tail.
func (ix *Index) seekLSN(x pgq.LSN) (pgq.Offset, error) {
	return ix.seekBy(prefixLSN, lsnKey(x, 0), func(s *stored) bool { return s.maxLSN >= x })
}

func (ix *Index) seekTime(us int64) (pgq.Offset, error) {
	return ix.seekBy(prefixTime, timeKey(us, 0), func(s *stored) bool { return s.maxTime >= us })
}

func (ix *Index) seekBy(p byte, from []byte, reached func(*stored) bool) (pgq.Offset, error) {
	v := ix.view.Load()
	answer := func(off pgq.Offset) (pgq.Offset, error) {
		// A truncated offset reached x: the first retained one did too.
		off = max(off, v.floor)
		if off > v.last() {
			return 0, ErrNotFound
		}
		return off, nil
	}
	if v.stored > 0 {
		start, err := ix.seekKey(p, from)
		switch {
		case err == nil:
			var off pgq.Offset
			err := ix.withBlock(start, func(br *blockReader) {
				for br.next() {
					if reached(&br.cur) {
						off = br.cur.Offset
						return
					}
				}
			})
			if err != nil {
				return 0, err
			}
			if off == 0 {
				return 0, fmt.Errorf("%w: block %d is keyed past its entries", ErrCorrupt, start)
			}
			return answer(off)
		case !errors.Is(err, ErrNotFound):
			return 0, err
		}
	}
	i := sort.Search(len(v.tail), func(i int) bool { return reached(&v.tail[i]) })
	if i == len(v.tail) {
		return 0, ErrNotFound
	}
	return answer(v.tail[i].Offset)
}

// seekKey returns the block start of the first key >= from in family p.
func (ix *Index) seekKey(p byte, from []byte) (pgq.Offset, error) {
	lo, hi := prefixBounds(p)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.SeekGE(from) {
		if err := it.Error(); err != nil {
			return 0, err
		}
		return 0, ErrNotFound
	}
	return offsetOfSeekKey(it.Key())
}

func (ix *Index) truncateFrontLocked(off pgq.Offset) error {
	v := ix.view.Load()
	if off <= 1 || off <= v.floor {
		return nil
	}
	b := ix.db.NewBatch()
	defer b.Close()
	// Every block ending below off goes; the one holding off stays, its
	// entries below off hidden by the floor.
	cut := blockStart(off)
	if err := b.DeleteRange(blockKey(0), blockKey(cut), nil); err != nil {
		return fmt.Errorf("index: truncate front to %d: %w", off, err)
	}
	if cut <= v.stored {
		var s stored
		err := ix.withBlock(cut, func(br *blockReader) {
			for br.next() {
				s = br.cur
			}
		})
		switch {
		case err == nil:
			// Running maxima never decrease with the offset, so every
			// "l" and "t" key of an earlier block sorts before this
			// block's.
			if err := b.DeleteRange([]byte{prefixLSN}, lsnKey(s.maxLSN, cut), nil); err != nil {
				return fmt.Errorf("index: truncate front to %d: %w", off, err)
			}
			if err := b.DeleteRange([]byte{prefixTime}, timeKey(s.maxTime, cut), nil); err != nil {
				return fmt.Errorf("index: truncate front to %d: %w", off, err)
			}
		case errors.Is(err, ErrNotFound):
			// Already gone (an earlier truncation or a rebuild starting
			// later): its keys went with it.
		default:
			return fmt.Errorf("index: truncate front to %d: %w", off, err)
		}
	} else {
		for _, p := range []byte{prefixLSN, prefixTime} {
			lo, hi := prefixBounds(p)
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				return fmt.Errorf("index: truncate front to %d: %w", off, err)
			}
		}
	}
	if err := putU64(b, keyFloor, uint64(min(off, v.last()+1))); err != nil {
		return fmt.Errorf("index: truncate front to %d: %w", off, err)
	}
	if err := ix.commit(b, pebble.NoSync); err != nil {
		return fmt.Errorf("index: truncate front to %d: %w", off, err)
	}
	nv := &view{floor: off, stored: v.stored, tail: v.tail, end: v.end}
	if last := v.last(); off > last {
		// Everything went: the next Add (at last+1) starts the running
		// values afresh, in a fresh tail.
		nv.floor, nv.tail = last+1, nil
	}
	ix.publish(nv)
	return nil
}

// deleteDerived deletes every derived key, of both formats.
func deleteDerived(b *pebble.Batch) error {
	for _, p := range []byte{prefixBlock, prefixLSN, prefixOffsetV1, prefixTime} {
		lo, hi := prefixBounds(p)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
	}
	for _, k := range [][]byte{keyLast, keyFloor} {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	return nil
}

func (ix *Index) resetLocked() error {
	b := ix.db.NewBatch()
	defer b.Close()
	if err := deleteDerived(b); err != nil {
		return fmt.Errorf("index: reset: %w", err)
	}
	if err := ix.commit(b, pebble.NoSync); err != nil {
		return fmt.Errorf("index: reset: %w", err)
	}
	ix.gen.Add(1) // the offsets may now name other records
	ix.publish(&view{})
	return nil
}
