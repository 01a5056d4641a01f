package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

var cols = []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}

// mkTx returns a transaction whose LSNs derive from i, with n changes.
func mkTx(i, n int) *pgq.Transaction {
	tx := &pgq.Transaction{
		Xid:        uint32(1000 + i),
		CommitLSN:  pgq.LSN(i*100 + 50),
		EndLSN:     pgq.LSN(i*100 + 99),
		CommitTime: time.UnixMicro(int64(1_700_000_000_000_000 + i)).UTC(),
		Final:      true,
	}
	for k := range n {
		tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols,
			New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(fmt.Sprint(k))}, {Kind: pgq.ValueText, Data: []byte(strings.Repeat("x", i%50))}}})
	}
	return tx
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func openT(t testing.TB, dir string, segSize int) *Journal {
	t.Helper()
	j, err := Open(Options{Dir: dir, SegmentSize: segSize, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return j
}

// fill appends txs 1..n in batches of varying size.
func fill(t testing.TB, j *Journal, from, n int) {
	t.Helper()
	for i := from; i < from+n; {
		k := min(1+i%7, from+n-i)
		var batch []*pgq.Transaction
		for m := range k {
			batch = append(batch, mkTx(i+m, 1+(i+m)%3))
		}
		if err := j.Append(batch); err != nil {
			t.Fatalf("Append: %v", err)
		}
		for m, tx := range batch {
			if tx.Offset != pgq.Offset(i+m) {
				t.Fatalf("tx %d got offset %d", i+m, tx.Offset)
			}
		}
		i += k
	}
}

func checkRecords(t testing.TB, j *Journal, first, last int) {
	t.Helper()
	if got := j.FirstOffset(); got != pgq.Offset(first) {
		t.Fatalf("FirstOffset = %d, want %d", got, first)
	}
	if got := j.LastOffset(); got != pgq.Offset(last) {
		t.Fatalf("LastOffset = %d, want %d", got, last)
	}
	for i := first; i <= last; i++ {
		tx, err := j.Read(pgq.Offset(i))
		if err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		want := mkTx(i, 1+i%3)
		want.Offset = pgq.Offset(i)
		if tx.Offset != want.Offset || tx.EndLSN != want.EndLSN || tx.Xid != want.Xid ||
			!tx.CommitTime.Equal(want.CommitTime) || len(tx.Changes) != len(want.Changes) ||
			!bytes.Equal(tx.Changes[0].New[1].Data, want.Changes[0].New[1].Data) {
			t.Fatalf("Read(%d) = %+v, want %+v", i, tx, want)
		}
	}
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 2048)
	if j.FirstOffset() != 0 || j.LastOffset() != 0 || j.LastEndLSN() != 0 {
		t.Fatalf("empty journal: %d..%d %v", j.FirstOffset(), j.LastOffset(), j.LastEndLSN())
	}
	if _, err := j.Read(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read(1) on empty: %v", err)
	}
	fill(t, j, 1, 300)
	checkRecords(t, j, 1, 300)
	if got := j.LastEndLSN(); got != mkTx(300, 0).EndLSN {
		t.Fatalf("LastEndLSN = %v", got)
	}
	segs, err := j.Segments()
	if err != nil || len(segs) < 5 {
		t.Fatalf("Segments: %d, %v; want several segment rolls", len(segs), err)
	}
	var total int64
	for i, s := range segs {
		total += s.Bytes
		if i == 0 && s.FirstOffset != 1 {
			t.Fatalf("first segment starts at %d", s.FirstOffset)
		}
	}
	if j.Size() != total {
		t.Fatalf("Size %d, segments sum %d", j.Size(), total)
	}
	for _, off := range []pgq.Offset{0, 301} {
		if _, err := j.Read(off); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(%d): %v, want ErrNotFound", off, err)
		}
	}
	raw, err := j.ReadRaw(7)
	if err != nil || record.Check(raw) != nil {
		t.Fatalf("ReadRaw: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Read(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := j.Append([]*pgq.Transaction{mkTx(1, 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	j = openT(t, dir, 2048)
	defer j.Close()
	if got := j.LastEndLSN(); got != mkTx(300, 0).EndLSN {
		t.Fatalf("LastEndLSN after reopen = %v", got)
	}
	checkRecords(t, j, 1, 300)
	fill(t, j, 301, 50)
	checkRecords(t, j, 1, 350)

	// Reader walks everything, then reports EOF without blocking.
	r := j.NewReader(0)
	for i := 1; i <= 350; i++ {
		tx, err := r.Next()
		if err != nil || tx.Offset != pgq.Offset(i) {
			t.Fatalf("Next #%d: %v %v", i, tx, err)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at end: %v", err)
	}
	fill(t, j, 351, 1)
	if tx, err := r.Next(); err != nil || tx.Offset != 351 || r.Offset() != 352 {
		t.Fatalf("Next after append: %v %v", tx, err)
	}
}

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 1024)
	fill(t, j, 1, 100)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := Verify(dir)
	if err != nil {
		t.Fatalf("Verify sound journal: %v", err)
	}
	if want := (Summary{Records: 100, First: 1, Last: 100, LastEndLSN: mkTx(100, 0).EndLSN}); sum != want {
		t.Fatalf("Summary = %+v, want %+v", sum, want)
	}

	// Flip a byte in the middle of record 50's payload.
	segs, err := listSegments(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	var seg Segment
	for _, s := range segs {
		if s.FirstOffset <= 50 {
			seg = s
		}
	}
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for off := seg.FirstOffset; off < 50; off++ {
		pos += entryLen(t, data[pos:])
	}
	data[pos+entryLen(t, data[pos:])/2] ^= 0x40
	if err := os.WriteFile(seg.Path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(dir)
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Offset != 50 || !errors.Is(err, record.ErrChecksum) {
		t.Fatalf("Verify: %v, want CorruptError at offset 50", err)
	}
	if !strings.Contains(err.Error(), "offset 50") {
		t.Fatalf("error does not name the offset: %v", err)
	}
	// Open does not repair non-tail segments; reading the record fails.
	j = openT(t, dir, 1024)
	defer j.Close()
	if _, err := j.Read(50); !errors.As(err, &ce) || ce.Offset != 50 {
		t.Fatalf("Read(50): %v, want CorruptError", err)
	}
	if _, err := j.Read(51); err != nil {
		t.Fatalf("Read(51): %v", err)
	}
}

func entryLen(t testing.TB, data []byte) int {
	t.Helper()
	size, n := uvarint(data)
	if n <= 0 {
		t.Fatalf("bad entry")
	}
	return n + int(size)
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == LockFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestOpenOnTornTail: a crash while record 40 (a batch of its own) was
// written leaves its entry torn, or garbage after it, with the marker
// still at record 39 (the marker is written after the batch's fsync).
// Open cuts what lies past record 39 and keeps everything before; with no
// marker at all (a journal written before pgq kept one) it does the same,
// since nothing valid follows the damage. A tail emptied although records
// in it were fsynced is corruption: Open refuses.
func TestOpenOnTornTail(t *testing.T) {
	base := t.TempDir()
	j := openT(t, base, 2048)
	fill(t, j, 1, 39)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	marker39, err := os.ReadFile(filepath.Join(base, DurableFile))
	if err != nil {
		t.Fatal(err)
	}
	j = openT(t, base, 2048)
	fill(t, j, 40, 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := listSegments(vfs.Default, base)
	if err != nil || len(segs) < 2 {
		t.Fatalf("want several segments: %v %v", segs, err)
	}
	tail := segs[len(segs)-1]
	data, err := os.ReadFile(tail.Path)
	if err != nil {
		t.Fatal(err)
	}
	// Start of the last entry.
	lastStart := 0
	for p := 0; p < len(data); {
		lastStart = p
		p += entryLen(t, data[p:])
	}
	lastLen := len(data) - lastStart
	type tc struct {
		name string
		edit func([]byte) []byte
		keep int // last offset that must survive; -1: Open must refuse
	}
	cases := []tc{
		{"cut-after-length", func(b []byte) []byte { return b[:lastStart+1] }, 39},
		{"cut-in-header", func(b []byte) []byte { return b[:lastStart+4] }, 39},
		{"cut-in-body", func(b []byte) []byte { return b[:lastStart+lastLen/2] }, 39},
		{"cut-last-byte", func(b []byte) []byte { return b[:len(b)-1] }, 39},
		{"zeros", func(b []byte) []byte { return append(b, make([]byte, 300)...) }, 40},
		{"garbage", func(b []byte) []byte { return append(b, 0x0a, 'g', 'a', 'r', 'b', 'a', 'g', 'e', 'x', 'y', 'z') }, 40},
		{"zeroed-last-body", func(b []byte) []byte {
			for i := lastStart + 2; i < len(b); i++ {
				b[i] = 0
			}
			return b
		}, 39},
		{"whole-tail-torn", func(b []byte) []byte { return b[:0] }, -1},
	}
	for _, c := range cases {
		for _, mode := range []string{"marker", "no-marker"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				dir := copyDir(t, base)
				p := filepath.Join(dir, filepath.Base(tail.Path))
				if err := os.WriteFile(p, c.edit(append([]byte(nil), data...)), 0o640); err != nil {
					t.Fatal(err)
				}
				keep := c.keep
				if mode == "marker" {
					if err := os.WriteFile(filepath.Join(dir, DurableFile), marker39, 0o640); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := os.Remove(filepath.Join(dir, DurableFile)); err != nil {
						t.Fatal(err)
					}
					if keep < 0 {
						keep = int(tail.FirstOffset) - 1 // nothing bad in an empty tail
					}
				}
				if keep < 0 {
					before := dirSums(t, dir)
					_, err := Open(Options{Dir: dir, SegmentSize: 2048, Logger: testLogger(t)})
					var te *TailCorruptError
					if !errors.As(err, &te) || !errors.Is(err, ErrCorrupt) || te.Offset != tail.FirstOffset || te.Segment != p {
						t.Fatalf("Open: %v, want a TailCorruptError at offset %d in %s", err, tail.FirstOffset, p)
					}
					if after := dirSums(t, dir); !maps.Equal(before, after) {
						t.Fatalf("Open changed the directory:\n%v\n%v", before, after)
					}
					return
				}
				j := openT(t, dir, 2048)
				checkRecords(t, j, 1, keep)
				if got, want := j.LastEndLSN(), mkTx(keep, 0).EndLSN; got != want {
					t.Fatalf("LastEndLSN = %v, want %v", got, want)
				}
				// The journal continues at the next offset.
				fill(t, j, keep+1, 3)
				checkRecords(t, j, 1, keep+3)
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := Verify(dir); err != nil {
					t.Fatalf("Verify after repair: %v", err)
				}
			})
		}
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 0)
	_, err := Open(Options{Dir: dir})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v, want ErrLocked naming %s", err, dir)
	}
	// Another process.
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), "PGQ_JOURNAL_LOCK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "LOCKED") {
		t.Fatalf("other process: %v\n%s", err, out)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, 0)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLockHelper runs in a child process of TestLock.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv("PGQ_JOURNAL_LOCK_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	_, err := Open(Options{Dir: dir})
	if errors.Is(err, ErrLocked) {
		fmt.Println("LOCKED")
		return
	}
	t.Fatalf("Open in other process: %v", err)
}

func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 1024)
	fill(t, j, 1, 100)
	segs, _ := j.Segments()
	cut := segs[2].FirstOffset
	if err := j.TruncateFront(cut); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, j, int(cut), 100)
	if _, err := j.Read(cut - 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read below first: %v", err)
	}
	r := j.NewReader(1)
	if _, err := r.Next(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Reader below first: %v", err)
	}
	if err := j.TruncateFront(5); err != nil { // below first: no-op
		t.Fatal(err)
	}
	if err := j.TruncateFront(1000); err != nil { // capped at the last record
		t.Fatal(err)
	}
	checkRecords(t, j, 100, 100)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, 1024)
	defer j.Close()
	checkRecords(t, j, 100, 100)
	if j.LastEndLSN() != mkTx(100, 0).EndLSN {
		t.Fatalf("LastEndLSN after truncate+reopen = %v", j.LastEndLSN())
	}
	fill(t, j, 101, 20)
	checkRecords(t, j, 100, 120)
	if sum, err := Verify(dir); err != nil || sum.First != 100 || sum.Last != 120 {
		t.Fatalf("Verify: %+v %v", sum, err)
	}
}

