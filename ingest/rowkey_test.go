package ingest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// keyColumns names the columns flagged Key, "-" for none.
func keyColumns(cols []pgq.Column) string {
	var k []string
	for _, c := range cols {
		if c.Key {
			k = append(k, c.Name)
		}
	}
	if len(k) == 0 {
		return "-"
	}
	return strings.Join(k, ",")
}

// TestRowKeyFromCatalog: the journaled relation's key columns are the
// row's key under every replica identity: the primary key (DEFAULT, and
// FULL and NOTHING, where pgoutput flags every column or none), the
// replica identity index (USING INDEX), none for a FULL table without a
// primary key. A primary key added later holds from the table's next
// change on (PostgreSQL describes the table again), journaled after the
// captured ALTER TABLE.
func TestRowKeyFromCatalog(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t,
		`CREATE TABLE kd (id int PRIMARY KEY, v int)`,
		`CREATE TABLE kf (a int NOT NULL, id int NOT NULL, v int, PRIMARY KEY (id, a))`,
		`ALTER TABLE kf REPLICA IDENTITY FULL`,
		`CREATE TABLE kn (id int PRIMARY KEY, v int)`,
		`ALTER TABLE kn REPLICA IDENTITY NOTHING`,
		`CREATE TABLE ki (id int PRIMARY KEY, u int NOT NULL, v int)`,
		`CREATE UNIQUE INDEX ki_u ON ki (u)`,
		`ALTER TABLE ki REPLICA IDENTITY USING INDEX ki_u`,
		`CREATE TABLE kx (id int NOT NULL, v int)`,
		`ALTER TABLE kx REPLICA IDENTITY FULL`)
	if err := ingest.InstallDDLCapture(t.Context(), db.URL, ""); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t,
		`INSERT INTO kd VALUES (1, 1)`, `INSERT INTO kf VALUES (1, 1, 1)`, `INSERT INTO kn VALUES (1, 1)`,
		`INSERT INTO ki VALUES (1, 1, 1)`, `INSERT INTO kx VALUES (1, 1)`)
	// The key is read when ingest reads the table's description: had it
	// not read kx's yet, the key added below would hold for the insert
	// too (see resolveRowKey).
	waitFor(t, 20*time.Second, "5 records", func() bool { return len(records(t, dir)) >= 5 })
	db.Exec(t, `ALTER TABLE kx ADD PRIMARY KEY (id)`,
		`UPDATE kx SET v = 2`, `UPDATE kf SET v = 2`)
	var got []string
	waitFor(t, 20*time.Second, "8 records", func() bool {
		txs := records(t, dir)
		got = got[:0]
		for _, tx := range txs {
			for _, ch := range tx.Changes {
				switch ch.Op {
				case pgq.OpDDL:
					if strings.Contains(string(ch.Content), `"public.kx"`) {
						got = append(got, "ddl kx")
					}
				case pgq.OpInsert, pgq.OpUpdate:
					got = append(got, fmt.Sprintf("%s %s %s", ch.Op, ch.Table, keyColumns(ch.Columns)))
				}
			}
		}
		return len(txs) >= 8
	})
	want := []string{"insert kd id", "insert kf a,id", "insert kn id", "insert ki u", "insert kx -", "ddl kx", "update kx id", "update kf a,id"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("changes and their key columns:\n got %s\nwant %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}
