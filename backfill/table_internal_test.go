package backfill

import (
	"bytes"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestChunkBufReuse: a chunk's storage, reset, holds the next chunk's rows
// correctly (narrower, wider and with values larger than a slab) and
// reuses its blocks and slabs instead of allocating new ones.
func TestChunkBufReuse(t *testing.T) {
	var b chunkBuf
	fill := func(rows, width, size int) [][]pgq.Value {
		b.reset()
		var out [][]pgq.Value
		for r := range rows {
			raw := make([][]byte, width)
			for c := range raw {
				if (r+c)%7 == 3 {
					continue // NULL
				}
				raw[c] = bytes.Repeat([]byte{byte('a' + (r+c)%26)}, 1+(r*c)%size)
			}
			out = append(out, b.row(raw))
		}
		return out
	}
	check := func(got [][]pgq.Value, width, size int) {
		t.Helper()
		for r, row := range got {
			if len(row) != width {
				t.Fatalf("row %d: %d values, want %d", r, len(row), width)
			}
			for c, v := range row {
				want := bytes.Repeat([]byte{byte('a' + (r+c)%26)}, 1+(r*c)%size)
				if (r+c)%7 == 3 {
					if v.Kind != pgq.ValueNull {
						t.Fatalf("row %d col %d: %v, want NULL", r, c, v)
					}
					continue
				}
				if v.Kind != pgq.ValueText || !bytes.Equal(v.Data, want) {
					t.Fatalf("row %d col %d: %q, want %q", r, c, v.Data, want)
				}
			}
		}
	}
	check(fill(10000, 5, 200), 5, 200)
	blocks, slabs := len(b.vals), len(b.slabs)
	check(fill(10000, 5, 200), 5, 200)
	if len(b.vals) != blocks || len(b.slabs) != slabs {
		t.Fatalf("the same chunk again grew the storage: %d/%d blocks, %d/%d slabs", len(b.vals), blocks, len(b.slabs), slabs)
	}
	check(fill(3000, 2, 50), 2, 50)
	check(fill(2000, 40, 300), 40, 300) // wider than the blocks were made for
	check(fill(3, 2, 3<<20), 2, 3<<20)  // values larger than a slab
	check(fill(10000, 5, 200), 5, 200)
}
