package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestDebeziumArraysOfDynamicTypes: arrays whose element type has no
// fixed OID (an enum, the contrib extensions citext, ltree and hstore, a
// domain) travel through ingest, which journals the type their values
// read as, and render in the Debezium format as JSON arrays, as Debezium
// writes them; an unchanged TOASTed one as Debezium's placeholder for an
// array of strings. Expected values:
//   - enum[]: RecordsSnapshotProducerIT.shouldSnapshotEnumArrayAsKnownType
//     (DBZ-1969), '{V1, V2}' → ["V1","V2"];
//   - citext[]: AbstractRecordsProducerTest.INSERT_ARRAY_TYPES_STMT and
//     schemasAndValuesForArrayTypes, '{"four","five","six"}' →
//     ["four","five","six"];
//   - ltree[]: AbstractRecordsProducerTest.INSERT_CUSTOM_TYPES_STMT,
//     lt_array '{"Ship.Frigate","Ship.Destroyer"}' →
//     ["Ship.Frigate","Ship.Destroyer"] (PostgresValueConverter
//     .convertLtreeArray);
//   - the unchanged TOASTed enum[]: UnchangedToastedPlaceholder
//     .getArrayValue, a string element schema →
//     ["__debezium_unavailable_value"];
//   - hstore[]: AbstractRecordsProducerTest
//     .schemaAndValueFieldForJsonEncodedHStoreTypeWithMultipleValues
//     (Debezium's default hstore.handling.mode=json), each element a
//     string of a JSON object → ["{\"key5\":null,\"key4\":\"val4\"}",
//     "{\"key6\":\"val6\"}"];
//   - hstore: the same test's hs → "{\"key1\":\"val1\",\"key2\":\"val2\",
//     \"key3\":\"val3\"}", and unchanged TOASTed
//     PostgresValueConverter.handleUnknownData's JSON of
//     UnchangedToastedPlaceholder's hstore (the placeholder mapped to
//     itself).
func TestDebeziumArraysOfDynamicTypes(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE EXTENSION citext; CREATE EXTENSION ltree; CREATE EXTENSION hstore;
		CREATE TYPE test_type AS ENUM ('V1', 'V2'); CREATE DOMAIN d4 AS int4`)
	db.Exec(t, `CREATE TABLE dyn (id int PRIMARY KEY, v int, value test_type[], citext_array citext[], lt_array ltree[],
		hsarr hstore[], da d4[], big test_type[], hs hstore, bighs hstore)`)
	db.Exec(t, `ALTER TABLE dyn ALTER COLUMN big SET STORAGE EXTERNAL, ALTER COLUMN bighs SET STORAGE EXTERNAL`)
	s := startStreaming(t, db)
	db.Exec(t, `INSERT INTO dyn VALUES (1, 0, '{V1, V2}', '{"four","five","six"}', '{"Ship.Frigate","Ship.Destroyer"}',
		array['"key4" => "val4","key5" => NULL'::hstore, '"key6" => "val6"'], '{1,2}',
		array_fill('V1'::test_type, ARRAY[1000]), '"key1" => "val1","key2" => "val2","key3" => "val3"',
		hstore('k', repeat('x', 10000)))`)
	db.Exec(t, `UPDATE dyn SET v = 1 WHERE id = 1`)
	waitRecords(t, s, 2)
	base := "http://" + s.Addr()
	post(t, base+"/v1/groups", "", `{"name":"dbz","from":"earliest"}`)
	var f struct {
		Transactions []struct {
			Changes []struct {
				Op    string
				After map[string]json.RawMessage
			}
		}
	}
	body := post(t, base+"/v1/groups/dbz/fetch", "", `{"member":"m","format":"debezium"}`)
	if err := json.Unmarshal(body, &f); err != nil || len(f.Transactions) != 2 {
		t.Fatalf("debezium fetch: %v\n%s", err, body)
	}
	after := f.Transactions[0].Changes[0].After
	want := map[string]string{
		"value":        `["V1","V2"]`,
		"citext_array": `["four","five","six"]`,
		"lt_array":     `["Ship.Frigate","Ship.Destroyer"]`,
		"da":           `[1,2]`,
		"big":          "[" + strings.TrimSuffix(strings.Repeat(`"V1",`, 1000), ",") + "]",
		"hsarr":        `["{\"key5\":null,\"key4\":\"val4\"}","{\"key6\":\"val6\"}"]`,
		"hs":           `"{\"key1\":\"val1\",\"key2\":\"val2\",\"key3\":\"val3\"}"`,
		"bighs":        `"{\"k\":\"` + strings.Repeat("x", 10000) + `\"}"`,
	}
	for col, w := range want {
		if got := string(after[col]); got != w {
			t.Errorf("insert: %s = %.200s, want %.200s", col, got, w)
		}
	}
	upd := f.Transactions[1].Changes[0]
	if got := string(upd.After["big"]); upd.Op != "u" || got != `["__debezium_unavailable_value"]` {
		t.Errorf("update: op %s, big = %.200s, want the placeholder of an array of strings", upd.Op, got)
	}
	if got := string(upd.After["bighs"]); got != `"{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}"` {
		t.Errorf("update: bighs = %.200s, want the placeholder of an hstore", got)
	}

	// hstore_handling_mode map: Connect's map, a JSON object.
	post(t, base+"/v1/groups", "", `{"name":"dbzmap","from":"earliest"}`)
	body = post(t, base+"/v1/groups/dbzmap/fetch", "", `{"member":"m","format":"debezium","hstore_handling_mode":"map"}`)
	if err := json.Unmarshal(body, &f); err != nil || len(f.Transactions) != 2 {
		t.Fatalf("debezium fetch, map mode: %v\n%s", err, body)
	}
	if got := string(f.Transactions[0].Changes[0].After["hs"]); got != `{"key1":"val1","key2":"val2","key3":"val3"}` {
		t.Errorf("map mode: hs = %s, want a JSON object", got)
	}

	// A backfill's read reads the column types as ingest does.
	post(t, base+"/v1/backfills", "", `{"tables":["public.dyn"]}`)
	var read map[string]json.RawMessage
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && read == nil; {
		body := post(t, base+"/v1/groups/dbz/fetch", "", `{"member":"m","format":"debezium","wait":"1s"}`)
		if err := json.Unmarshal(body, &f); err != nil {
			t.Fatal(err)
		}
		for _, tx := range f.Transactions {
			for _, ch := range tx.Changes {
				if ch.Op == "r" {
					read = ch.After
				}
			}
		}
	}
	for _, col := range []string{"value", "citext_array", "lt_array", "da", "hsarr", "hs", "bighs"} {
		if got := string(read[col]); got != want[col] {
			t.Errorf("backfill read: %s = %.200s, want %.200s", col, got, want[col])
		}
	}
}
