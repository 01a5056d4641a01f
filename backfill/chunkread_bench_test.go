package backfill

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// BenchmarkChunkRead measures a backfill's read path on a table of the
// backfill benchmark's shape (benchmarks/backfill.go: bigint key, int,
// numeric(12,2), text, timestamptz; 300,000 rows unless -chunkread.rows
// says otherwise) against COPY (SELECT * FROM t) TO STDOUT of the table
// into io.Discard, on the same server in
// the same run: each round times every way once, interleaved, and each
// figure is the best of the rounds (a shared machine only ever slows a
// way down). The ways, each as a ratio to COPY (x-…, above 1 is faster):
//
//   - step: what a backfill does per chunk (step: a low watermark, the
//     snapshot, the keyset SELECT in text format, the rows encoded into
//     their record), chunk after chunk;
//   - select-text: the same keyset query alone, rows received and
//     dropped;
//   - select-checked, select-interval, select-prepared,
//     select-numeric-binary: variants of it (readByVariant), and
//     select-50k: it with chunks of 50,000 rows;
//   - copy-text: the same query as COPY (…) TO STDOUT, text format (what
//     a COPY-based chunk reader would receive);
//   - select-binary, copy-binary: both in binary format, which a backfill
//     cannot journal as is (its journal holds PostgreSQL's text forms,
//     which the stream sends), the bound of what binary transfer could
//     save the server.
//
// Beside the wall-time ratios it reports the server's CPU time as a ratio
// to COPY's (xcpu-…, the backend's /proc/PID/stat summed over the rounds:
// a loaded machine disturbs it less than wall time), and -v logs each
// way's best wall time and the server's and the client's CPU time.
//
// It is also what -cpuprofile/-memprofile of the read path profile:
//
//	go test -run '^$' -bench ChunkRead -benchtime=1x ./backfill
//	go test -run '^$' -bench ChunkRead -benchtime=1x -v ./backfill -args \
//		-chunkread.rows 1000000 -chunkread.ways step,select-text,select-checked
func BenchmarkChunkRead(b *testing.B) {
	rows, chunk, rounds := *chunkReadRows, DefaultChunkSize, *chunkReadRounds
	ctx := context.Background()
	db := pgtest.Shared(b).NewDB(b)
	db.Exec(b, fmt.Sprintf(`CREATE TABLE bench (id bigint PRIMARY KEY, account int, amount numeric(12,2), note text, created timestamptz);
		INSERT INTO bench SELECT g, g %% 1000, (g %% 10000) / 100.0, 'backfilled row ' || g, now() FROM generate_series(1, %d) g`, rows),
		"VACUUM ANALYZE bench")
	conn, err := pgtest.Shared(b).Connect(ctx, db.Name)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	tbl, err := describe(ctx, conn, "public.bench")
	if err != nil {
		b.Fatal(err)
	}
	ways := []struct {
		name string
		read func(b *testing.B, conn *pgx.Conn) int
	}{
		{"copy", func(b *testing.B, conn *pgx.Conn) int {
			ct, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT * FROM bench) TO STDOUT")
			if err != nil {
				b.Fatal(err)
			}
			return int(ct.RowsAffected())
		}},
		{"step", func(b *testing.B, conn *pgx.Conn) int { return readByStep(ctx, b, conn, tbl, chunk) }},
		{"select-text", func(b *testing.B, conn *pgx.Conn) int { return readByQuery(ctx, b, conn, tbl, chunk, false, 0) }},
		{"copy-text", func(b *testing.B, conn *pgx.Conn) int { return readByQuery(ctx, b, conn, tbl, chunk, true, 0) }},
		{"select-binary", func(b *testing.B, conn *pgx.Conn) int { return readByQuery(ctx, b, conn, tbl, chunk, false, 1) }},
		{"copy-binary", func(b *testing.B, conn *pgx.Conn) int { return readByQuery(ctx, b, conn, tbl, chunk, true, 1) }},
		{"select-checked", func(b *testing.B, conn *pgx.Conn) int { return readByVariant(ctx, b, conn, tbl, chunk, "checked") }},
		{"select-interval", func(b *testing.B, conn *pgx.Conn) int { return readByVariant(ctx, b, conn, tbl, chunk, "interval") }},
		{"select-prepared", func(b *testing.B, conn *pgx.Conn) int { return readByVariant(ctx, b, conn, tbl, chunk, "prepared") }},
		{"select-numeric-binary", func(b *testing.B, conn *pgx.Conn) int {
			return readByVariant(ctx, b, conn, tbl, chunk, "numeric-binary")
		}},
		{"select-50k", func(b *testing.B, conn *pgx.Conn) int { return readByQuery(ctx, b, conn, tbl, 5*chunk, false, 0) }},
	}
	if *chunkReadWays != "" {
		pick := strings.Split(*chunkReadWays, ",")
		kept := ways[:1]
		for _, w := range ways[1:] {
			if slices.Contains(pick, w.name) {
				kept = append(kept, w)
			}
		}
		ways = kept
	}
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		best := make([]time.Duration, len(ways))
		server := make([]time.Duration, len(ways))
		client := make([]time.Duration, len(ways))
		for range rounds {
			for i, w := range ways {
				s0, c0 := procCPU(b, backend), selfCPU(b)
				start := time.Now()
				if n := w.read(b, conn); n != rows {
					b.Fatalf("%s read %d rows, want %d", w.name, n, rows)
				}
				if d := time.Since(start); best[i] == 0 || d < best[i] {
					best[i] = d
				}
				server[i] += procCPU(b, backend) - s0
				client[i] += selfCPU(b) - c0
			}
		}
		b.ReportMetric(float64(rows)/best[0].Seconds(), "copy-rows/s")
		for i, w := range ways[1:] {
			b.ReportMetric(best[0].Seconds()/best[i+1].Seconds(), "x-"+w.name)
			b.ReportMetric(server[0].Seconds()/server[i+1].Seconds(), "xcpu-"+w.name)
		}
		for i, w := range ways {
			b.Logf("%-21s best %6.3fs  server CPU %6.3fs  client CPU %6.3fs (%d rounds)", w.name, best[i].Seconds(), server[i].Seconds(), client[i].Seconds(), rounds)
		}
	}
}