func TestChanged(t *testing.T) {
	j := openT(t, t.TempDir(), 0)
	ch := j.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any Append")
	default:
	}
	var got atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for j.LastOffset() < 3 {
			c := j.Changed()
			if j.LastOffset() >= 3 {
				break
			}
			<-c
		}
		got.Store(uint64(j.LastOffset()))
	}()
	fill(t, j, 1, 3)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed by Append")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken")
	}
	if got.Load() != 3 {
		t.Fatalf("waiter saw %d", got.Load())
	}
	ch = j.Changed()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Changed waiters")
	}
}

func TestConcurrentReads(t *testing.T) {
	j := openT(t, t.TempDir(), 1024)
	defer j.Close()
	fill(t, j, 1, 200)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				off := pgq.Offset(1 + (i*7+g*13)%200)
				if _, err := j.Read(off); err != nil {
					t.Errorf("Read(%d): %v", off, err)
					return
				}
			}
		})
	}
	fill(t, j, 201, 50)
	wg.Wait()
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err == nil {
		t.Fatal("empty Dir accepted")
	}
	if err := (Options{Dir: "x", SegmentSize: -1}).Validate(); err == nil {
		t.Fatal("negative SegmentSize accepted")
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without Dir")
	}
}

func TestCommitterBatching(t *testing.T) {
	j := openT(t, t.TempDir(), 1<<20)
	defer j.Close()
	c := NewCommitter(j, CommitterOptions{})
	var appends, appended atomic.Int64
	c.SetOnAppend(func(b []*Record) {
		appends.Add(1)
		appended.Add(int64(len(b)))
	})
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()

	const producers, per = 16, 100
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				if err := c.Submit(ctx, mkTx(p*per+i+1, 1), 100); err != nil {
					t.Errorf("Submit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	off, lsn := c.Durable()
	if off != producers*per || j.LastOffset() != off || lsn != j.LastEndLSN() {
		t.Fatalf("Durable = %d %v, journal %d %v", off, lsn, j.LastOffset(), j.LastEndLSN())
	}
	if appended.Load() != producers*per {
		t.Fatalf("hook saw %d txs", appended.Load())
	}
	t.Logf("%d txs in %d fsynced batches (%.1f per fsync)", producers*per, appends.Load(), float64(producers*per)/float64(appends.Load()))
	if appends.Load() >= producers*per {
		t.Fatalf("no batching: %d appends for %d txs", appends.Load(), producers*per)
	}

	// Idle: a single submit becomes durable promptly and wakes DurableChanged.
	ch := c.DurableChanged()
	if err := c.Submit(ctx, mkTx(producers*per+1, 1), 100); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("DurableChanged not closed")
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Durable(); off != producers*per+1 {
		t.Fatalf("Durable after idle submit = %d", off)
	}

	// Close flushes what's queued and stops Run; Submit then fails.
	for i := range 10 {
		if err := c.Submit(ctx, mkTx(producers*per+2+i, 1), 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	if j.LastOffset() != producers*per+11 {
		t.Fatalf("Close did not flush: last %d", j.LastOffset())
	}
	if err := c.Submit(ctx, mkTx(1, 1), 1); err == nil {
		t.Fatal("Submit after Close succeeded")
	}
}

func TestCommitterBackpressure(t *testing.T) {
	j := openT(t, t.TempDir(), 0)
	defer j.Close()
	c := NewCommitter(j, CommitterOptions{MaxPendingBytes: 1000})
	ctx := t.Context()
	// Run is not started: nothing becomes durable, so pending bytes stay.
	if err := c.Submit(ctx, mkTx(1, 1), 600); err != nil {
		t.Fatal(err)
	}
	if w := c.SubmitWaited(); w != 0 {
		t.Fatalf("SubmitWaited = %s before any Submit blocked", w)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.Submit(short, mkTx(2, 1), 600); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit over the bound: %v, want to block until the deadline", err)
	}
	// The deadline runs from the context's making, a moment before
	// Submit starts waiting (2 ms under -race on a loaded machine).
	if w := c.SubmitWaited(); w < 40*time.Millisecond {
		t.Fatalf("SubmitWaited = %s after a Submit blocked until a 50ms deadline", w)
	}
	// A blocked Submit proceeds once Run makes room.
	submitted := make(chan error, 1)
	go func() { submitted <- c.Submit(ctx, mkTx(2, 1), 600) }()
	select {
	case err := <-submitted:
		t.Fatalf("Submit did not block: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(runCtx) }()
	if err := <-submitted; err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Durable(); off != 2 {
		t.Fatalf("Durable = %d, want 2", off)
	}
	// Cancelling Run's context stops it; Submit then reports the stop.
	stop()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if err := c.Submit(ctx, mkTx(3, 1), 1); err == nil {
		t.Fatal("Submit after Run stopped succeeded")
	}
}

func TestCommitterAppendError(t *testing.T) {
	j := openT(t, t.TempDir(), 0)
	c := NewCommitter(j, CommitterOptions{})
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(ctx, mkTx(1, 1), 10); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("Run: %v, want ErrClosed", err)
	}
	if err := c.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush: %v, want the Run error", err)
	}
	if err := c.Submit(ctx, mkTx(2, 1), 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit: %v, want the Run error", err)
	}
}

// BenchmarkCommitter measures group commit with real fsync: many producers,
// each waiting for its own transaction to be durable (as ingest's feedback
// does in aggregate). durable=off skips the durable-point marker's write
// and fsync after each batch: the ratio of the two, measured in the same
// run, is the marker's cost.
func BenchmarkCommitter(b *testing.B) {
	for _, producers := range []int{1, 64} {
		for _, durable := range []bool{true, false} {
			b.Run(fmt.Sprintf("producers=%d/durable=%s", producers, map[bool]string{true: "on", false: "off"}[durable]), func(b *testing.B) {
				benchCommitter(b, producers, !durable)
			})
		}
	}
}

func benchCommitter(b *testing.B, producers int, noDurable bool) {
	var syncs atomic.Int64 // the log's and the durable-point marker's
	j, err := Open(Options{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler), noDurable: noDurable,
		OnSync: func(time.Duration) { syncs.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	c := NewCommitter(j, CommitterOptions{})
	var appends atomic.Int64
	c.SetOnAppend(func([]*Record) { appends.Add(1) })
	ctx := context.Background()
	go c.Run(ctx)
	defer c.Close()
	tx := mkTx(1, 5)
	size := len(record.Append(nil, tx))
	syncs.Store(0)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t := *tx
				if err := c.Submit(ctx, &t, size); err != nil {
					b.Error(err)
					return
				}
				if err := c.Flush(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if n := appends.Load(); n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "txs/fsync")
		// Per OnAppend call, that is per marker write: the fsyncs of
		// the batches that marker covered (those that waited for it, and
		// those written meanwhile under load, up to markBatches) plus its
		// own; so "fsyncs/batch" above 2 means several data batches per
		// marker fsync, and "txs/fsync" counts their transactions.
		b.ReportMetric(float64(syncs.Load())/float64(n), "fsyncs/batch")
	}
}

// TestCommitterWritesDuringHook: while the OnAppend hook of one batch
// runs, the next batch is written and fsynced (the journal's Changed
// wakes readers), but neither is published to Durable or Flush before
// its hook returned, and hooks run in batch order.
func TestCommitterWritesDuringHook(t *testing.T) {
	j := openT(t, t.TempDir(), 1<<20)
	defer j.Close()
	c := NewCommitter(j, CommitterOptions{})
	release := make(chan struct{})
	entered := make(chan pgq.Offset, 4)
	var order []pgq.Offset // written by the hook goroutine, read after Close
	c.SetOnAppend(func(b []*Record) {
		order = append(order, b[0].Tx.Offset)
		entered <- b[0].Tx.Offset
		if b[0].Tx.Offset == 1 {
			<-release
		}
	})
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()

	if err := c.Submit(ctx, mkTx(1, 1), 100); err != nil {
		t.Fatal(err)
	}
	if off := <-entered; off != 1 {
		t.Fatalf("first hook for offset %d", off)
	}
	changed := j.Changed()
	if err := c.Submit(ctx, mkTx(2, 1), 100); err != nil {
		t.Fatal(err)
	}
	giveUp := time.After(30 * time.Second)
	for j.LastOffset() < 2 { // written while the first hook is held
		select {
		case <-changed:
		case <-giveUp:
			close(release)
			t.Fatal("the second batch was not written while the first batch's hook ran")
		}
		changed = j.Changed()
	}
	if off, _ := c.Durable(); off != 0 {
		t.Fatalf("Durable = %d while the first hook runs", off)
	}
	close(release)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if off, lsn := c.Durable(); off != 2 || lsn != j.LastEndLSN() {
		t.Fatalf("Durable = %d %v after Flush, journal ends at %v", off, lsn, j.LastEndLSN())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []pgq.Offset{1, 2}) {
		t.Fatalf("hooks ran for offsets %v, want [1 2]", order)
	}
}
