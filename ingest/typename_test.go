package ingest_test

import (
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// firstChange waits for the first journaled change of table with op.
func firstChange(t *testing.T, dir, table string, op pgq.Op) *pgq.Change {
	t.Helper()
	var ch *pgq.Change
	waitFor(t, 20*time.Second, table+"'s change", func() bool {
		for _, tx := range records(t, dir) {
			for i := range tx.Changes {
				if tx.Changes[i].Op == op && tx.Changes[i].Table == table {
					ch = &tx.Changes[i]
					return true
				}
			}
		}
		return false
	})
	return ch
}

// TestTypeNameJournaled: a column of an extension's type journals the
// type's name (pgq.Column.TypeName): hstore, citext and ltree by their
// pg_type.typname, an hstore[] as "hstore[]", a domain over hstore as
// hstore; an enum, an enum[], a domain over int4, a composite type and
// the built-in types journal none. A backfill's read changes carry the
// same columns.
func TestTypeNameJournaled(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE EXTENSION hstore; CREATE EXTENSION citext; CREATE EXTENSION ltree;
		CREATE TYPE mood AS ENUM ('ok'); CREATE DOMAIN dhs AS hstore; CREATE DOMAIN d4 AS int4; CREATE TYPE pair AS (a int, b int)`)
	db.Exec(t, `CREATE TABLE tn (id int PRIMARY KEY, hs hstore, hsarr hstore[], dh dhs, ci citext, lt ltree,
		m mood, ma mood[], d d4, p pair, note text, ta text[])`)
	want := map[string]string{"id": "", "hs": "hstore", "hsarr": "hstore[]", "dh": "hstore", "ci": "citext", "lt": "ltree",
		"m": "", "ma": "", "d": "", "p": "", "note": "", "ta": ""}

	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO tn VALUES (1, 'a=>b', array['c=>d'::hstore], 'e=>f', 'X', 'a.b', 'ok', '{ok}', 4, '(1,2)', 'n', '{t}')`)
	ch := firstChange(t, dir, "tn", pgq.OpInsert)
	if len(ch.Columns) != len(want) {
		t.Fatalf("%d columns journaled, want %d", len(ch.Columns), len(want))
	}
	for _, col := range ch.Columns {
		if col.TypeName != want[col.Name] {
			t.Errorf("column %s: journaled type name %q, want %q", col.Name, col.TypeName, want[col.Name])
		}
	}
	if hs := ch.Columns[1]; hs.BaseTypeOID != 0 || hs.ValueType() != hs.TypeOID {
		t.Errorf("hstore column %+v: want its own value type", hs)
	}

	checkBackfillColumns(t, r, dir, "tn", ch.Columns)
}

// checkBackfillColumns backfills public.table and checks that its read
// changes carry the columns streamed, as journaled by the streamed
// change (base types, type modifiers and type names too).
func checkBackfillColumns(t *testing.T, r *running, dir, table string, streamed []pgq.Column) {
	t.Helper()
	st := startBackfill(t, r, map[string]any{"tables": []string{"public." + table}})
	waitBackfill(t, r, st.ID, "done", 30*time.Second)
	read := firstChange(t, dir, table, pgq.OpRead)
	if len(read.Columns) != len(streamed) {
		t.Errorf("backfill columns %+v, streamed %+v", read.Columns, streamed)
	}
	for i, col := range read.Columns {
		if i >= len(streamed) || col != streamed[i] {
			t.Errorf("backfill column %d %+v, streamed %+v", i, col, streamed)
		}
	}
}
