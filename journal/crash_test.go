package journal

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// TestCrashRecovery simulates crashes: a workload with random batch and
// record sizes, small segments (rotation) and occasional TruncateFront
// runs on a crashable in-memory FS, in a fifth of the runs with big
// records among the small ones; before random file system operations
// (so inside appends, rotations and truncations too) the FS is cloned as
// a crash would leave it: everything synced plus a random share of what
// was not. Each clone is then opened (repair included) and checked: every
// record whose Append returned before the crash is there, byte-identical
// at its offset, offsets are dense, nothing is duplicated, and LastEndLSN
// is at least the last confirmed end (checkInvariants).
func TestCrashRecovery(t *testing.T) {
	iters := 500 // about 2 s
	if testing.Short() || raceEnabled {
		iters = 100
	}
	clones := 0
	for it := range iters {
		rng := rand.New(rand.NewPCG(uint64(it), 0x70677121))
		mem := vfs.NewCrashableMem()
		type crash struct {
			fs *vfs.MemFS
			a  acked
			op int
		}
		var (
			crashes []crash
			a       acked // what the writer was told so far
			ops     int
		)
		crashAt := func() {
			crashes = append(crashes, crash{
				fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}),
				a:  a,
				op: ops,
			})
		}
		every := 10 + rng.IntN(150)
		inj := errorfs.InjectorFunc(func(errorfs.Op) error {
			ops++
			if rng.IntN(every) == 0 && len(crashes) < 6 {
				crashAt() // before this operation runs
			}
			return nil
		})
		// A fifth of the runs mix in big records (every 9th), with
		// segments that hold none to a few of them.
		segSize := 300 + rng.IntN(16000)
		if it%5 == 1 {
			useBigRecords(t, 9)
			segSize = 100<<10 + rng.IntN(1<<20)
		} else {
			useBigRecords(t, 0)
		}
		j, err := Open(Options{Dir: "/pgq/journal", FS: errorfs.Wrap(mem, inj),
			SegmentSize: segSize, Logger: discardLogger})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 + rng.IntN(60) {
			if rng.IntN(12) == 0 {
				if target := j.LastOffset() - 1 - pgqOffset(rng.IntN(4)); target > j.FirstOffset() && target <= j.LastOffset() {
					a.truncTried = max(a.truncTried, target)
					if err := j.TruncateFront(target); err != nil {
						t.Fatal(err)
					}
					a.truncated = max(a.truncated, target)
				}
			}
			b := nextBatch(j.LastOffset()+1, 1+rng.IntN(8))
			if err := j.Append(b); err != nil {
				t.Fatal(err)
			}
			a.last, a.endLSN = b[len(b)-1].Offset, b[len(b)-1].EndLSN
		}
		crashAt() // and a crash at the end, after the last confirmation
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		for _, c := range crashes {
			clones++
			t.Run("", func(t *testing.T) {
				defer func() {
					if t.Failed() {
						t.Logf("iteration %d (big records every %d), crash before operation %d, confirmed %+v", it, bigEvery, c.op, c.a)
					}
				}()
				checkInvariants(t, c.fs, "/pgq/journal", c.a, false)
			})
			if t.Failed() {
				return
			}
		}
	}
	t.Logf("%d iterations, %d crash clones checked", iters, clones)
}

func pgqOffset(n int) pgq.Offset { return pgq.Offset(n) }

// bigParts returns transaction i of mkTx's split into n parts of one
// change each, every change holding a value of 300 KiB: a bulk
// transaction's parts, each a big record (internal/wal's path straight
// to the file).
func bigParts(i, n int) []*pgq.Transaction {
	whole := mkTx(i, n)
	out := make([]*pgq.Transaction, n)
	for k := range n {
		p := *whole
		p.Part, p.Final = uint32(k), k == n-1
		c := whole.Changes[k]
		c.New = []pgq.Value{c.New[0], {Kind: pgq.ValueText, Data: bytes.Repeat([]byte{'p', byte(i), byte(k)}, 100<<10)}}
		p.Changes = []pgq.Change{c}
		out[k] = &p
	}
	return out
}

