package index

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Group entries: a group's own keyed records beside its value (a shared
// group keeps one per acked, delivered or parked message), written in
// fsynced batches together with the value and deleted with the group.
//
//	"h" + group name + 0x00 + entry key → entry value
//
// Group names never hold a zero byte, so one group's entries are one
// contiguous key range that no other group's overlaps.
const prefixGroupEntry byte = 'h'

// GroupEntry is one change of UpdateGroup: Value stored under Key, or the
// entry deleted when Delete; with Delete and End, every entry of the group
// in [Key, End) is deleted (one range tombstone).
type GroupEntry struct {
	Key    []byte
	Value  []byte
	Delete bool
	End    []byte
}

func groupEntryPrefix(name string) []byte {
	k := make([]byte, 0, 2+len(name))
	k = append(k, prefixGroupEntry)
	k = append(k, name...)
	return append(k, 0)
}

func groupEntryBounds(name string) (lower, upper []byte) {
	lower = groupEntryPrefix(name)
	upper = bytes.Clone(lower)
	upper[len(upper)-1] = 1
	return lower, upper
}

// UpdateGroup writes, in one fsynced batch, value under the group name
// (unless value is nil) and the entries. An error means the batch may or
// may not be stored, as a whole. Concurrent calls share Pebble's fsyncs.
func (ix *Index) UpdateGroup(name string, value []byte, entries []GroupEntry) error {
	if name == "" || bytes.IndexByte([]byte(name), 0) >= 0 {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	b := ix.db.NewBatch()
	defer b.Close()
	if value != nil {
		if err := b.Set(groupKey(name), value, nil); err != nil {
			return fmt.Errorf("index: update group %q: %w", name, err)
		}
	}
	prefix := groupEntryPrefix(name)
	key := make([]byte, 0, len(prefix)+32)
	for _, e := range entries {
		if len(e.Key) == 0 {
			return fmt.Errorf("index: update group %q: empty entry key", name)
		}
		key = append(append(key[:0], prefix...), e.Key...)
		var err error
		switch {
		case e.Delete && e.End != nil:
			err = b.DeleteRange(key, append(append([]byte(nil), prefix...), e.End...), nil)
		case e.Delete:
			err = b.Delete(key, nil)
		default:
			err = b.Set(key, e.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("index: update group %q: %w", name, err)
		}
	}
	if err := ix.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("index: update group %q: %w", name, err)
	}
	return nil
}

// GroupEntries calls fn with every entry of the group name in key order
// (key without the group's prefix; key and value are valid only during
// the call). An error of fn stops the walk and is returned.
func (ix *Index) GroupEntries(name string, fn func(key, value []byte) error) error {
	if name == "" || bytes.IndexByte([]byte(name), 0) >= 0 {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	lo, hi := groupEntryBounds(name)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("index: group %q entries: %w", name, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("index: group %q entries: %w", name, err)
		}
		if err := fn(it.Key()[len(lo):], v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("index: group %q entries: %w", name, err)
	}
	return nil
}