// The table's size and the rounds of BenchmarkChunkRead: -args
// -chunkread.rows 1000000 makes the table (about 100 MB with its index)
// larger than the test cluster's shared_buffers (64 MB), as the backfill
// benchmark's 1M and 5M-row tables are; -chunkread.ways picks ways by
// name (a comma-separated list; copy is always measured, as the
// reference).
var (
	chunkReadRows   = flag.Int("chunkread.rows", 300_000, "BenchmarkChunkRead: rows of the table")
	chunkReadRounds = flag.Int("chunkread.rounds", 5, "BenchmarkChunkRead: rounds (each way once per round)")
	chunkReadWays   = flag.String("chunkread.ways", "", "BenchmarkChunkRead: ways to measure besides copy, comma-separated (empty: all)")
)

// procCPU is the CPU time process pid used so far (user and system,
// /proc/PID/stat, in clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces): state is
	// the first, utime the 12th and stime the 13th.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// selfCPU is this process's CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readByStep reads t chunk by chunk as a backfill does (step, with a low
// watermark each) and returns the rows read.
func readByStep(ctx context.Context, b *testing.B, conn *pgx.Conn, t *table, chunk int) int {
	var buf chunkBuf
	low := &ingest.Watermark{ID: "bench", Key: "k", Kind: "low"}
	var last []string
	n := 0
	for {
		got, _, err := step(ctx, conn, t, "", nil, low, last, bounds{}, chunk, "bench", &buf)
		if err != nil {
			b.Fatal(err)
		}
		n += got.rows
		if got.rows < chunk {
			return n
		}
		last = got.lastKey
	}
}

