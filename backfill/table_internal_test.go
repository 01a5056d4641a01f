package backfill

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/record"
)

// decodeRead is the read changes of a chunk's record, decoded as ingest
// decodes them when it needs them, but copied: the chunk's storage
// serves the next chunk.
func decodeRead(t testing.TB, c chunkRead) []pgq.Change {
	t.Helper()
	if c.rows == 0 {
		return nil
	}
	var tx pgq.Transaction
	if err := record.Decode(c.encoded[record.Headroom:], &tx); err != nil {
		t.Fatalf("chunk record: %v", err)
	}
	if len(tx.Changes) != c.rows || !tx.Final {
		t.Fatalf("chunk record: %d changes for %d rows (final %v)", len(tx.Changes), c.rows, tx.Final)
	}
	return tx.Changes
}

// texts is a row's values as text, "<null>" for NULL.
func texts(vals []pgq.Value) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v.Data)
		if v.Kind == pgq.ValueNull {
			out[i] = "<null>"
		}
	}
	return out
}

// TestReadChunkRecord: a chunk's rows go from the connection's buffer
// straight into their record (no change per row, no copy of the values
// elsewhere): read changes of the table, PostgreSQL's text forms and
// NULLs, a value larger than pgconn's buffer, every row once in key
// order across chunks, each chunk's last key where the next one starts,
// and one storage serving chunk after chunk (grown once, for the chunk
// with the large value, and not allocated again).
func TestReadChunkRecord(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (a int, b text, v text, n numeric, PRIMARY KEY (a, b))`,
		`INSERT INTO t SELECT g / 2, 'k' || g % 2, CASE WHEN g % 7 = 3 THEN NULL WHEN g = 77 THEN repeat('x', 3 << 20)
			ELSE repeat(chr(97 + g % 26), g) END, g / 3.0 FROM generate_series(1, 200) g`)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tb, err := describe(ctx, conn, "t")
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	rows, err := conn.Query(ctx, `SELECT a, b, v, n FROM t ORDER BY a, b`, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		row := make([]string, 4)
		for i, v := range rows.RawValues() {
			row[i] = string(v)
			if v == nil {
				row[i] = "<null>"
			}
		}
		want = append(want, row)
	}
	if err := rows.Err(); err != nil || len(want) != 200 {
		t.Fatalf("table: %d rows, %v", len(want), err)
	}

	var buf chunkBuf
	low := &ingest.Watermark{ID: "x", Kind: "low"}
	var after []string
	var got [][]string
	var caps []int
	for {
		r, _, err := step(ctx, conn, tb, "", nil, low, after, bounds{}, 30, "bf1", &buf)
		if err != nil {
			t.Fatal(err)
		}
		if r.rows == 0 {
			if r.encoded != nil || r.lastKey != nil {
				t.Fatalf("an empty chunk: record %d bytes, last key %v", len(r.encoded), r.lastKey)
			}
			break
		}
		for _, c := range decodeRead(t, r) {
			if c.Op != pgq.OpRead || c.Schema != "public" || c.Table != "t" || !slices.Equal(c.Columns, tb.columns) || c.Old != nil {
				t.Fatalf("chunk after %v: a change %+v", after, c)
			}
			got = append(got, texts(c.New))
		}
		if last := got[len(got)-1]; !slices.Equal(r.lastKey, last[:2]) {
			t.Fatalf("chunk after %v: last key %v, last row %v", after, r.lastKey, last[:2])
		}
		after = r.lastKey
		caps = append(caps, cap(buf.encoded))
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows read, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("row %d: %.60q, want %.60q", i, got[i], want[i])
		}
	}
	// The large value (row 77, in the chunk of rows 60 to 89) grows the
	// storage; the chunks after it reuse it.
	if len(caps) != 7 || caps[2] < 3<<20 || caps[2] != caps[6] {
		t.Fatalf("record storage by chunk %v: want it grown by the third chunk's large value, then reused", caps)
	}
}
