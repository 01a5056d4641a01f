package journal

import (
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// TestWrittenAt: a record's write time is known from the moment it can
// be read, is the time its batch's fsync returned (between the append's
// call and return), is unknown for records another Journal wrote and,
// past the ring, is a later time (an age's lower bound).
func TestWrittenAt(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tx := func() *pgq.Transaction {
		return &pgq.Transaction{Xid: 1, CommitLSN: 10, EndLSN: 20, CommitTime: time.Now(), Final: true}
	}
	before := time.Now()
	if err := j.AppendRecords(Records([]*pgq.Transaction{tx(), tx()})); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for off := pgq.Offset(1); off <= 2; off++ {
		w, ok := j.WrittenAt(off)
		if !ok || w.Before(before) || w.After(after) {
			t.Errorf("offset %d: %v, %v; want within the append", off, w, ok)
		}
	}
	if _, ok := j.WrittenAt(3); ok {
		t.Error("offset 3 known before it is written")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if j, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, ok := j.WrittenAt(1); ok {
		t.Error("offset 1 known to a Journal that did not write it")
	}

	wt := newWrittenTimes()
	wt.note(1, 1)
	time.Sleep(10 * time.Millisecond)
	wt.note(2, writtenRing+5) // overwrites 1..5
	j.written = wt
	w1, ok1 := j.WrittenAt(1)
	w6, ok6 := j.WrittenAt(6)
	if !ok1 || !ok6 || !w1.Equal(w6) {
		t.Errorf("overwritten offset 1: %v, %v; want the oldest time kept (offset 6's, %v)", w1, ok1, w6)
	}
}
