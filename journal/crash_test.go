package journal

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/pgq-dev/pgq"
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
