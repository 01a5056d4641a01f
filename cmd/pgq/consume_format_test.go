package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// consumeTx is what the test reads of a `pgq consume` line in pgq's form.
type consumeTx struct {
	Xid       uint32 `json:"xid"`
	CommitLSN string `json:"commit_lsn"`
	Changes   []struct {
		Op      string `json:"op"`
		Ordinal uint32 `json:"ordinal"`
	} `json:"changes"`
}

// formatRun is a `pgq run` over a fresh database of a real PostgreSQL
// whose publication holds table (id int PRIMARY KEY, v text).
type formatRun struct {
	*pgqbin.Run
	db   *pgtest.DB
	slot string
}

// startFormatRun starts it and waits until it is ready.
func startFormatRun(t *testing.T, table string) *formatRun {
	t.Helper()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE `+table+` (id int PRIMARY KEY, v text)`)
	slot := table + "_" + db.Name
	run := pgqbin.StartRun(t, pgqbin.RunOptions{PGURL: db.URL, Slot: slot, Publication: table + "_pub", Tables: "public." + table,
		Stopped: func() { db.Exec(t, `SELECT pg_drop_replication_slot('`+slot+`')`) }})
	return &formatRun{Run: run, db: db, slot: slot}
}

// TestConsumeFormat: `pgq consume --format debezium|cloudevents` against
// a real PostgreSQL and `pgq run`: an insert of two rows, an update, a
// key-changing update and a delete print as Debezium events (the key
// change as a delete and a create) and as structured CloudEvents (valid
// by the CloudEvents 1.0 JSON schema), ids and LSNs those of the
// transactions; `--format pgq` prints exactly the default lines.
func TestConsumeFormat(t *testing.T) {
	r := startFormatRun(t, "cf")
	db, slot := r.db, r.slot
	pgqOut := func(args ...string) []byte {
		t.Helper()
		return r.Out(t, args...)
	}
	pgqOut("groups", "create", "g", "--from", "earliest")
	db.Exec(t,
		`INSERT INTO cf VALUES (1, 'a'), (2, 'b')`,
		`UPDATE cf SET v = 'A' WHERE id = 1`,
		`UPDATE cf SET id = 3 WHERE id = 2`,
		`DELETE FROM cf WHERE id = 1`)
	consume := func(args ...string) []string {
		t.Helper()
		out := pgqOut(append([]string{"consume", "--group", "g", "--no-commit"}, args...)...)
		return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	}
	var plain []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if plain = consume(); len(plain) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume printed %d lines, want 4 transactions:\n%s", len(plain), strings.Join(plain, "\n"))
		}
	}
	txs := make([]consumeTx, len(plain))
	for i, l := range plain {
		if err := json.Unmarshal([]byte(l), &txs[i]); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, l)
		}
	}
	if got := consume("--format", "pgq"); strings.Join(got, "\n") != strings.Join(plain, "\n") {
		t.Fatalf("--format pgq differs from the default:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(plain, "\n"))
	}
	lsn := func(tx consumeTx) pgq.LSN {
		l, err := pgq.ParseLSN(tx.CommitLSN)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	// Debezium: one event per line; the key change is a delete and a create.
	type dbz struct {
		Before, After *struct{ ID int }
		Op            string
		Source        struct {
			DB, Table string
			TxID      uint32 `json:"txId"`
			LSN       uint64
		}
	}
	wantDbz := []struct {
		op     string
		id, tx int // the row's id (after, or before for a delete); the transaction
	}{{"c", 1, 0}, {"c", 2, 0}, {"u", 1, 1}, {"d", 2, 2}, {"c", 3, 2}, {"d", 1, 3}}
	lines := consume("--format", "debezium", "--format-db", "shop")
	if len(lines) != len(wantDbz) {
		t.Fatalf("debezium: %d lines, want %d:\n%s", len(lines), len(wantDbz), strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		var ev dbz
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("debezium line %d: %v\n%s", i, err, l)
		}
		w, tx := wantDbz[i], txs[wantDbz[i].tx]
		row := ev.After
		if w.op == "d" {
			row = ev.Before
		}
		if ev.Op != w.op || row == nil || row.ID != w.id || ev.Source.Table != "cf" || ev.Source.DB != "shop" ||
			ev.Source.TxID != tx.Xid || ev.Source.LSN != uint64(lsn(tx)) {
			t.Errorf("debezium line %d: want op %q id %d xid %d lsn %d (%s):\n%s", i, w.op, w.id, tx.Xid, uint64(lsn(tx)), tx.CommitLSN, l)
		}
	}

	// CloudEvents: one structured event per change.
	schema := consumeCloudEventsSchema(t)
	var wantCE []string // id and type of each change
	for _, tx := range txs {
		for _, ch := range tx.Changes {
			wantCE = append(wantCE, format.ChangeID(lsn(tx), ch.Ordinal, "")+" "+format.TypePrefix+ch.Op)
		}
	}
	lines = consume("--format", "cloudevents", "--format-db", "shop", "--format-slot", slot)
	if len(lines) != 5 || len(wantCE) != 5 {
		t.Fatalf("cloudevents: %d lines, %d changes, want 5:\n%s", len(lines), len(wantCE), strings.Join(lines, "\n"))
	}
	wantTypes := []string{"insert", "insert", "update", "update", "delete"}
	for i, l := range lines {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			t.Fatalf("cloudevents line %d: %v\n%s", i, err, l)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("cloudevents line %d is no CloudEvent: %v\n%s", i, err, l)
		}
		var ev struct {
			SpecVersion, ID, Source, Type, Subject string
			Data                                   struct{ Op string }
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.SpecVersion != "1.0" || ev.ID+" "+ev.Type != wantCE[i] || ev.Type != "pgq."+wantTypes[i] || ev.Data.Op != wantTypes[i] ||
			ev.Source != "/pgq/shop/"+slot {
			t.Errorf("cloudevents line %d: want %q, type pgq.%s, source /pgq/shop/%s:\n%s", i, wantCE[i], wantTypes[i], slot, l)
		}
	}

	// The group's cursor moved with none of the --no-commit runs; a
	// committing --format run commits as the default does.
	if got := consume("--format", "debezium"); len(got) != len(wantDbz) {
		t.Fatalf("debezium again: %d lines", len(got))
	}
	pgqOut("consume", "--group", "g", "--format", "cloudevents")
	if out := pgqOut("consume", "--group", "g"); len(out) != 0 {
		t.Fatalf("consume after a committing --format cloudevents run printed:\n%s", out)
	}
}

// consumeCloudEventsSchema compiles the CloudEvents 1.0 JSON schema the
// format package's tests use.
func consumeCloudEventsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "format", "testdata", "cloudevents", "cloudevents.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
