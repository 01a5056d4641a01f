package httpapi_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/index"
)

// addNumeric journals one insert into public.n (n numeric(5,2)) of
// value v.
func (e *env) addNumeric(v string) {
	e.t.Helper()
	col := pgq.Column{Name: "n", TypeOID: 1700}.WithTypmod(5<<16 | 2 + 4)
	e.last += 0x100
	tx := &pgq.Transaction{Xid: 7, CommitLSN: e.last - 8, EndLSN: e.last, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
		Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "n", Columns: []pgq.Column{col}, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(v)}}}}}
	first := e.j.LastOffset() + 1
	if err := e.j.Append([]*pgq.Transaction{tx}); err != nil {
		e.t.Fatal(err)
	}
	tx.Offset = first
	if err := e.ix.Add([]index.Entry{index.EntryOf(tx, 64, 1)}); err != nil {
		e.t.Fatal(err)
	}
}

// TestFetchValueModes: the fetch body's decimal_handling_mode (and
// provide_transaction_metadata) reaches
// the debezium rendering of both an exclusive and a shared fetch; the
// default stays pgq's string; the pgq format ignores the modes; a name
// that is no mode is 400 bad_request naming its key.
//
// Expected values: Debezium's AbstractRecordsProducerTest
// (debezium-connector-postgres) inserts 1.1 into d DECIMAL(3,2) and
// expects new BigDecimal("1.10") in a Decimal schema of scale 2 in
// precise mode (schemasAndValuesForBigDecimalEncodedNumericTypes) and
// "1.10" in string mode (schemasAndValuesForStringEncodedNumericTypes);
// Kafka Connect's Decimal.fromLogical writes the unscaled value's
// BigInteger.toByteArray (110: 0x6e), JsonConverter as base64 ("bg==").
func TestFetchValueModes(t *testing.T) {
	e := start(t, "")
	e.addNumeric("1.10")
	// group creates an exclusive or shared group (a fresh one per fetch:
	// each fetch is the group's first) and returns its name.
	n := 0
	group := func(mode string) string {
		t.Helper()
		n++
		name := mode + strconv.Itoa(n)
		if resp, b, _ := e.do("POST", "/v1/groups", `{"name":"`+name+`","mode":"`+mode+`","from":"earliest"}`); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		return name
	}
	// field returns the keys of the first change of a fetch of group g,
	// concatenated.
	field := func(g, body string, keys ...string) string {
		t.Helper()
		resp, b, _ := e.do("POST", "/v1/groups/"+g+"/fetch", body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
		var got struct {
			Transactions []struct{ Changes []map[string]json.RawMessage }
			Messages     []struct{ Change map[string]json.RawMessage }
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		var c map[string]json.RawMessage
		switch {
		case len(got.Transactions) == 1 && len(got.Transactions[0].Changes) == 1:
			c = got.Transactions[0].Changes[0]
		case len(got.Messages) == 1:
			c = got.Messages[0].Change
		}
		if c != nil {
			var s string
			for _, k := range keys {
				s += string(c[k])
			}
			return s
		}
		t.Fatalf("%s: answer %s", body, b)
		return ""
	}
	for _, tc := range []struct{ body, want string }{
		{`{"member":"m","format":"debezium","decimal_handling_mode":"precise"}`, `{"n":"bg=="}`},
		{`{"member":"m","format":"debezium","decimal_handling_mode":"string","time_precision_mode":"adaptive","interval_handling_mode":"string"}`, `{"n":"1.10"}`},
		{`{"member":"m","format":"debezium","decimal_handling_mode":"double"}`, `{"n":1.1}`},
		{`{"member":"m","format":"debezium","hstore_handling_mode":"map"}`, `{"n":"1.10"}`},
		{`{"member":"m","format":"debezium"}`, `{"n":"1.10"}`},
		{`{"member":"m","decimal_handling_mode":"precise"}`, `{"n":"1.10"}`}, // pgq's format: ignored
	} {
		for _, mode := range []string{"exclusive", "shared"} {
			if got := field(group(mode), tc.body, "after", "new"); got != tc.want {
				t.Errorf("%s group, %s: after %s, want %s", mode, tc.body, got, tc.want)
			}
		}
	}
	// provide_transaction_metadata: transaction null unless asked for
	// (Debezium's provide.transaction.metadata, off by default).
	for _, tc := range []struct{ body, want string }{
		{`{"member":"m","format":"debezium"}`, `null`},
		{`{"member":"m","format":"debezium","provide_transaction_metadata":false}`, `null`},
		{`{"member":"m","format":"debezium","provide_transaction_metadata":true}`, `{"id":"7:`},
	} {
		for _, mode := range []string{"exclusive", "shared"} {
			if got := field(group(mode), tc.body, "transaction"); !strings.HasPrefix(got, tc.want) {
				t.Errorf("%s group, %s: transaction %s, want %s…", mode, tc.body, got, tc.want)
			}
		}
	}
	x := group("exclusive")
	for _, key := range []string{"decimal_handling_mode", "time_precision_mode", "interval_handling_mode", "hstore_handling_mode"} {
		resp, _, apiErr := e.do("POST", "/v1/groups/"+x+"/fetch", `{"member":"m","format":"debezium","`+key+`":"bogus"}`)
		if resp.StatusCode != 400 || apiErr.Code != api.CodeBadRequest || !strings.Contains(apiErr.Message, key) {
			t.Errorf("%s bogus: %d %+v", key, resp.StatusCode, apiErr)
		}
	}
}
