package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestFetchFormatsEndToEnd: rows written in a real PostgreSQL, read by
// ingest and fetched over pgq's HTTP API in the debezium and cloudevents
// formats name the database and slot pgq reads (Debezium's source.db,
// the CloudEvents source) and the row's values and commit LSN.
func TestFetchFormatsEndToEnd(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE fmt (id int PRIMARY KEY, d date, n numeric)`)
	s, stop := start(t, db, t.TempDir())
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	db.Exec(t, `INSERT INTO fmt VALUES (7, '2016-11-04', 1.50)`)
	waitRecords(t, s, 1)
	base := "http://" + s.Addr()
	post(t, base+"/v1/groups", "", `{"name":"dbz","from":"earliest"}`)
	post(t, base+"/v1/groups", "", `{"name":"ce","from":"earliest"}`)

	var dbz struct {
		Transactions []struct {
			CommitLSN string `json:"commit_lsn"`
			Changes   []struct {
				Op     string
				After  map[string]any
				Source struct {
					DB        string
					Connector string
					Table     string
				}
			}
		}
	}
	if err := json.Unmarshal(post(t, base+"/v1/groups/dbz/fetch", "", `{"member":"m","format":"debezium"}`), &dbz); err != nil {
		t.Fatal(err)
	}
	if len(dbz.Transactions) != 1 || len(dbz.Transactions[0].Changes) != 1 {
		t.Fatalf("debezium fetch: %+v", dbz)
	}
	ch := dbz.Transactions[0].Changes[0]
	if ch.Op != "c" || ch.Source.DB != db.Name || ch.Source.Connector != "postgresql" || ch.Source.Table != "fmt" ||
		ch.After["id"] != 7.0 || ch.After["d"] != 17109.0 || ch.After["n"] != "1.50" {
		t.Errorf("debezium change %+v (database %s)", ch, db.Name)
	}

	var ce struct {
		Transactions []struct {
			Changes []struct{ ID, Source, Type, Subject string }
		}
	}
	if err := json.Unmarshal(post(t, base+"/v1/groups/ce/fetch", "", `{"member":"m","format":"cloudevents"}`), &ce); err != nil {
		t.Fatal(err)
	}
	ev := ce.Transactions[0].Changes[0]
	if ev.Source != "/pgq/"+db.Name+"/sc_"+db.Name || ev.ID != dbz.Transactions[0].CommitLSN+".0" || ev.Type != "pgq.insert" || ev.Subject != "public.fmt" {
		t.Errorf("cloudevent %+v", ev)
	}
}
