package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// fidelityRows are the rows of TestValueFidelity: json/jsonb values that
// a float64 cannot hold or a map cannot keep, JSON null and SQL NULL, and
// domains over int4 (also through a domain over it), int8 and numeric.
var fidelityRows = []string{
	`(1, '2.50', '2.50', 7, 9000000000, 2.50, 5)`,
	`(2, '1e400', '1e400', -7, -9000000000, 1e-3, -5)`,
	`(3, '123456789012345678901234567890', '123456789012345678901234567890', 0, 0, 0, 0)`,
	`(4, '{"a":1,"a":2}', '{"a":1,"a":2}', NULL, NULL, NULL, NULL)`,
	`(5, 'null', 'null', 1, 1, 1, 1)`,
	`(6, NULL, NULL, 1, 1, 1, 1)`,
}

// TestValueFidelity: values travel from PostgreSQL through ingest, the
// journal and the HTTP fetch (JSON and msgpack, exclusive and shared) and
// the Go client as PostgreSQL wrote them: json/jsonb text byte for byte in
// msgpack and the client, JSON null told from SQL NULL everywhere, and
// domains over integer types as numbers.
func TestValueFidelity(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE DOMAIN d4 AS int4; CREATE DOMAIN d8 AS int8; CREATE DOMAIN dn AS numeric; CREATE DOMAIN dd AS d4 CHECK (VALUE > -100)`)
	db.Exec(t, `CREATE TABLE fv (id int PRIMARY KEY, j json, jb jsonb, a d4, b d8, n dn, dd dd)`)
	s, stop := start(t, db, t.TempDir())
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + s.Addr()
	post(t, base+"/v1/groups", "", `{"name":"ex","from":"earliest"}`)
	post(t, base+"/v1/groups", "", `{"name":"sh","from":"earliest","mode":"shared"}`)
	for _, r := range fidelityRows {
		db.Exec(t, `INSERT INTO fv VALUES `+r)
	}
	waitRecords(t, s, 6)
	// PostgreSQL's own text of each json/jsonb value (jsonb normalizes:
	// 1e400 is written out, duplicate keys collapse), NULL as nil.
	pgText := map[string][]*string{}
	for _, col := range []string{"j", "jb"} {
		for id := 1; id <= len(fidelityRows); id++ {
			var v *string
			db.QueryRow(t, `SELECT `+col+`::text FROM fv WHERE id = `+strconv.Itoa(id), &v)
			pgText[col] = append(pgText[col], v)
		}
	}
	if *pgText["j"][1] != "1e400" || *pgText["j"][3] != `{"a":1,"a":2}` {
		t.Fatalf("json text %v: json keeps its input", pgText["j"])
	}

	// JSON: json values embedded as written, JSON null listed in json_null.
	var jf struct {
		Transactions []struct {
			Changes []struct {
				New      map[string]json.RawMessage   `json:"new"`
				JSONNull *struct{ New, Old []string } `json:"json_null"`
			} `json:"changes"`
		} `json:"transactions"`
	}
	body := post(t, base+"/v1/groups/ex/fetch", "", `{"member":"m","max":100}`)
	if err := json.Unmarshal(body, &jf); err != nil || len(jf.Transactions) != 6 {
		t.Fatalf("JSON fetch: %v, %d transactions\n%s", err, len(jf.Transactions), body)
	}
	for i, tx := range jf.Transactions {
		ch := tx.Changes[0]
		for _, col := range []string{"j", "jb"} {
			want := "null"
			if p := pgText[col][i]; p != nil {
				want = *p
			}
			if string(ch.New[col]) != want {
				t.Errorf("JSON row %d %s = %s, want %s", i+1, col, ch.New[col], want)
			}
		}
		listed := ch.JSONNull != nil && strings.Join(ch.JSONNull.New, ",") == "j,jb" && len(ch.JSONNull.Old) == 0
		if listed != (i == 4) {
			t.Errorf("JSON row %d json_null = %+v (only row 5 holds JSON null)", i+1, ch.JSONNull)
		}
	}
	first := jf.Transactions[0].Changes[0].New
	if string(first["a"]) != "7" || string(first["b"]) != "9000000000" || string(first["n"]) != `"2.50"` || string(first["dd"]) != "5" {
		t.Errorf("domains render %s %s %s %s, want 7 9000000000 \"2.50\" 5", first["a"], first["b"], first["n"], first["dd"])
	}
	if nulls := jf.Transactions[3].Changes[0].New; string(nulls["a"]) != "null" || jf.Transactions[3].Changes[0].JSONNull != nil {
		t.Errorf("SQL NULL of a domain = %s, json_null %+v", nulls["a"], jf.Transactions[3].Changes[0].JSONNull)
	}

	// msgpack, exclusive and shared: json values are their text.
	var mf struct {
		Transactions []struct {
			Changes []struct {
				New map[string]any `msgpack:"new"`
			} `msgpack:"changes"`
		} `msgpack:"transactions"`
	}
	post(t, base+"/v1/groups/ex/reset", "", `{"to":"earliest"}`)
	if err := msgpack.Unmarshal(post(t, base+"/v1/groups/ex/fetch", api.MediaMsgpack, `{"member":"m","max":100}`), &mf); err != nil || len(mf.Transactions) != 6 {
		t.Fatalf("msgpack fetch: %v, %d transactions", err, len(mf.Transactions))
	}
	var ms struct {
		Messages []struct {
			Change struct {
				New map[string]any `msgpack:"new"`
			} `msgpack:"change"`
		} `msgpack:"messages"`
	}
	if err := msgpack.Unmarshal(post(t, base+"/v1/groups/sh/fetch", api.MediaMsgpack, `{"member":"m","max":100}`), &ms); err != nil || len(ms.Messages) != 6 {
		t.Fatalf("shared msgpack fetch: %v, %d messages", err, len(ms.Messages))
	}
	for i := range 6 {
		for _, col := range []string{"j", "jb"} {
			var want any
			if p := pgText[col][i]; p != nil {
				want = *p
			}
			if got := mf.Transactions[i].Changes[0].New[col]; got != want {
				t.Errorf("msgpack row %d %s = %#v, want %#v", i+1, col, got, want)
			}
			if got := ms.Messages[i].Change.New[col]; got != want {
				t.Errorf("shared msgpack row %d %s = %#v, want %#v", i+1, col, got, want)
			}
		}
	}
	if a, dd := mf.Transactions[0].Changes[0].New["a"], mf.Transactions[0].Changes[0].New["dd"]; !isInt(a, 7) || !isInt(dd, 5) {
		t.Errorf("msgpack domains over int4 = %#v, %#v, want integers", a, dd)
	}

	// The Go client: records, decoded with Values.
	cl, err := client.New(s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	post(t, base+"/v1/groups/ex/reset", "", `{"to":"earliest"}`)
	res, err := cl.Fetch(context.Background(), "ex", client.FetchRequest{Member: "m", Max: 100})
	if err != nil || len(res.Transactions) != 6 {
		t.Fatalf("client fetch: %v", err)
	}
	for i, tx := range res.Transactions {
		v, err := client.Values(nil, &tx.Changes[0], client.NewImage)
		if err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
		for _, col := range []string{"j", "jb"} {
			p := pgText[col][i]
			raw, isRaw := v[col].(json.RawMessage)
			if (p == nil) != (v[col] == nil) || (p != nil && (!isRaw || string(raw) != *p)) {
				t.Errorf("client row %d %s = %#v, want %v", i+1, col, v[col], p)
			}
		}
		if i == 0 && (v["a"] != int32(7) || v["b"] != int64(9000000000) || v["dd"] != int32(5)) {
			t.Errorf("client domains %#v %#v %#v, want int32 7, int64 9000000000, int32 5", v["a"], v["b"], v["dd"])
		}
	}

	// A backfill's read changes carry the base types too.
	post(t, base+"/v1/backfills", "", `{"tables":["public.fv"]}`)
	post(t, base+"/v1/groups/ex/reset", "", `{"to":"offset:7"}`)
	var reads []map[string]json.RawMessage
	for time.Now().Before(deadline.Add(30*time.Second)) && len(reads) == 0 {
		if err := json.Unmarshal(post(t, base+"/v1/groups/ex/fetch", "", `{"member":"m","max":100,"wait":"1s"}`), &jf); err != nil {
			t.Fatal(err)
		}
		for _, tx := range jf.Transactions {
			for _, ch := range tx.Changes {
				if string(ch.New["id"]) == "1" {
					reads = append(reads, ch.New)
				}
			}
		}
	}
	if len(reads) != 1 || string(reads[0]["a"]) != "7" || string(reads[0]["dd"]) != "5" || string(reads[0]["b"]) != "9000000000" {
		t.Errorf("backfilled row 1: %d reads, %v", len(reads), reads)
	}
}

// isInt reports whether v is a msgpack integer (as msgpack decodes one)
// equal to n.
func isInt(v any, n int64) bool {
	switch x := v.(type) {
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x) == strconv.FormatInt(n, 10)
	}
	return false
}

// post sends a JSON body (with Accept set when not empty) and returns
// the 2xx answer's body.
func post(t *testing.T, url, accept, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b
}
