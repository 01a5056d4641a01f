package ingest_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// fidelityCorpus is a table of every kind of value a change carries, one
// column per type (its name says which), and rows that put each type's
// awkward values in it: NULLs, empty strings, backslashes, tabs, newlines
// and carriage returns, quotes, unicode, special numbers, infinities,
// arrays with NULL and quoted elements, domains, enums and a TOASTed
// value. The first columns and the first row are those of
// TestFidelityAgainstTestDecoding's table (fidelityColumns, fidelityRow).
var fidelityCorpus = struct {
	types []string // CREATE TYPE/DOMAIN statements
	ddl   string
	rows  []string
}{
	types: []string{
		`CREATE TYPE corpus_mood AS ENUM ('sad', 'happy', 'it''s \ odd')`,
		`CREATE DOMAIN corpus_label AS text CHECK (VALUE <> 'forbidden')`,
		`CREATE DOMAIN corpus_money AS numeric(12,2)`,
	},
	ddl: `CREATE TABLE corpus (` + fidelityColumns + `,
		i2 smallint, i4 int, n125 numeric(12,5), f4 real, vc varchar(20), ch char(5), nm name, js2 json,
		d date, t time, ttz timetz, tsp timestamp, tsp3 timestamp(3), iv interval, u uuid, ip inet, cidr_ cidr, mac macaddr,
		bits bit(4), vbits varbit, pt point, box_ box, r int4range, tsv tsvector, xm xml, mon money, o oid,
		tarr text[], arr2 int[][], jarr jsonb[], barr bytea[], narr numeric[], tsarr timestamptz[],
		m corpus_mood, marr corpus_mood[], lbl corpus_label, lblarr corpus_label[], cm corpus_money, big text)`,
	rows: []string{
		`INSERT INTO corpus (` + fidelityColumnNames + `) ` + fidelityRow,
		`INSERT INTO corpus (id) VALUES (2)`, // NULL everywhere else
		`INSERT INTO corpus VALUES (3, 0, 0, '', false, 'infinity', '{}', '{}', '', '-0',
			-32768, 2147483647, -0.00001, 'NaN', '', '', '', '  {"keep" :  "its spacing"}  ',
			'-infinity', '24:00:00', '00:00:00+14:59', 'infinity', '2026-02-03 04:05:06.789', '-1 year +2 mons -3 days 04:05:06.789',
			'00000000-0000-0000-0000-000000000000', '::1', '10.0.0.0/8', '08:00:2b:01:02:03',
			B'1010', B'', '(0,-0)', '((1,2),(3,4))', 'empty', '', '<a/>', -12.34, 4294967295,
			'{"",NULL,"NULL","a\\b","c\"d","e,f"," g ","{h}"}', '{{1,2},{NULL,4}}', '{"{\"k\": [1, null]}",NULL}', '{"\\x","\\x00ff"}',
			'{NaN,-1.5,0.000}', '{infinity,"2026-01-01 00:00:00+00"}',
			'it''s \ odd', '{sad,"it''s \\ odd",NULL}', '', '{"",x}', 0.5, '')`,
		`INSERT INTO corpus VALUES (4, -9223372036854775808, 'NaN', E'tab\there\nnewline\rcarriage\\backslash \\N not null \b\f\v \x01 end', NULL, '1999-12-31 23:59:59.999999-08',
			'{"uni": "\u00fc\u6f22\ud83d\ude00", "esc": "a\\b\n\t\"q\""}', '{NULL,-1,2147483647}', E'\\x5c00090a0d', 'Infinity',
			1, -1, 1234567.89012, '-Infinity', E'ü漢😀\\', E'a\tb', E'nm\\x', '[1, 2.50, "x"]',
			'0001-01-01 BC', '12:34:56.789012', '23:59:59.999999-12', '0001-01-01 00:00:00 BC', '2026-01-01 00:00:00.1', '1 mon 00:00:00.000001',
			'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2001:db8::ff00:42:8329/64', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff',
			B'0001', B'10101010101', '(1.5e-300,-2.5)', '((0,0),(0,0))', '[-5,5)', E'fat:2,4 cat:3A ''x y'':1 a\\\\b', E'<t>\n&amp;\t</t>', 0, 0,
			E'{"tab\\there","new\\nline","\u00fc"}', '{}', '{}', '{NULL}', '{}', '{}',
			'happy', '{}', E'back\\slash\ttab\nnew', E'{"back\\\\slash","tab\\there"}', -0.01, 'x')`,
		`INSERT INTO corpus (id, num, f8, f4, i8, txt) VALUES (5, 123456789012345678901234567890.123456789012345678901234567890, 1e-300, 3.4028235e38, 9223372036854775807, repeat(E'\\', 300))`,
		`INSERT INTO corpus (id, num, f8, f4, txt) VALUES (6, -0.000000000000000000001, 0.1, 0.1, E'\x7f\u00a0\u2028\ufeff')`,
		// Stored out of line: backfill and stream read it from TOAST.
		`INSERT INTO corpus (id, big, raw) VALUES (7, repeat(E'toast\t\\me\n', 10000), decode(repeat('00ff5c0a', 5000), 'hex'))`,
	},
}