// readByQuery reads t's rows by the chunk query after each chunk's last
// key (the key is the first column, a bigint), as a SELECT or as COPY
// (…) TO STDOUT (COPY takes no parameters: the key is pasted as a
// literal), in format (0 text, 1 binary), dropping the rows; it returns
// the rows read.
func readByQuery(ctx context.Context, b *testing.B, conn *pgx.Conn, t *table, chunk int, viaCopy bool, format int16) int {
	var last int64
	n := 0
	for first := true; ; first = false {
		sql := t.chunkSQL("", !first, chunk, bounds{})
		var got int
		if viaCopy {
			opts := ""
			if format == 1 {
				opts = " (FORMAT binary)"
			}
			q := fmt.Sprintf("COPY (%s) TO STDOUT%s", strings.ReplaceAll(sql, "$1", fmt.Sprintf("'%d'", last)), opts)
			ct, err := conn.PgConn().CopyTo(ctx, io.Discard, q)
			if err != nil {
				b.Fatal(err)
			}
			got = int(ct.RowsAffected())
		} else {
			var args [][]byte
			if !first {
				args = [][]byte{fmt.Append(nil, last)}
			}
			rr := conn.PgConn().ExecParams(ctx, sql, args, nil, nil, []int16{format})
			for rr.NextRow() {
				got++
			}
			if _, err := rr.Close(); err != nil {
				b.Fatal(err)
			}
		}
		n += got
		last += int64(got) // the keys are 1..rows
		if got < chunk {
			return n
		}
	}
}

// readByVariant reads t's rows (the key is the first column, a bigint
// from 1 up) by a variant of the chunk query, in text format, dropping
// the rows, and returns the rows read:
//
//   - checked: each row also says whether it comes after the last key,
//     what chunkSQL sends with a where predicate (here "true");
//   - interval: no ORDER BY … LIMIT, rows of a key interval (id > $1 AND
//     id <= $1 + chunk), the chunks a range planner could bound;
//   - prepared: the chunk query prepared once and executed per chunk;
//   - numeric-binary: the numeric column in binary format, the others
//     in text.
func readByVariant(ctx context.Context, b *testing.B, conn *pgx.Conn, t *table, chunk int, variant string) int {
	var last int64
	n := 0
	sql := t.chunkSQL("", true, chunk, bounds{})
	formats := []int16{0}
	switch variant {
	case "checked":
		sql = t.chunkSQL("true", true, chunk, bounds{})
	case "interval":
		sql = "SELECT id, account, amount, note, created FROM bench WHERE id > $1::text::bigint AND id <= $2::text::bigint"
	case "prepared":
		if _, err := conn.PgConn().Prepare(ctx, "chunk", sql, nil); err != nil {
			b.Fatal(err)
		}
		defer func() {
			if _, err := conn.PgConn().Exec(ctx, "DEALLOCATE chunk").ReadAll(); err != nil {
				b.Fatal(err)
			}
		}()
	case "numeric-binary":
		formats = []int16{0, 0, 1, 0, 0}
	}
	for {
		args := [][]byte{fmt.Append(nil, last)}
		if variant == "interval" {
			args = append(args, fmt.Append(nil, last+int64(chunk)))
		}
		var rr *pgconn.ResultReader
		if variant == "prepared" {
			rr = conn.PgConn().ExecPrepared(ctx, "chunk", args, nil, formats)
		} else {
			rr = conn.PgConn().ExecParams(ctx, sql, args, nil, nil, formats)
		}
		got := 0
		for rr.NextRow() {
			got++
		}
		if _, err := rr.Close(); err != nil {
			b.Fatal(variant, err)
		}
		n += got
		last += int64(chunk)
		if got < chunk {
			return n
		}
	}
}
