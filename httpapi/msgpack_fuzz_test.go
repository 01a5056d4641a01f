package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/format"
)

// fuzzCols are the columns of the fuzzed rows: json and jsonb, a domain
// over jsonb and one over int8 (rendered by their base types), text and
// an integer.
var fuzzCols = []pgq.Column{
	{Name: "id", TypeOID: 20, Key: true}, {Name: "j", TypeOID: 114}, {Name: "jb", TypeOID: 3802},
	{Name: "dj", TypeOID: 16400, BaseTypeOID: 3802}, {Name: "di", TypeOID: 16401, BaseTypeOID: 20}, {Name: "t", TypeOID: 25},
}

// fuzzRow makes a row of fuzzCols; bit i of nulls makes column i SQL NULL.
func fuzzRow(nulls uint8, vals ...string) []pgq.Value {
	row := make([]pgq.Value, len(vals))
	for i, v := range vals {
		row[i] = pgq.Value{Kind: pgq.ValueText, Data: []byte(v)}
		if nulls&(1<<i) != 0 {
			row[i] = pgq.Value{Kind: pgq.ValueNull}
		}
	}
	return row
}

// FuzzMsgpackAnswer: the msgpack form of a fetch answer (exclusive and
// shared) has the JSON answer's structure, and each json or jsonb value
// in it is a string holding the value's JSON text byte for byte, never
// parsed (no float64 rounding, no +Inf, no lost digits or duplicate keys);
// SQL NULL is nil in both, JSON null the text "null" in msgpack.
func FuzzMsgpackAnswer(f *testing.F) {
	for _, s := range [][4]string{
		{"2.50", "1e400", "123456789012345678901234567890", `{"a":1,"a":2}`},
		{"null", " null ", `"null"`, "[1.0, -0, 1E-7]"},
		{`{"k":"\u00e9\n"}`, "true", "-9223372036854775808", "not json"},
	} {
		f.Add(s[0], s[1], s[2], s[3], "7", uint8(0))
		f.Add(s[0], s[1], s[2], s[3], "+5", uint8(0x2a))
	}
	f.Fuzz(func(t *testing.T, j, jb, dj, txt, num string, nulls uint8) {
		for _, s := range []string{j, jb, dj, txt, num} {
			if !utf8.ValidString(s) { // PostgreSQL sends UTF-8 text only
				t.Skip()
			}
		}
		row := fuzzRow(nulls, num, j, jb, dj, num, txt)
		old := fuzzRow(nulls>>3, num, dj, j, jb, num, txt)
		tx := &pgq.Transaction{Xid: 9, CommitLSN: 100, EndLSN: 200, CommitTime: time.UnixMicro(1_700_000_000_123_456).UTC(), Final: true,
			Changes: []pgq.Change{
				{Op: pgq.OpInsert, Schema: "s", Table: "x", Columns: fuzzCols, New: row},
				{Op: pgq.OpUpdate, Schema: "s", Table: "x", Columns: fuzzCols, New: row, Old: old, OldKind: pgq.OldFull},
			}}
		res := &consumers.RecordBatch{Records: []consumers.FetchedRecord{{Offset: 3, Tx: tx}}, NextOffset: 4, LastOffset: 4, Generation: 1}

		var jb1, jb2 bytes.Buffer
		own := func(jv format.JSONValues) *format.Renderer {
			rd, err := format.New(format.PGQ, format.Options{JSONValues: jv})
			if err != nil {
				t.Fatal(err)
			}
			return rd
		}
		if err := writeFetch(&jb1, batchAnswer(res), formJSON, own(format.JSONEmbedded)); err != nil {
			t.Fatalf("writeFetch JSON: %v", err)
		}
		if err := writeFetch(&jb2, batchAnswer(res), formMsgpack, own(format.JSONAsText)); err != nil {
			t.Fatalf("writeFetch msgpack: %v", err)
		}
		mp := jb2.Bytes()
		compareAnswers(t, tx, jb1.Bytes(), mp, func(js, m any) (any, any) {
			ts := m.(map[string]any)["transactions"].([]any)
			return js.(map[string]any)["transactions"].([]any)[0].(map[string]any)["changes"],
				ts[0].(map[string]any)["changes"]
		})

		msg := func(jv format.JSONValues) []api.Message {
			return []api.Message{{Offset: 3, Xid: 9, CommitLSN: "0/64", CommitTime: tx.CommitTime, Index: 1,
				Change: format.AppendChangeJSONAs(nil, &tx.Changes[1], jv), Delivery: 1, AckID: "3.1.1.e"}}
		}
		js := appendMessagesJSON(nil, msg(format.JSONEmbedded))
		shaped, err := json.Marshal(api.MessagesResponse{Messages: msg(format.JSONAsText)})
		if err != nil {
			t.Fatal(err)
		}
		mp, err = jsonToMsgpack(shaped)
		if err != nil {
			t.Fatalf("jsonToMsgpack: %v", err)
		}
		shared := &pgq.Transaction{Changes: tx.Changes[1:]}
		compareAnswers(t, shared, js, mp, func(js, m any) (any, any) {
			change := func(v any) any { return []any{v.(map[string]any)["messages"].([]any)[0].(map[string]any)["change"]} }
			return change(js), change(m)
		})
	})
}

