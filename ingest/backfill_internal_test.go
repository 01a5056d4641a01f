package ingest

import "testing"

// TestWatermarkVisible checks PostgreSQL's snapshot rules on the 32-bit
// xids pgoutput carries, across the wraparound of the full xids' low bits.
func TestWatermarkVisible(t *testing.T) {
	const epoch = 1 << 32
	for _, tc := range []struct {
		name string
		wm   Watermark
		xid  uint32
		want bool
	}{
		{"below xmin", Watermark{Xmin: 100, Xmax: 110}, 99, true},
		{"between, not in xip", Watermark{Xmin: 100, Xmax: 110, Xip: []uint64{100, 105}}, 104, true},
		{"in xip", Watermark{Xmin: 100, Xmax: 110, Xip: []uint64{100, 105}}, 105, false},
		{"xmin itself in xip", Watermark{Xmin: 100, Xmax: 110, Xip: []uint64{100}}, 100, false},
		{"at xmax", Watermark{Xmin: 100, Xmax: 110}, 110, false},
		{"above xmax, not listed", Watermark{Xmin: 100, Xmax: 110}, 111, false},
		{"xmax wrapped, xid before it", Watermark{Xmin: epoch - 5, Xmax: epoch + 3}, 1, true},
		{"xmax wrapped, xid at it", Watermark{Xmin: epoch - 5, Xmax: epoch + 3}, 3, false},
		{"xmax wrapped, xid in xip", Watermark{Xmin: epoch - 5, Xmax: epoch + 3, Xip: []uint64{epoch + 1}}, 1, false},
		{"xmin wrapped, xid older", Watermark{Xmin: 2*epoch + 2, Xmax: 2*epoch + 9}, ^uint32(0), true},
	} {
		if got := tc.wm.visible(tc.xid); got != tc.want {
			t.Errorf("%s: visible(%d) to %+v = %v, want %v", tc.name, tc.xid, tc.wm, got, tc.want)
		}
	}
}
