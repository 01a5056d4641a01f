package backfill

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq/api"
)

// MaxParallelism bounds a request's parallelism: each range holds a
// database connection while the table is read.
const MaxParallelism = 16

// DefaultParallelism is the parallelism of a request that gives none:
// twice the CPUs Go may use, up to 4. A range's reader waits for the
// server between its chunks (the watermark's commit, the chunk's round
// trip), so two ranges per core keep the cores busy: on 2 cores, 4 ranges
// read a 5,000,000-row table 1.00–1.10× as fast as COPY where 2 read it
// 0.83–0.91× (benchmarks/README.md). More ranges than that only add
// connections and watches (ingest inspects each change once per watch).
func DefaultParallelism() int {
	return min(2*runtime.GOMAXPROCS(0), 4)
}

// checkParallelism validates a request's parallelism (0: the default).
func checkParallelism(p int) (int, error) {
	if p == 0 {
		return DefaultParallelism(), nil
	}
	if p < 1 || p > MaxParallelism {
		return 0, api.Errorf(api.ErrBadRequest, "backfill: parallelism %d: want 1..%d (0: the default)", p, MaxParallelism)
	}
	return p, nil
}

// keyRange is one key range of a table, read on its own connection with
// its own watch: the rows whose first key column is above After (nil:
// from the table's start) and at most UpTo (nil: to its end), in chunks
// after LastKey (nil: none read yet). It is stored with the backfill
// after each chunk of the range is durable, so a resumed backfill goes on
// in each range after that range's last chunk.
type keyRange struct {
	After   *string  `json:"after,omitempty"`
	UpTo    *string  `json:"up_to,omitempty"`
	LastKey []string `json:"last_key,omitempty"`
	Rows    int64    `json:"rows"`
	Done    bool     `json:"done,omitempty"`
}

// cloneRanges is a deep copy of rs, for a runner to read while the
// manager's copy changes.
func cloneRanges(rs []keyRange) []keyRange {
	out := slices.Clone(rs)
	for i := range out {
		out[i].LastKey = slices.Clone(out[i].LastKey)
	}
	return out
}

// Integer type OIDs whose key space splitRanges divides by min and max.
const (
	oidInt8 = 20
	oidInt2 = 21
	oidInt4 = 23
)

// splitRanges divides t's key space into at most n ranges of its first
// key column, as pg_dump -j divides a dump into tables and PeerDB a table
// into CTID ranges, but by key, since the watermark rule needs one: for
// an integer column into equal spans between its minimum and maximum
// (two index lookups), else at the bounds of the column's histogram in
// pg_stats (equal row counts as ANALYZE last saw them). A table without
// statistics, an empty one or n == 1 is one range. The first range has
// no lower bound and the last no upper bound, so rows inserted outside
// the bounds meanwhile are still in one of them.
func splitRanges(ctx context.Context, conn *pgx.Conn, t *table, n int) ([]keyRange, error) {
	if n <= 1 {
		return []keyRange{{}}, nil
	}
	var bounds []string
	var err error
	switch t.columns[t.keyIdx[0]].TypeOID {
	case oidInt2, oidInt4, oidInt8:
		bounds, err = intBounds(ctx, conn, t, n)
	default:
		bounds, err = histogramBounds(ctx, conn, t, n)
	}
	if err != nil {
		return nil, err
	}
	return rangesOf(bounds), nil
}

// rangesOf is the ranges between strictly increasing bounds.
func rangesOf(bounds []string) []keyRange {
	out := make([]keyRange, 0, len(bounds)+1)
	var after *string
	for i := range bounds {
		out = append(out, keyRange{After: after, UpTo: &bounds[i]})
		after = &bounds[i]
	}
	return append(out, keyRange{After: after})
}

// intBounds are the n-1 inner bounds of n equal spans of t's integer
// first key column between its minimum and maximum (fewer when the span
// is narrower than n).
func intBounds(ctx context.Context, conn *pgx.Conn, t *table, n int) ([]string, error) {
	col := pgx.Identifier{t.columns[t.keyIdx[0]].Name}.Sanitize()
	var lo, hi *int64
	err := conn.QueryRow(ctx, "SELECT min("+col+")::int8, max("+col+")::int8 FROM "+t.source()).Scan(&lo, &hi)
	if err != nil {
		return nil, fmt.Errorf("backfill: key range of %s: %w", t.qualified(), err)
	}
	if lo == nil || hi == nil {
		return nil, nil
	}
	return spanBounds(*lo, *hi, n), nil
}

// spanBounds are the n-1 inner bounds of n equal spans of [lo, hi],
// strictly increasing, none equal to hi.
func spanBounds(lo, hi int64, n int) []string {
	span := uint64(hi - lo) // hi >= lo: no overflow in uint64
	var out []string
	var prev int64
	for i := 1; i < n; i++ {
		// span/n*i + span%n*i/n without overflowing uint64.
		off := span/uint64(n)*uint64(i) + span%uint64(n)*uint64(i)/uint64(n)
		b := lo + int64(off)
		if (len(out) > 0 && b <= prev) || b >= hi {
			continue
		}
		out = append(out, strconv.FormatInt(b, 10))
		prev = b
	}
	return out
}

// histogramBounds are n-1 bounds of t's first key column taken evenly
// from its pg_stats histogram (none without statistics: run ANALYZE).
func histogramBounds(ctx context.Context, conn *pgx.Conn, t *table, n int) ([]string, error) {
	var hist []string
	err := conn.QueryRow(ctx, `SELECT histogram_bounds::text::text[] FROM pg_stats
		WHERE schemaname = $1 AND tablename = $2 AND attname = $3 AND NOT inherited`,
		t.schema, t.name, t.columns[t.keyIdx[0]].Name).Scan(&hist)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backfill: key histogram of %s: %w", t.qualified(), err)
	}
	return pickBounds(hist, n), nil
}

// pickBounds takes n-1 bounds evenly from a histogram's (ascending)
// bounds, leaving out its ends and repeats.
func pickBounds(hist []string, n int) []string {
	if len(hist) < 3 {
		return nil
	}
	var out []string
	for i := 1; i < n; i++ {
		b := hist[i*(len(hist)-1)/n]
		if i*(len(hist)-1)/n == 0 || (len(out) > 0 && out[len(out)-1] == b) {
			continue
		}
		out = append(out, b)
	}
	return out
}

// bounds is the part of a chunk's query that keeps it in its range.
type bounds struct {
	after, upTo *string
}

func (r keyRange) bounds() bounds { return bounds{after: r.After, upTo: r.UpTo} }
