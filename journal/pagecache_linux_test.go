package journal

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pgq-dev/pgq/internal/vfsutil"
)

// TestSealedSegmentsLeaveThePageCache: by default a sealed segment's
// pages leave the page cache at its seal and the tail's stay;
// KeepSealedCached keeps them. Records read back either way.
func TestSealedSegmentsLeaveThePageCache(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			dir := t.TempDir()
			j, err := Open(Options{Dir: dir, SegmentSize: 64 << 10, Logger: testLogger(t), KeepSealedCached: keep})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			fill(t, j, 1, 2000)
			segs, err := j.Segments()
			if err != nil || len(segs) < 3 {
				t.Fatalf("Segments: %d, %v; want several", len(segs), err)
			}
			for k, s := range segs {
				in, all, err := vfsutil.CachedPages(s.Path)
				if err != nil {
					t.Fatal(err)
				}
				tail := k == len(segs)-1
				switch {
				case tail && in == 0:
					t.Errorf("tail segment %s: none of its %d pages cached", filepath.Base(s.Path), all)
				case !tail && !keep && in > 0:
					t.Errorf("sealed segment %s: %d of %d pages cached after its seal", filepath.Base(s.Path), in, all)
				case !tail && keep && in == 0:
					t.Errorf("sealed segment %s: none of its %d pages cached with KeepSealedCached", filepath.Base(s.Path), all)
				}
			}
			checkRecords(t, j, 1, 2000)
		})
	}
}
