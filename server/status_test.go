package server

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// TestStatusDocumentFillsAPIStatus: ingest fills api.Status's fields up
// to SpillError (Ingester.Status); the server fills the rest. Every
// ingest field is given a value (by reflection, so a new field needs no
// edit here), the server's parts are added, and no field of the
// document may be left zero (a field added to api.Status that the
// server does not fill), nor any ingest value changed.
func TestStatusDocumentFillsAPIStatus(t *testing.T) {
	var st api.Status
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		fill(t, v.Field(i), "api.Status."+v.Type().Field(i).Name)
		if v.Type().Field(i).Name == "SpillError" {
			break // ingest's part ends here
		}
	}
	ingestPart := mustJSON(t, st)
	ist := index.Stats{Stale: true, FailedAdds: 2, Heals: 3, LastError: errors.New("index failure")}
	groups := map[string]api.GroupStatus{"g": {CommittedOffset: 7}}
	got := statusDocument(st, "app", groups, errors.New("journal failure"), ist)
	var sc journal.ScrubStatus
	fill(t, reflect.ValueOf(&sc).Elem(), "journal.ScrubStatus")
	var c journal.Corruption
	fill(t, reflect.ValueOf(&c).Elem(), "journal.Corruption")
	scrubStatus(&got, &c, sc)

	for _, name := range zeroFields(reflect.ValueOf(got), "api.Status") {
		t.Errorf("%s is zero: api.Status has a field the status document does not fill", name)
	}
	if !reflect.DeepEqual(got.Groups, groups) || got.Database != "app" || *got.JournalError != "journal failure" || *got.Index.LastError != "index failure" ||
		got.JournalCorrupt.Segment != "journal.Corruption.Segment" || got.JournalScrub.Passes != 7 {
		t.Errorf("the server's parts: %+v", got)
	}
	want := map[string]any{}
	if err := json.Unmarshal(ingestPart, &want); err != nil {
		t.Fatal(err)
	}
	back := map[string]any{}
	if err := json.Unmarshal(mustJSON(t, got), &back); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if k == "database" || k == "groups" || k == "journal_error" || k == "index" || k == "journal_corrupt" || k == "journal_scrub" {
			continue // the server's parts
		}
		if !reflect.DeepEqual(back[k], v) {
			t.Errorf("%q: the document carries %v, ingest had %v", k, back[k], v)
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
	case reflect.Slice: // one element, filled
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), name+"[0]")
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
