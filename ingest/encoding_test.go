package ingest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// encodedDB creates a database of the given encoding (C locale: it goes
// with every encoding).
func encodedDB(t *testing.T, c *pgtest.Cluster, encoding string) *pgtest.DB {
	t.Helper()
	name := fmt.Sprintf("enc_%s_%d", strings.ToLower(encoding), time.Now().UnixNano())
	if err := c.Exec(t.Context(), "postgres", "CREATE DATABASE "+name+" ENCODING '"+encoding+"' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"); err != nil {
		t.Fatal(err)
	}
	return &pgtest.DB{C: c, Name: name, URL: c.URL(name)}
}

// TestSQLASCIIRefused: a SQL_ASCII database has no encoding PostgreSQL can
// convert to UTF-8. pgq exits at once with one line naming the encoding
// (it used to retry "simple protocol queries must be run with
// client_encoding=UTF8" forever), whatever the URL asks for, and creates
// no slot.
func TestSQLASCIIRefused(t *testing.T) {
	c := pgtest.Shared(t)
	db := encodedDB(t, c, "SQL_ASCII")
	db.Exec(t, `CREATE TABLE a (id int PRIMARY KEY)`)
	for _, tc := range []struct{ name, url string }{
		{"default client encoding", db.URL},
		{"client encoding UTF8 in the URL", db.URL + "&client_encoding=UTF8"},
		{"client encoding SQL_ASCII in the URL", db.URL + "&client_encoding=SQL_ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slot := "sa_" + db.Name
			pgqbin.Path(t) // built before the clock starts
			start := time.Now()
			runExpectFailure(t, `database "`+db.Name+`" has encoding SQL_ASCII`,
				"run", "--pg-url", tc.url, "--slot", slot, "--publication", "sa_pub", "--data-dir", t.TempDir(),
				"--listen", "127.0.0.1:0", "--create-slot", "--create-publication", "all")
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("the refusal took %s", d)
			}
			if ok, _ := slotExists(t, db, slot); ok {
				t.Fatalf("a refused start left slot %s behind", slot)
			}
		})
	}
}

// TestNonUTF8DatabaseStreams: a database in another real encoding (LATIN1)
// streams, its text converted to UTF-8 by PostgreSQL; before, every start
// failed as in SQL_ASCII and was retried forever.
func TestNonUTF8DatabaseStreams(t *testing.T) {
	c := pgtest.Shared(t)
	db := encodedDB(t, c, "LATIN1")
	db.Exec(t, `CREATE TABLE l1 (id int PRIMARY KEY, name text)`)
	r := startSidecar(t, db, t.TempDir(), nil)
	r.waitStreaming(t)
	// chr() takes the database encoding's code (the test's own connection
	// would send UTF-8 bytes as LATIN1).
	db.Exec(t, `INSERT INTO l1 VALUES (1, 'caf' || chr(233) || ' ' || chr(255))`)
	waitFor(t, 20*time.Second, "the row journaled", func() bool { return len(records(t, r.Dir)) == 1 })
	ch := changesOf(t, records(t, r.Dir))
	if got := ch[0]["new"].(map[string]any)["name"]; got != "café ÿ" {
		t.Fatalf("name = %q, want %q", got, "café ÿ")
	}
	// A backfill reads the same row as UTF-8 too.
	bf := startBackfill(t, r, map[string]any{"tables": []string{"public.l1"}})
	waitBackfill(t, r, bf.ID, "done", 30*time.Second)
	read := 0
	for _, c := range changesOf(t, records(t, r.Dir)) {
		if c["op"] != "read" {
			continue
		}
		read++
		if got := c["new"].(map[string]any)["name"]; got != "café ÿ" {
			t.Fatalf("backfilled name = %q, want %q", got, "café ÿ")
		}
	}
	if read != 1 {
		t.Fatalf("%d read changes, want 1", read)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}
