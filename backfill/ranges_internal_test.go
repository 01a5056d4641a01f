package backfill

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestSpanBounds: n equal spans of [lo, hi] have strictly increasing inner
// bounds inside it, none at hi, fewer when the span is narrower than n,
// and no overflow at the ends of int64.
func TestSpanBounds(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int64
		n      int
		want   []string
	}{
		{1, 100, 4, []string{"25", "50", "75"}},
		{1, 4000, 2, []string{"2000"}},
		{5, 5, 4, nil},
		{1, 3, 8, []string{"1", "2"}},
		{math.MinInt64, math.MaxInt64, 2, []string{"-1"}},
		{-10, 10, 4, []string{"-5", "0", "5"}},
	} {
		got := spanBounds(tc.lo, tc.hi, tc.n)
		if !slices.Equal(got, tc.want) {
			t.Errorf("spanBounds(%d, %d, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
		}
		prev := int64(math.MinInt64)
		for i, b := range got {
			v, _ := strconv.ParseInt(b, 10, 64)
			if (i > 0 && v <= prev) || v < tc.lo || v >= tc.hi {
				t.Errorf("spanBounds(%d, %d, %d) = %v: bound %d out of order or range", tc.lo, tc.hi, tc.n, got, v)
			}
			prev = v
		}
	}
}

// TestPickBounds: bounds come evenly from inside the histogram, without
// its ends or repeats; a histogram too small gives none.
func TestPickBounds(t *testing.T) {
	hist := make([]string, 101)
	for i := range hist {
		hist[i] = fmt.Sprintf("k%03d", i)
	}
	if got, want := pickBounds(hist, 4), []string{"k025", "k050", "k075"}; !slices.Equal(got, want) {
		t.Errorf("pickBounds(101 bounds, 4) = %v, want %v", got, want)
	}
	if got := pickBounds([]string{"a", "b"}, 4); got != nil {
		t.Errorf("pickBounds(2 bounds) = %v, want none", got)
	}
	if got, want := pickBounds([]string{"a", "b", "c"}, 8), []string{"b"}; !slices.Equal(got, want) {
		t.Errorf("pickBounds(3 bounds, 8) = %v, want %v", got, want)
	}
}

// TestRangesOf: ranges between bounds cover the key space once, the
// first open below and the last open above.
func TestRangesOf(t *testing.T) {
	rs := rangesOf([]string{"10", "20"})
	if len(rs) != 3 || rs[0].After != nil || *rs[0].UpTo != "10" || *rs[1].After != "10" || *rs[1].UpTo != "20" || *rs[2].After != "20" || rs[2].UpTo != nil {
		t.Fatalf("rangesOf: %+v", rs)
	}
	if rs := rangesOf(nil); len(rs) != 1 || rs[0].After != nil || rs[0].UpTo != nil {
		t.Fatalf("rangesOf(nil): %+v", rs)
	}
}

// TestChunkSQLBounds: a range's bounds follow the key's parameters.
func TestChunkSQLBounds(t *testing.T) {
	tb := &table{schema: "public", name: "t", types: []string{"integer", "text"}, keyIdx: []int{0}}
	tb.columns = []pgq.Column{{Name: "id", TypeOID: oidInt4, Key: true}, {Name: "v", TypeOID: 25}}
	lo, hi := "10", "20"
	got := tb.chunkSQL("", true, 5, bounds{after: &lo, upTo: &hi})
	want := `SELECT "id", "v" FROM "public"."t" WHERE ("id") > ($1::text::integer) AND "id" > $2::text::integer AND "id" <= $3::text::integer ORDER BY "id" LIMIT 5`
	if got != want {
		t.Errorf("chunkSQL:\n got %s\nwant %s", got, want)
	}
	// With a where, each row says whether it comes after the key.
	got = tb.chunkSQL("v <> 'x'", true, 5, bounds{after: &lo, upTo: &hi})
	want = `SELECT "id", "v", ("id") > ($1::text::integer) FROM "public"."t" WHERE ("id") > ($1::text::integer) AND "id" > $2::text::integer AND "id" <= $3::text::integer AND (v <> 'x'` + "\n" + `) ORDER BY "id" LIMIT 5`
	if got != want {
		t.Errorf("chunkSQL:\n got %s\nwant %s", got, want)
	}
	got = tb.chunkSQL("", false, 5, bounds{upTo: &hi})
	want = `SELECT "id", "v" FROM "public"."t" WHERE "id" <= $1::text::integer ORDER BY "id" LIMIT 5`
	if got != want {
		t.Errorf("chunkSQL:\n got %s\nwant %s", got, want)
	}
}

// TestRangeDepth: one or two ranges read four chunks deep, more ranges
// fewer, never under two (one read while the one before is journaled),
// and the chunks in memory for a table stay within 8 or 2 per range.
func TestRangeDepth(t *testing.T) {
	for ranges, want := range map[int]int{0: 4, 1: 4, 2: 4, 3: 2, 4: 2, 8: 2, 64: 2} {
		got := rangeDepth(ranges)
		if got != want {
			t.Errorf("rangeDepth(%d) = %d, want %d", ranges, got, want)
		}
		if ranges > 0 && got*ranges > max(chunksInFlight, minDepth*ranges) {
			t.Errorf("%d ranges × depth %d exceed the table's bound", ranges, got)
		}
	}
}

// TestPipelineWaits: a range reads ahead up to its depth, no further
// than two chunks when their storage is over its budget, and waits for
// every awaited chunk at its end.
func TestPipelineWaits(t *testing.T) {
	chunk := &inflight{footprint: 5 << 20}
	for _, c := range []struct {
		name                  string
		awaited, held, budget int
		prev, end             bool
		want                  bool
	}{
		{"two deep: prev and next", 0, 0, 48 << 20, true, false, false},
		{"three deep", 1, 5 << 20, 48 << 20, true, false, false},
		{"four deep", 2, 10 << 20, 48 << 20, true, false, false},
		{"five would exceed the depth", 3, 15 << 20, 48 << 20, true, false, true},
		{"over budget: two deep only", 1, 50 << 20, 48 << 20, true, false, true},
		{"over budget but two deep", 0, 0, 1 << 20, true, false, false},
		{"end with chunks awaited", 1, 5 << 20, 48 << 20, false, true, true},
		{"end with none awaited", 0, 0, 48 << 20, false, true, false},
	} {
		tr := &tableRun{depth: 4, awaited: c.awaited, held: c.held, budget: c.budget, end: c.end}
		if c.prev {
			tr.prev = chunk
		}
		if got := tr.mustWait(); got != c.want {
			t.Errorf("%s: mustWait() = %v, want %v", c.name, got, c.want)
		}
	}
}
