package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/pgq-dev/pgq/api"
)

func healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

func (a *API) ready(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	if why := a.o.NotReady(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(why + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	b, err := statusJSON(a.o.Status())
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	writeBody(w, http.StatusOK, "application/json", append(b, '\n'))
}

// statusJSON encodes st as GET /v1/status has always written it: the
// document's keys, the index's and each group's in alphabetical order,
// the other objects (lag, journal_corrupt, journal_scrub) in their
// types' field order. api.Status keeps its fields in reading order
// (pgq status -o json prints them so); sortedTypes names the types
// written sorted, field by field, with no intermediate map.
func statusJSON(st api.Status) ([]byte, error) {
	return appendSorted(nil, reflect.ValueOf(st))
}

// sortedTypes are the struct types statusJSON writes with their keys in
// alphabetical order, as values or as the values of a map.
var sortedTypes = map[reflect.Type]bool{
	reflect.TypeFor[api.Status]():      true,
	reflect.TypeFor[api.IndexStatus](): true,
	reflect.TypeFor[api.GroupStatus](): true,
}

// sortedField is one field of a struct in sortedTypes: its key and value.
type sortedField struct {
	key string
	v   reflect.Value
}

// appendSorted appends v, a struct of sortedTypes, as a JSON object with
// its keys sorted (as encoding/json sorts a map's); it honours the json
// tag's name, "-" and omitempty.
func appendSorted(b []byte, v reflect.Value) ([]byte, error) {
	var fs []sortedField
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || strings.Contains(opts, "omitempty") && v.Field(i).IsZero() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, sortedField{name, v.Field(i)})
	}
	slices.SortFunc(fs, func(x, y sortedField) int { return strings.Compare(x.key, y.key) })
	b = append(b, '{')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendValue(appendKey(b, f.key), f.v); err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	return append(b, '}'), nil
}

// appendValue appends v: a struct of sortedTypes, or a map of them, with
// sorted keys; anything else as encoding/json writes it.
func appendValue(b []byte, v reflect.Value) ([]byte, error) {
	switch {
	case sortedTypes[v.Type()]:
		return appendSorted(b, v)
	case v.Kind() == reflect.Map && sortedTypes[v.Type().Elem()] && !v.IsNil():
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendSorted(appendKey(b, k.String()), v.MapIndex(k)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	vb, err := json.Marshal(v.Interface())
	return append(b, vb...), err
}

// appendKey appends k as an object's key and the colon after it.
func appendKey(b []byte, k string) []byte {
	kb, _ := json.Marshal(k) // a string always encodes
	return append(append(b, kb...), ':')
}

func (a *API) metrics(w http.ResponseWriter, r *http.Request) { a.o.Metrics.ServeHTTP(w, r) }

// openapi serves the OpenAPI document of this API (openapi.json).
func openapi(w http.ResponseWriter, r *http.Request) {
	writeBody(w, http.StatusOK, "application/json", OpenAPI)
}
