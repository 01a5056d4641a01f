package ingest_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestEveryOpAndType streams a workload covering every op, the value types
// of the contract, unchanged TOAST, old images, truncate, messages and a
// rolled-back savepoint, and checks the journal's dump lines.
func TestEveryOpAndType(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t,
		`CREATE TYPE mood AS ENUM ('sad', 'happy')`,
		`CREATE TABLE vals (id int PRIMARY KEY, i2 smallint, i8 bigint, num numeric(12,5), txt text, ok bool, raw bytea,
			js json, jsb jsonb, ts timestamptz, u uuid, arr int[], tarr text[], m mood, big text)`,
		`CREATE TABLE full_old (id int PRIMARY KEY, v text)`,
		`ALTER TABLE full_old REPLICA IDENTITY FULL`,
		`CREATE TABLE trunc_a (id int PRIMARY KEY)`,
		`CREATE TABLE trunc_b (id int PRIMARY KEY)`,
	)
	r := startSidecar(t, db, t.TempDir(), nil)
	r.waitStreaming(t)

	big := strings.Repeat("toast-me-", 1000) // > 2kB, compressible but stored out of line below
	db.Exec(t,
		`ALTER TABLE vals ALTER COLUMN big SET STORAGE EXTERNAL`,
		fmt.Sprintf(`INSERT INTO vals VALUES (1, -7, 9007199254740993, 12345.67890, 'he said "hi"', true, '\xdeadbeef',
			'{"a": [1, 2]}', '{"b": {"c": null}}', '2026-01-02 03:04:05.123456+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
			'{1,2,3}', '{"x y",NULL}', 'happy', '%s')`, big),
		`INSERT INTO vals (id) VALUES (2)`,
		`UPDATE vals SET txt = 'changed' WHERE id = 1`,
		`UPDATE vals SET id = 10 WHERE id = 2`,
		`DELETE FROM vals WHERE id = 10`,
		`INSERT INTO full_old VALUES (1, 'before')`,
		`UPDATE full_old SET v = 'after' WHERE id = 1`,
		`DELETE FROM full_old WHERE id = 1`,
		`INSERT INTO trunc_a VALUES (1)`,
		`TRUNCATE trunc_a, trunc_b RESTART IDENTITY CASCADE`,
		`SELECT pg_logical_emit_message(false, 'nontx', 'outside'::text)`,
		`BEGIN; INSERT INTO full_old VALUES (5, 'kept'); SAVEPOINT s; INSERT INTO full_old VALUES (6, 'rolled back'); ROLLBACK TO SAVEPOINT s; INSERT INTO full_old VALUES (7, 'kept too'); SELECT pg_logical_emit_message(true, 'tx', '\xff00'::bytea); COMMIT`,
	)
	deadline := time.Now().Add(15 * time.Second)
	for len(records(t, r.Dir)) < 12 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	lines := dumpLines(t, records(t, r.Dir))
	if len(lines) != 12 {
		for _, tx := range records(t, r.Dir) {
			t.Logf("%s", appendJSON(tx))
		}
		t.Fatalf("got %d records, want 12", len(lines))
	}
	first := lines[0]["changes"].([]any)[0].(map[string]any)
	if first["op"] != "insert" || first["schema"] != "public" || first["table"] != "vals" || first["old"] != nil {
		t.Fatalf("first change: %v", first)
	}
	nw := first["new"].(map[string]any)
	checks := map[string]any{
		"id": 1.0, "i2": -7.0, "num": "12345.67890", "txt": `he said "hi"`, "ok": true, "raw": `\xdeadbeef`,
		"js": map[string]any{"a": []any{1.0, 2.0}}, "jsb": map[string]any{"b": map[string]any{"c": nil}},
		"ts": "2026-01-02 03:04:05.123456+00", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"arr": "{1,2,3}", "tarr": `{"x y",NULL}`, "m": "happy", "big": big,
	}
	for col, v := range checks {
		if !reflect.DeepEqual(nw[col], v) {
			t.Errorf("insert %s = %#v, want %#v", col, nw[col], v)
		}
	}
	// int8 beyond float precision must survive as the exact number text.
	raw := string(mustLine(t, r.Dir, 0))
	if !strings.Contains(raw, `"i8":9007199254740993`) {
		t.Errorf("int8 not rendered exactly: %s", raw)
	}
	nulls := lines[1]["changes"].([]any)[0].(map[string]any)["new"].(map[string]any)
	if nulls["txt"] != nil || nulls["ok"] != nil {
		t.Errorf("NULLs: %v", nulls)
	}
	if _, ok := nulls["txt"]; !ok {
		t.Errorf("NULL column missing from new: %v", nulls)
	}
	// Unchanged TOAST: the update of txt leaves big out of new.
	upd := lines[2]["changes"].([]any)[0].(map[string]any)
	if _, has := upd["new"].(map[string]any)["big"]; has {
		t.Errorf("unchanged TOAST column present in new: %v", upd)
	}
	if !reflect.DeepEqual(upd["unchanged_toast"], []any{"big"}) {
		t.Errorf("unchanged_toast = %v", upd["unchanged_toast"])
	}
	if upd["old"] != nil {
		t.Errorf("update without key change has old = %v", upd["old"])
	}
	// Key change under REPLICA IDENTITY DEFAULT: old holds only the key.
	keyUpd := lines[3]["changes"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(keyUpd["old"], map[string]any{"id": 2.0}) {
		t.Errorf("key update old = %v", keyUpd["old"])
	}
	del := lines[4]["changes"].([]any)[0].(map[string]any)
	if del["op"] != "delete" || !reflect.DeepEqual(del["old"], map[string]any{"id": 10.0}) || del["new"] != nil {
		t.Errorf("delete = %v", del)
	}
	// REPLICA IDENTITY FULL: the whole old row.
	fullUpd := lines[6]["changes"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(fullUpd["old"], map[string]any{"id": 1.0, "v": "before"}) {
		t.Errorf("full update old = %v", fullUpd["old"])
	}
	fullDel := lines[7]["changes"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(fullDel["old"], map[string]any{"id": 1.0, "v": "after"}) {
		t.Errorf("full delete old = %v", fullDel["old"])
	}
	tr := lines[9]["changes"].([]any)[0].(map[string]any)
	wantTr := map[string]any{"op": "truncate", "ordinal": 0.0, "tables": []any{"public.trunc_a", "public.trunc_b"}, "cascade": true, "restart_identity": true}
	if !reflect.DeepEqual(tr, wantTr) {
		t.Errorf("truncate = %v", tr)
	}
	msg := lines[10]["changes"].([]any)[0].(map[string]any)
	wantMsg := map[string]any{"op": "message", "ordinal": 0.0, "prefix": "nontx", "content": "outside", "content_encoding": "utf8", "transactional": false}
	if !reflect.DeepEqual(msg, wantMsg) {
		t.Errorf("non-transactional message = %v", msg)
	}
	// The savepoint transaction: 5 and 7 kept, 6 rolled back, then a
	// binary transactional message.
	sp := lines[11]["changes"].([]any)
	if len(sp) != 3 {
		t.Fatalf("savepoint transaction has %d changes, want 3: %v", len(sp), sp)
	}
	for i, id := range []float64{5, 7} {
		if got := sp[i].(map[string]any)["new"].(map[string]any)["id"]; got != id {
			t.Errorf("savepoint change %d id = %v, want %v", i, got, id)
		}
	}
	wantBin := map[string]any{"op": "message", "ordinal": 2.0, "prefix": "tx", "content": "/wA=", "content_encoding": "base64", "transactional": true}
	if !reflect.DeepEqual(sp[2], wantBin) {
		t.Errorf("transactional message = %v", sp[2])
	}
	// Offsets are dense from 1, end LSNs strictly increase, times are UTC.
	prevEnd := ""
	for i, l := range lines {
		if l["offset"] != float64(i+1) || l["part"] != 0.0 || l["final"] != true {
			t.Errorf("record %d: offset %v part %v final %v", i, l["offset"], l["part"], l["final"])
		}
		if !strings.HasSuffix(l["commit_time"].(string), "Z") {
			t.Errorf("commit_time not UTC: %v", l["commit_time"])
		}
		if end := l["end_lsn"].(string); prevEnd != "" && lsnLess(t, end, prevEnd) {
			t.Errorf("end LSN went back: %s after %s", end, prevEnd)
		} else {
			prevEnd = end
		}
	}
}

func mustLine(t *testing.T, dir string, i int) []byte {
	t.Helper()
	txs := records(t, dir)
	b, err := json.Marshal(json.RawMessage(appendJSON(txs[i])))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
