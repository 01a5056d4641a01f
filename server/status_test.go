package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/pgq-dev/pgq/journal"
	"reflect"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/ingest"
)

// TestStatusDocumentIsAPIStatus: api.Status mirrors ingest.Status field
// by field, and nothing but this test ties the two. Every field of
// ingest.Status is given a value (by reflection, so a new field needs no
// edit here), the document GET /v1/status answers is built from it, and
// it must decode into api.Status with no field left over (a field added
// to ingest.Status only), leave no field of api.Status zero (a field
// added to api.Status only, or a server-made field not filled), and
// carry every ingest value unchanged.
func TestStatusDocumentIsAPIStatus(t *testing.T) {
	var st ingest.Status
	fill(t, reflect.ValueOf(&st).Elem(), "ingest.Status")
	ist := index.Stats{Stale: true, FailedAdds: 2, Heals: 3, LastError: errors.New("index failure")}
	doc := statusDocument(st, nil, errors.New("journal failure"), ist)
	var sc journal.ScrubStatus
	fill(t, reflect.ValueOf(&sc).Elem(), "journal.ScrubStatus")
	var c journal.Corruption
	fill(t, reflect.ValueOf(&c).Elem(), "journal.Corruption")
	scrubStatus(doc, &c, sc)
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}

	var got api.Status
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the status document does not decode into api.Status (a field of ingest.Status api.Status lacks?): %v\n%s", err, raw)
	}
	// Groups come from consumers.Manager.Status, not from ingest.Status.
	got.Groups = map[string]api.GroupStatus{"not checked here": {}}
	for _, name := range zeroFields(reflect.ValueOf(got), "api.Status") {
		t.Errorf("%s is zero: api.Status has a field the status document does not fill", name)
	}

	want := map[string]any{}
	if err := json.Unmarshal(mustJSON(t, st), &want); err != nil {
		t.Fatal(err)
	}
	back := map[string]any{}
	if err := json.Unmarshal(mustJSON(t, got), &back); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if !reflect.DeepEqual(back[k], v) {
			t.Errorf("%q: api.Status carries %v, ingest.Status had %v", k, back[k], v)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fill gives every exported field below v a non-zero value; a kind it
// does not know fails the test, so that a new kind of field is not
// silently left zero.
func fill(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), name)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(t, v.Field(i), name+"."+f.Name)
			}
		}
	default:
		t.Fatalf("fill: %s is a %s, which this test cannot fill yet", name, v.Kind())
	}
}

// zeroFields names the fields below v (a struct) that are zero.
func zeroFields(v reflect.Value, name string) []string {
	var out []string
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		switch {
		case fv.IsZero():
			out = append(out, name+"."+f.Name)
		case fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeFor[time.Time]():
			out = append(out, zeroFields(fv, name+"."+f.Name)...)
		}
	}
	return out
}