// TestBackfillValuesEqualStreamed (issue 34): the journaled bytes of a
// backfilled row equal those of the same row streamed, type by type. The
// corpus's rows are inserted while pgq streams, then backfilled (small
// chunks, so that every chunk after the first reads after a key, and two
// key ranges); each row's read change must carry the same columns, and
// for every column the same kind of value (NULL or text) and the same
// bytes, as its insert. A second table, keyed by text values holding
// backslashes, tabs, quotes and unicode, checks the same of its keys,
// which also go back to the server as the next chunk's start.
//
// It runs twice: with the server's defaults, and with a database whose
// settings change how values are rendered (a time zone with a half-hour
// offset, SQL DateStyle, verbose intervals, bytea in escape format, floats
// with fewer digits), which the walsender and the backfill's connection
// both take: the bytes still match, since both render through the same
// output functions.
func TestBackfillValuesEqualStreamed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings []string
	}{
		{"defaults", nil},
		{"database settings", []string{`TimeZone = 'America/St_Johns'`, `DateStyle = 'SQL, DMY'`,
			`IntervalStyle = 'postgres_verbose'`, `bytea_output = 'escape'`, `extra_float_digits = 0`}},
	} {
		t.Run(tc.name, func(t *testing.T) { backfillEqualsStream(t, tc.settings) })
	}
}

// backfillEqualsStream is TestBackfillValuesEqualStreamed on a database
// with the given settings (ALTER DATABASE … SET).
func backfillEqualsStream(t *testing.T, settings []string) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	for _, set := range settings {
		db.Exec(t, "ALTER DATABASE "+db.Name+" SET "+set)
	}
	db.Exec(t, fidelityCorpus.types...)
	db.Exec(t, fidelityCorpus.ddl, `ALTER TABLE corpus ALTER COLUMN big SET STORAGE EXTERNAL`,
		`CREATE TABLE corpus_keys (k text PRIMARY KEY, v text)`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, fidelityCorpus.rows...)
	keys := []string{``, ` `, `\`, `\\`, `\N`, "a\tb", "a\nb", "a\rb", `'`, `"`, `ü`, `😀`, `zz`, `a,b`, `{x}`, `NULL`}
	for i, k := range keys {
		db.Exec(t, fmt.Sprintf(`INSERT INTO corpus_keys VALUES (%s, 'row %d')`, pgLiteral(k), i))
	}
	want := len(fidelityCorpus.rows) + len(keys)
	streamed := map[string]pgq.Change{}
	waitFor(t, 30*time.Second, "the inserts journaled", func() bool {
		streamed = changesByKey(records(t, dir), pgq.OpInsert)
		return len(streamed) == want
	})
	first := streamed[keyOf("corpus", "1")]
	if raw, _, _ := first.Get("raw", false); len(settings) > 0 && bytes.HasPrefix(raw.Data, []byte(`\x`)) {
		t.Fatalf("bytea streamed as %q: the database's bytea_output = 'escape' did not apply", raw.Data)
	}
	for _, tbl := range []string{"public.corpus", "public.corpus_keys"} {
		st := startBackfill(t, r, map[string]any{"tables": []string{tbl}, "chunk_size": 2, "parallelism": 2})
		waitBackfill(t, r, st.ID, "done", 60*time.Second)
	}
	var read map[string]pgq.Change
	waitFor(t, 30*time.Second, "the reads journaled", func() bool {
		read = changesByKey(records(t, dir), pgq.OpRead)
		return len(read) == want
	})
	compared := map[string]int{} // column → values compared
	for key, ins := range streamed {
		rd, ok := read[key]
		if !ok {
			t.Errorf("%s: streamed, not backfilled", key)
			continue
		}
		if len(rd.Columns) != len(ins.Columns) {
			t.Fatalf("%s: backfill has %d columns, stream %d", key, len(rd.Columns), len(ins.Columns))
		}
		for i, col := range ins.Columns {
			if rd.Columns[i] != col {
				t.Errorf("%s: column %d: backfill %+v, stream %+v", key, i, rd.Columns[i], col)
			}
			bv, sv := rd.New[i], ins.New[i]
			if bv.Kind != sv.Kind || !bytes.Equal(bv.Data, sv.Data) {
				t.Errorf("%s: column %s: backfill %v %.200q, stream %v %.200q", key, col.Name, bv.Kind, bv.Data, sv.Kind, sv.Data)
			}
			if sv.Kind == pgq.ValueText {
				compared[rd.Table+"."+col.Name]++
			}
		}
	}
	// Every column held at least one value that was not NULL: the test
	// compared bytes of each type, not only NULLs.
	for _, col := range streamed[keyOf("corpus", "1")].Columns {
		if compared["corpus."+col.Name] == 0 {
			t.Errorf("column %s: no value other than NULL compared", col.Name)
		}
	}
	if n := compared["corpus_keys.k"]; n != len(keys) {
		t.Errorf("compared %d keys of corpus_keys, want %d", n, len(keys))
	}
}

// changesByKey is the journal's changes of op by table and key (the text
// of the first column, the key of both corpus tables).
func changesByKey(txs []*pgq.Transaction, op pgq.Op) map[string]pgq.Change {
	out := map[string]pgq.Change{}
	for _, tx := range txs {
		for _, ch := range tx.Changes {
			if ch.Op == op && strings.HasPrefix(ch.Table, "corpus") {
				out[keyOf(ch.Table, string(ch.New[0].Data))] = ch
			}
		}
	}
	return out
}

func keyOf(table, key string) string { return fmt.Sprintf("%s %q", table, key) }

// pgLiteral quotes s as an escape string literal, whatever
// standard_conforming_strings says.
func pgLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