// TestCrashBigParts simulates crashes, as TestCrashRecovery does, while
// transactions of big parts are journaled a part or two per Append
// between small transactions, with segments that roll inside them. Each
// clone opens with every record up to the last acknowledged final one,
// byte-identical, nothing after a final record but whole transactions
// (Open cuts unfinished parts), LastEndLSN the last final record's end,
// valid checksum files, and the journal goes on.
func TestCrashBigParts(t *testing.T) {
	iters := 24
	if testing.Short() || raceEnabled {
		iters = 6
	}
	for it := range iters {
		rng := rand.New(rand.NewPCG(uint64(it), 0x62696770))
		mem := vfs.NewCrashableMem()
		type crash struct {
			fs         *vfs.MemFS
			last       pgq.Offset // the last acknowledged final record
			end        pgq.LSN
			op, listed int
		}
		var (
			crashes []crash
			want    = [][]byte{nil} // by offset: every record appended or being appended
			last    pgq.Offset
			end     pgq.LSN
			ops     int
		)
		every := 20 + rng.IntN(60)
		inj := errorfs.InjectorFunc(func(errorfs.Op) error {
			ops++
			if rng.IntN(every) == 0 && len(crashes) < 8 {
				crashes = append(crashes, crash{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}),
					last: last, end: end, op: ops, listed: len(want) - 1})
			}
			return nil
		})
		j, err := Open(Options{Dir: "/pgq/journal", FS: errorfs.Wrap(mem, inj), SegmentSize: 200<<10 + rng.IntN(1<<20), Logger: discardLogger})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 6; i++ {
			txs := []*pgq.Transaction{mkTx(2*i, 1+i%3)}
			if i%2 == 1 {
				txs = bigParts(2*i+1, 2+rng.IntN(5))
			}
			for len(txs) > 0 {
				b := txs[:min(len(txs), 1+rng.IntN(2))]
				txs = txs[len(b):]
				for _, tx := range b {
					want = append(want, record.Append(nil, tx))
				}
				if err := j.Append(b); err != nil {
					t.Fatal(err)
				}
				if tx := b[len(b)-1]; tx.Final {
					last, end = tx.Offset, tx.EndLSN
				}
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		crashes = append(crashes, crash{fs: mem, last: last, end: end, op: ops, listed: len(want) - 1})
		for _, c := range crashes {
			t.Run("", func(t *testing.T) {
				defer func() {
					if t.Failed() {
						t.Logf("iteration %d, crash before operation %d, acknowledged up to %d", it, c.op, c.last)
					}
				}()
				j, err := Open(Options{Dir: "/pgq/journal", FS: c.fs, Logger: discardLogger})
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer j.Close()
				got := j.LastOffset()
				if got < c.last || int(got) > c.listed {
					t.Fatalf("reopened journal ends at %d; %d was acknowledged, %d appended", got, c.last, c.listed)
				}
				for o := pgq.Offset(1); o <= got; o++ {
					if raw, err := j.ReadRaw(o); err != nil || !bytes.Equal(raw, want[o]) {
						t.Fatalf("offset %d: %v (%d bytes, want %d)", o, err, len(raw), len(want[o]))
					}
				}
				if got > 0 {
					tx, err := j.Read(got)
					if err != nil {
						t.Fatal(err)
					}
					if !tx.Final || j.LastEndLSN() != tx.EndLSN || tx.EndLSN < c.end {
						t.Fatalf("last record %d: part %d final %v end %v, LastEndLSN %v, acknowledged end %v", got, tx.Part, tx.Final, tx.EndLSN, j.LastEndLSN(), c.end)
					}
				}
				checkSums(t, c.fs, j)
				if err := j.Append([]*pgq.Transaction{mkTx(100, 1)}); err != nil {
					t.Fatalf("append after reopen: %v", err)
				}
			})
			if t.Failed() {
				return
			}
		}
	}
}
