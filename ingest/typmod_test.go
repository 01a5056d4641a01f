package ingest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestTypmodJournaled: each column's type modifier travels from
// PostgreSQL's Relation message into the journal: numeric(10,3) is
// ((10<<16)|3)+4, timestamp(3) and time(3) are 3, timestamp(0) is 0,
// varchar(8) is 8+4, and a column declared without one (numeric, text,
// int) has -1, each as pg_attribute.atttypmod states it.
func TestTypmodJournaled(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE tm (id int PRIMARY KEY, amount numeric(10,3), at timestamp(3), at0 timestamp(0),
		t3 time(3), free numeric, tz timestamptz, name varchar(8), note text)`)
	want := map[string]int32{"id": -1, "amount": 10<<16 | 3 + 4, "at": 3, "at0": 0, "t3": 3, "free": -1, "tz": -1, "name": 12, "note": -1}
	// The catalog says the same (the expected values above are
	// PostgreSQL's, not pgq's).
	var catalog string
	db.QueryRow(t, `SELECT string_agg(attname || '=' || atttypmod, ',' ORDER BY attnum) FROM pg_attribute
		WHERE attrelid = 'tm'::regclass AND attnum > 0`, &catalog)
	for _, kv := range strings.Split(catalog, ",") {
		name, mod, _ := strings.Cut(kv, "=")
		if fmt.Sprint(want[name]) != mod {
			t.Fatalf("pg_attribute: %s has typmod %s, test expects %d", name, mod, want[name])
		}
	}

	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO tm VALUES (1, 1.5, '2024-01-01 00:00:00.123456', '2024-01-01 00:00:00.6', '10:00:00.1234',
		1.25, '2024-01-01 00:00:00+00', 'abc', 'x')`)
	ch := firstChange(t, dir, "tm", pgq.OpInsert)
	if len(ch.Columns) != len(want) {
		t.Fatalf("%d columns journaled, want %d", len(ch.Columns), len(want))
	}
	for _, col := range ch.Columns {
		if m := col.Typmod(); m != want[col.Name] {
			t.Errorf("column %s: journaled typmod %d, want %d", col.Name, m, want[col.Name])
		}
	}
	// A backfill's read changes carry the same columns, modifiers too.
	checkBackfillColumns(t, r, dir, "tm", ch.Columns)
	// PostgreSQL applied the modifiers to the values: the journal holds
	// them as sent.
	if got := string(ch.New[1].Data) + " " + string(ch.New[2].Data); got != "1.500 2024-01-01 00:00:00.123" {
		t.Errorf("values %q", got)
	}
}
