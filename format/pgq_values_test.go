package format_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// TestRenderJSONNull: a json or jsonb value holding JSON's null renders as
// null like SQL NULL, and json_null names it per image, so that the two
// can be told apart; SQL NULL of a json column, JSON null of a text
// column (the text "null") and a non-key column of a key-only old image
// are not listed.
func TestRenderJSONNull(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "j", TypeOID: 3802}, {Name: "js", TypeOID: 114, Key: true}, {Name: "t", TypeOID: 25}, {Name: "dj", TypeOID: 16400, BaseTypeOID: 3802}}
	for _, tc := range []struct {
		name string
		c    pgq.Change
		want string
	}{
		{"sql null only", pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "x", Columns: cols, New: []pgq.Value{tv("1"), null, null, tv("null"), null}},
			`{"op":"insert","schema":"s","table":"x","new":{"id":1,"j":null,"js":null,"t":"null","dj":null},"old":null}`},
		{"json null", pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "x", Columns: cols, New: []pgq.Value{tv("1"), tv("null"), tv(" null\n"), null, tv("null")}},
			"{\"op\":\"insert\",\"schema\":\"s\",\"table\":\"x\",\"new\":{\"id\":1,\"j\":null,\"js\": null\n,\"t\":null,\"dj\":null},\"old\":null,\"json_null\":{\"new\":[\"j\",\"js\",\"dj\"],\"old\":[]}}"},
		{"old full", pgq.Change{Op: pgq.OpUpdate, Schema: "s", Table: "x", Columns: cols, OldKind: pgq.OldFull, New: []pgq.Value{tv("1"), tv("{}"), null, null, null}, Old: []pgq.Value{tv("1"), tv("null"), null, null, null}},
			`{"op":"update","schema":"s","table":"x","new":{"id":1,"j":{},"js":null,"t":null,"dj":null},"old":{"id":1,"j":null,"js":null,"t":null,"dj":null},"json_null":{"new":[],"old":["j"]}}`},
		{"old key only", pgq.Change{Op: pgq.OpDelete, Schema: "s", Table: "x", Columns: cols, OldKind: pgq.OldKey, Old: []pgq.Value{tv("1"), tv("null"), tv("null"), null, null}},
			`{"op":"delete","schema":"s","table":"x","new":null,"old":{"id":1,"js":null},"json_null":{"new":[],"old":["js"]}}`},
		{"json string null", pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "x", Columns: cols, New: []pgq.Value{tv("1"), tv(`"null"`), tv("[null]"), null, null}},
			`{"op":"insert","schema":"s","table":"x","new":{"id":1,"j":"null","js":[null],"t":null,"dj":null},"old":null}`},
	} {
		got := string(format.AppendChangeJSON(nil, &tc.c))
		if got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: invalid JSON %s", tc.name, got)
		}
	}
}

// TestRenderDomainByBaseType: a domain column whose base type is known
// renders as its base type (numbers, booleans, embedded JSON); without
// a base type (a record journaled before pgq recorded it) it renders as
// text, as it always did.
func TestRenderDomainByBaseType(t *testing.T) {
	cols := []pgq.Column{
		{Name: "i4", TypeOID: 16385, BaseTypeOID: 23}, {Name: "i8", TypeOID: 16386, BaseTypeOID: 20},
		{Name: "n", TypeOID: 16387, BaseTypeOID: 1700}, {Name: "b", TypeOID: 16388, BaseTypeOID: 16},
		{Name: "j", TypeOID: 16389, BaseTypeOID: 3802}, {Name: "old", TypeOID: 16385},
	}
	c := pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "d", Columns: cols,
		New: []pgq.Value{tv("-7"), tv("9223372036854775807"), tv("2.50"), tv("t"), tv(`{"a":2.50}`), tv("42")}}
	got := string(format.AppendChangeJSON(nil, &c))
	want := `{"op":"insert","schema":"s","table":"d","new":{"i4":-7,"i8":9223372036854775807,"n":"2.50","b":true,"j":{"a":2.50},"old":"42"},"old":null}`
	if got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if v := cols[5].ValueType(); v != 16385 {
		t.Errorf("ValueType without a base type = %d, want the column's type", v)
	}
}

// TestRenderJSONAsText: format.JSONEmbedded keeps a json value's text byte for
// byte in the document (numbers beyond float64, duplicate keys); format.JSONAsText
// writes it as a JSON string holding that text, for the msgpack answers,
// while SQL NULL stays null and other types are unchanged.
func TestRenderJSONAsText(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "j", TypeOID: 114}, {Name: "jb", TypeOID: 3802}, {Name: "n", TypeOID: 3802}}
	c := pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "x", Columns: cols,
		New: []pgq.Value{tv("1"), tv(`{"a":1,"a":2, "big":123456789012345678901234567890}`), tv("1e400"), tv("null")}}
	tx := &pgq.Transaction{Final: true, Changes: []pgq.Change{c, {Op: pgq.OpInsert, Schema: "s", Table: "x", Columns: cols, New: []pgq.Value{tv("2"), null, tv("2.50"), tv(`"s"`)}}}}

	emb := string(format.AppendJSON(nil, tx))
	for _, want := range []string{`"j":{"a":1,"a":2, "big":123456789012345678901234567890}`, `"jb":1e400`, `"jb":2.50`, `"n":"s"`, `"json_null":{"new":["n"],"old":[]}`} {
		if !contains(emb, want) {
			t.Errorf("embedded form lacks %s: %s", want, emb)
		}
	}
	txt := string(format.AppendJSONAs(nil, tx, format.JSONAsText))
	for _, want := range []string{`"j":"{\"a\":1,\"a\":2, \"big\":123456789012345678901234567890}"`, `"jb":"1e400"`, `"jb":"2.50"`, `"n":"\"s\""`, `"n":"null"`, `"j":null`, `"id":2`, `"json_null":{"new":["n"],"old":[]}`} {
		if !contains(txt, want) {
			t.Errorf("text form lacks %s: %s", want, txt)
		}
	}
	if !json.Valid([]byte(txt)) {
		t.Fatalf("text form is not JSON: %s", txt)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestRenderIntegersCanonical: only integers as PostgreSQL writes them
// are JSON numbers; anything else of an integer type ("+5", "007", "-0",
// beyond 64 bits) is a string, so the line stays valid JSON and the
// msgpack conversion keeps the text.
func TestRenderIntegersCanonical(t *testing.T) {
	for in, want := range map[string]string{"5": "5", "-5": "-5", "0": "0", "18446744073709551615": "18446744073709551615",
		"+5": `"+5"`, "007": `"007"`, "-0": `"-0"`, "18446744073709551616": `"18446744073709551616"`, "": `""`} {
		if got := string(format.AppendValueJSON(nil, 20, tv(in))); got != want {
			t.Errorf("int8 %q renders %s, want %s", in, got, want)
		}
	}
}
