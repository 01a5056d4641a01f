package ingest_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestFidelityAgainstTestDecoding holds the journal to PostgreSQL's own
// reference decoder: a test_decoding slot created beside pgq's sees the
// same workload (many types, multi-row and streamed transactions, a
// rolled-back transaction and savepoint, updates and deletes), and both
// must give the same transactions with the same changes and the same value
// text. make test-matrix runs it on every supported major, where a decoder
// difference between servers would show here first.
func TestFidelityAgainstTestDecoding(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t,
		`CREATE TABLE fa (`+fidelityColumns+`)`,
		`CREATE TABLE fb (k text PRIMARY KEY, v varchar(20))`,
	)
	r := startSidecar(t, db, t.TempDir(), nil)
	r.waitStreaming(t)
	ref := "td_" + db.Name
	db.Exec(t, `SELECT pg_create_logical_replication_slot('`+ref+`', 'test_decoding')`)
	t.Cleanup(func() { _ = c.Exec(context.Background(), db.Name, `SELECT pg_drop_replication_slot('`+ref+`')`) })

	db.Exec(t,
		`INSERT INTO fa `+fidelityRow,
		`INSERT INTO fa (id) VALUES (2)`,
		`BEGIN; INSERT INTO fb VALUES ('x y', 'one'); UPDATE fa SET txt = 'two' WHERE id = 2; DELETE FROM fa WHERE id = 1; COMMIT`,
		`BEGIN; INSERT INTO fb VALUES ('gone', 'never'); ROLLBACK`,
		`BEGIN; INSERT INTO fb VALUES ('kept', 'a'); SAVEPOINT s; INSERT INTO fb VALUES ('undone', 'b'); ROLLBACK TO SAVEPOINT s; UPDATE fb SET v = NULL WHERE k = 'kept'; COMMIT`,
		// Larger than logical_decoding_work_mem (64kB in TestMain): pgq
		// receives it streamed in parts, test_decoding decodes it whole.
		`INSERT INTO fa (id, txt, f8) SELECT g, repeat('s', 100) || g, g / 7.0 FROM generate_series(100, 1600) g`,
		`UPDATE fa SET ok = false WHERE id BETWEEN 100 AND 120`,
		`DELETE FROM fb`,
	)
	// synchronous_commit is off in the harness: the SQL interface decodes
	// only up to the flushed WAL, so read until every commit is there.
	var want [][]string
	waitFor(t, 30*time.Second, "test_decoding to see the workload", func() bool {
		want = append(want, testDecodingTxs(t, db, ref)...)
		return len(want) >= 7
	})
	if len(want) != 7 {
		t.Fatalf("test_decoding gave %d transactions, want 7: %.2000q", len(want), want)
	}
	var got [][]string
	waitFor(t, 60*time.Second, "the journal to hold the workload", func() bool {
		got = journalTxs(records(t, r.Dir))
		return len(got) >= len(want)
	})
	if len(got) != len(want) {
		t.Fatalf("journal has %d transactions, test_decoding %d:\n%.1500q\n%.1500q", len(got), len(want), got, want)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("transaction %d differs:\njournal:       %.3000q\ntest_decoding: %.3000q", i, got[i], want[i])
		}
	}
}

// fidelityColumns are the columns of the test's first table, and
// fidelityRow (VALUES of them) its first row; TestBackfillValuesEqualStreamed's
// corpus starts with both.
const (
	fidelityColumns     = `id int PRIMARY KEY, i8 bigint, num numeric, txt text, ok bool, ts timestamptz, js jsonb, arr int[], raw bytea, f8 float8`
	fidelityColumnNames = `id, i8, num, txt, ok, ts, js, arr, raw, f8`
	fidelityRow         = `VALUES (1, 9007199254740993, 12345.678900, 'it''s "quoted"
with a newline and ü', true, '2026-01-02 03:04:05.123456+00', '{"a": [1, {"b": null}]}', '{1,NULL,3}', '\x00ff', -1.5e-300)`
)

// journalTxs renders each journaled row change as test_decoding's lines are
// rendered by tdChange, so the two can be compared as strings. The parts of
// a large transaction are joined back into one.
func journalTxs(txs []*pgq.Transaction) [][]string {
	var out [][]string
	var lines []string
	for _, tx := range txs {
		for _, ch := range tx.Changes {
			if s, ok := journalChange(ch); ok {
				lines = append(lines, s)
			}
		}
		if !tx.Final {
			continue
		}
		if len(lines) > 0 {
			out = append(out, lines)
		}
		lines = nil
	}
	return out
}

func journalChange(ch pgq.Change) (string, bool) {
	vals := ch.New
	if ch.Op == pgq.OpDelete {
		vals = ch.Old
	} else if ch.Op != pgq.OpInsert && ch.Op != pgq.OpUpdate {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s.%s %s", ch.Schema, ch.Table, strings.ToUpper(ch.Op.String()))
	for i, col := range ch.Columns {
		// test_decoding prints a delete's key columns only.
		if ch.Op == pgq.OpDelete && !col.Key {
			continue
		}
		v := "null"
		if vals[i].Kind == pgq.ValueText {
			v = string(vals[i].Data)
		}
		fmt.Fprintf(&b, " %s=%s", col.Name, v)
	}
	return b.String(), true
}

// testDecodingTxs reads the reference slot: BEGIN/COMMIT frame each
// transaction, every other line is one change.
func testDecodingTxs(t *testing.T, db *pgtest.DB, slot string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := db.C.Connect(ctx, db.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')`, slot)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	var cur []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		switch {
		case line == "BEGIN":
			cur = nil
		case line == "COMMIT":
			out = append(out, cur)
		default:
			s, err := tdChange(line)
			if err != nil {
				t.Fatalf("%v: %.200q", err, line)
			}
			cur = append(cur, s)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tdChange parses "table public.fa: INSERT: id[integer]:1 txt[text]:'a”b'"
// into "public.fa INSERT id=1 txt=a'b".
func tdChange(line string) (string, error) {
	rest, ok := strings.CutPrefix(line, "table ")
	if !ok {
		return "", fmt.Errorf("not a change line")
	}
	name, rest, ok := strings.Cut(rest, ": ")
	if !ok {
		return "", fmt.Errorf("no table")
	}
	op, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return "", fmt.Errorf("no op")
	}
	var b strings.Builder
	b.WriteString(name + " " + op)
	for rest = strings.TrimPrefix(rest, " "); rest != ""; rest = strings.TrimPrefix(rest, " ") {
		col, after, ok := strings.Cut(rest, "[")
		if !ok {
			return "", fmt.Errorf("no column type in %.40q", rest)
		}
		// The type name may hold spaces and "[]": it ends at "]:".
		typ, after, ok := strings.Cut(after, "]:")
		if !ok {
			return "", fmt.Errorf("unterminated column type")
		}
		val, tail, err := tdValue(after)
		if err != nil {
			return "", err
		}
		if tf, ok := map[string]string{"true": "t", "false": "f"}[val]; ok && typ == "boolean" {
			// test_decoding spells booleans out; pgoutput sends boolout's t/f.
			val = tf
		}
		fmt.Fprintf(&b, " %s=%s", col, val)
		rest = tail
	}
	return b.String(), nil
}

// tdValue reads one value: 'quoted' with ” for a quote, or bare up to a
// space (numbers, booleans, null).
func tdValue(s string) (val, rest string, err error) {
	if !strings.HasPrefix(s, "'") {
		v, r, _ := strings.Cut(s, " ")
		return v, r, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		return b.String(), s[i+1:], nil
	}
	return "", "", fmt.Errorf("unterminated quoted value")
}