// compareAnswers decodes both answers, checks that they have the same
// structure with json values as their text in msgpack, and that changes
// (found by changes) hold each json value of tx byte for byte.
func compareAnswers(t *testing.T, tx *pgq.Transaction, js, mp []byte, changes func(js, m any) (any, any)) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var jv, mv any
	if err := dec.Decode(&jv); err != nil {
		t.Fatalf("JSON answer: %v\n%s", err, js)
	}
	if err := msgpack.Unmarshal(mp, &mv); err != nil {
		t.Fatalf("msgpack answer: %v", err)
	}
	sameShape(t, "$", jv, mv)
	jc, mc := changes(jv, mv)
	for k, c := range tx.Changes {
		jm, mm := jc.([]any)[k].(map[string]any), mc.([]any)[k].(map[string]any)
		for _, img := range []struct {
			name string
			vals []pgq.Value
		}{{"new", c.New}, {"old", c.Old}} {
			if img.vals == nil {
				continue
			}
			ji, mi := jm[img.name].(map[string]any), mm[img.name].(map[string]any)
			for i, col := range c.Columns {
				typ := col.ValueType()
				if typ != 114 && typ != 3802 {
					continue
				}
				checkJSONValue(t, img.name+"."+col.Name, img.vals[i], ji[col.Name], mi[col.Name])
			}
		}
	}
}

// checkJSONValue checks one json value: msgpack holds its text, JSON
// embeds it (or, not being JSON, holds it as a string); SQL NULL is nil.
func checkJSONValue(t *testing.T, where string, v pgq.Value, j, m any) {
	t.Helper()
	if v.Kind == pgq.ValueNull {
		if j != nil || m != nil {
			t.Fatalf("%s: SQL NULL is %#v in JSON, %#v in msgpack", where, j, m)
		}
		return
	}
	if s, ok := m.(string); !ok || s != string(v.Data) {
		t.Fatalf("%s: msgpack %#v, want the JSON text %q", where, m, v.Data)
	}
	if !json.Valid(v.Data) {
		if j != string(v.Data) {
			t.Fatalf("%s: invalid JSON %q is %#v in the JSON answer", where, v.Data, j)
		}
		return
	}
	dec := json.NewDecoder(bytes.NewReader(v.Data))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(want) != fmt.Sprint(j) {
		t.Fatalf("%s: JSON answer %#v, want %#v", where, j, want)
	}
}

// sameShape checks that the msgpack value m has the JSON value j's
// structure: same keys, lengths, strings and numbers. Below json values
// the shapes differ by design (checkJSONValue checks those): there m is a
// string where j may be anything.
func sameShape(t *testing.T, path string, j, m any) {
	t.Helper()
	switch jv := j.(type) {
	case map[string]any:
		mm, ok := m.(map[string]any)
		if !ok || len(mm) != len(jv) {
			t.Fatalf("%s: JSON object of %d keys, msgpack %#v", path, len(jv), m)
		}
		for k, e := range jv {
			me, ok := mm[k]
			if !ok {
				t.Fatalf("%s: msgpack lacks %q", path, k)
			}
			if isJSONColumn(path, k) {
				continue
			}
			sameShape(t, path+"."+k, e, me)
		}
	case []any:
		ma, ok := m.([]any)
		if !ok || len(ma) != len(jv) {
			t.Fatalf("%s: JSON array of %d, msgpack %#v", path, len(jv), m)
		}
		for i := range jv {
			sameShape(t, fmt.Sprintf("%s[%d]", path, i), jv[i], ma[i])
		}
	case json.Number:
		if fmt.Sprint(m) != string(jv) {
			t.Fatalf("%s: JSON number %s, msgpack %#v", path, jv, m)
		}
	default:
		if j != m {
			t.Fatalf("%s: JSON %#v, msgpack %#v", path, j, m)
		}
	}
}

// isJSONColumn reports whether key k of the object at path is a json
// value of fuzzCols (a column of an image).
func isJSONColumn(path, k string) bool {
	if !strings.HasSuffix(path, ".new") && !strings.HasSuffix(path, ".old") {
		return false
	}
	for _, c := range fuzzCols {
		if c.Name == k {
			typ := c.ValueType()
			return typ == 114 || typ == 3802
		}
	}
	return false
}

// batchAnswer is the fetchAnswer of a RecordBatch.
func batchAnswer(res *consumers.RecordBatch) fetchAnswer {
	return fetchAnswer{NextOffset: res.NextOffset, Committed: res.Committed, LastOffset: res.LastOffset, LeaseExpires: res.LeaseExpires,
		Generation: res.Generation, Len: len(res.Records), Records: func(yield func(consumers.FetchedRecord, error) bool) {
			for _, r := range res.Records {
				if !yield(r, nil) {
					return
				}
			}
		}}
}
