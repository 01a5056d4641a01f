package format_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// cluster is the package's throwaway PostgreSQL: the golden rows are
// what it writes as text (the form pgoutput sends), not hand-typed.
var cluster *pgtest.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "format tests need PostgreSQL:", err)
		return 1
	}
	defer c.Stop()
	cluster = c
	defer pgqbin.Remove() // the pgq binary the end-to-end tests built
	return m.Run()
}

// pgRow creates table name in a fresh database with the columns of ddl
// (pk serial first, the replica-identity key), runs insert, and returns
// the row as pgoutput would carry it: every column's text form and type
// OID, read with the simple protocol (text results), under a session
// time zone east of UTC so that time zone offsets are exercised; each
// column's value type and type name as ingest journals them
// (ingest.ValueTypeOf, ingest.TypeNameOf). setup runs before the table
// is created (CREATE EXTENSION hstore).
func pgRow(t *testing.T, name, ddl, insert string, setup ...string) pgq.Change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := cluster.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Exec(ctx, db, append(setup, "CREATE TABLE "+name+" (pk serial PRIMARY KEY, "+ddl+")", insert)...); err != nil {
		t.Fatal(err)
	}
	conn, err := cluster.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.PgConn().Exec(ctx, "SET TimeZone = 'Europe/Berlin'; SELECT * FROM "+name).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	sel := res[len(res)-1]
	if len(sel.Rows) != 1 {
		t.Fatalf("%s: %d rows", name, len(sel.Rows))
	}
	c := pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: name}
	for i, fd := range sel.FieldDescriptions {
		// The result's type modifier is the column's atttypmod, which
		// pgoutput's Relation message carries.
		col := pgq.Column{Name: fd.Name, TypeOID: fd.DataTypeOID, Key: fd.Name == "pk"}.WithTypmod(fd.TypeModifier)
		err := conn.QueryRow(ctx, `SELECT `+ingest.ValueTypeOf("$1::oid")+`, `+ingest.TypeNameOf("$1::oid"), fd.DataTypeOID).
			Scan(&col.BaseTypeOID, &col.TypeName)
		if err != nil {
			t.Fatal(err)
		}
		c.Columns = append(c.Columns, col)
		v := pgq.Value{Kind: pgq.ValueNull}
		if d := sel.Rows[0][i]; d != nil {
			v = pgq.Value{Kind: pgq.ValueText, Data: append([]byte(nil), d...)}
		}
		c.New = append(c.New, v)
	}
	return c
}

// testTx wraps changes in a transaction with fixed metadata.
func testTx(changes ...pgq.Change) *pgq.Transaction {
	return &pgq.Transaction{Offset: 7, Xid: 556, CommitLSN: 0x16_B374D848, EndLSN: 0x16_B374D900,
		CommitTime: time.Date(2026, 12, 4, 10, 30, 0, 123456000, time.UTC), Final: true, Changes: changes}
}

// fixedNow is the rendering clock of the golden files.
func fixedNow() time.Time { return time.Date(2026, 12, 4, 10, 30, 1, 987654321, time.UTC) }
