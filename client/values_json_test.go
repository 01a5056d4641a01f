package client_test

import (
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
)

// TestValuesJSONAndDomains: json and jsonb come back as their text byte
// for byte (numbers beyond float64, duplicate keys), JSON null as the text
// "null" and SQL NULL as nil; a domain decodes (and scans) as its base
// type when the record carries it, as text when it does not.
func TestValuesJSONAndDomains(t *testing.T) {
	c := &pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "x",
		Columns: []pgq.Column{
			{Name: "a", TypeOID: 3802}, {Name: "b", TypeOID: 3802}, {Name: "c", TypeOID: 114}, {Name: "jn", TypeOID: 3802},
			{Name: "sn", TypeOID: 3802}, {Name: "d4", TypeOID: 16385, BaseTypeOID: 23}, {Name: "d8", TypeOID: 16386, BaseTypeOID: 20},
			{Name: "dj", TypeOID: 16387, BaseTypeOID: 3802}, {Name: "old", TypeOID: 16385},
		},
		New: []pgq.Value{tv("2.50"), tv("1e400"), tv(`{"a":1,"a":2}`), tv("null"), {Kind: pgq.ValueNull}, tv("7"), tv("9000000000"),
			tv("123456789012345678901234567890"), tv("7")},
	}
	v, err := client.Values(nil, c, client.NewImage)
	if err != nil {
		t.Fatal(err)
	}
	for col, want := range map[string]string{"a": "2.50", "b": "1e400", "c": `{"a":1,"a":2}`, "jn": "null", "dj": "123456789012345678901234567890"} {
		if got, ok := v[col].(json.RawMessage); !ok || string(got) != want {
			t.Errorf("%s = %#v, want json.RawMessage %s", col, v[col], want)
		}
	}
	if v["sn"] != nil {
		t.Errorf("SQL NULL of a jsonb column = %#v, want nil", v["sn"])
	}
	if v["d4"] != int32(7) || v["d8"] != int64(9000000000) {
		t.Errorf("domains over int4/int8 = %#v, %#v, want int32 7, int64 9000000000", v["d4"], v["d8"])
	}
	if v["old"] != "7" {
		t.Errorf("domain without a base type = %#v, want its text", v["old"])
	}
	var row struct {
		D4 int64
		D8 int64
		Jn json.RawMessage
	}
	if err := client.Scan(c, client.NewImage, &row); err != nil || row.D4 != 7 || row.D8 != 9000000000 {
		t.Fatalf("Scan: %+v, %v", row, err)
	}
}
