package httpapi_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/httpapi"
)

// docSchemas reads openapi.json's request bodies: each operation's
// (resolved) request body schema by "METHOD /path", and the components.
func docSchemas(t *testing.T) (ops map[string]map[string]any, components map[string]any) {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	ops = map[string]map[string]any{}
	for p, methods := range doc.Paths {
		for m, raw := range methods {
			var op struct {
				RequestBody *struct {
					Content map[string]struct {
						Schema map[string]any `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil || op.RequestBody == nil {
				continue
			}
			key := strings.ToUpper(m) + " " + p
			if len(op.RequestBody.Content) != 1 {
				t.Errorf("%s: request body content types %v, want application/json alone", key, op.RequestBody.Content)
			}
			c, ok := op.RequestBody.Content["application/json"]
			if !ok {
				t.Errorf("%s: request body is not application/json", key)
				continue
			}
			ops[key] = resolve(doc.Components.Schemas, c.Schema)
		}
	}
	return ops, doc.Components.Schemas
}

// resolve follows a schema's $ref into components.
func resolve(components map[string]any, s map[string]any) map[string]any {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = components[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
}

// refName is the component a schema names with $ref ("" if none).
func refName(s any) string {
	m, _ := s.(map[string]any)
	ref, _ := m["$ref"].(string)
	return strings.TrimPrefix(ref, "#/components/schemas/")
}

// allowsNull reports whether a property's schema allows null.
func allowsNull(components map[string]any, s map[string]any) bool {
	s = resolve(components, s)
	switch ty := s["type"].(type) {
	case string:
		return ty == "null"
	case []any:
		return slices.Contains(ty, any("null"))
	}
	return false
}

// TestRequestBodiesMatchTheDocument: the request body of every route
// (httpapi.RequestBodies, what the handlers decode strictly) and
// openapi.json's requestBody schema agree: the same operations, the same
// keys (exact case), the same required keys (no omitempty), null allowed
// exactly where the field is tagged pgq:"nullable", durations where the
// document says Duration, and additionalProperties false. The document's
// Duration states api.MinDuration.
func TestRequestBodiesMatchTheDocument(t *testing.T) {
	ops, components := docSchemas(t)
	bodies := httpapi.RequestBodies()
	if len(bodies) == 0 {
		t.Fatal("RequestBodies is empty")
	}
	for key := range ops {
		if _, ok := bodies[key]; !ok {
			t.Errorf("%s: openapi.json has a request body, the route reads none", key)
		}
	}
	durType := reflect.TypeFor[api.Duration]()
	for key, body := range bodies {
		s, ok := ops[key]
		if !ok {
			t.Errorf("%s: reads a %T body, openapi.json documents none", key, body)
			continue
		}
		if s["type"] != "object" || s["additionalProperties"] != false {
			t.Errorf("%s: schema type %v additionalProperties %v, want an object with additionalProperties false", key, s["type"], s["additionalProperties"])
		}
		props, _ := s["properties"].(map[string]any)
		var docRequired []string
		if r, ok := s["required"].([]any); ok {
			for _, n := range r {
				docRequired = append(docRequired, n.(string))
			}
		}
		rt := reflect.TypeOf(body).Elem()
		var goKeys, goRequired []string
		for i := range rt.NumField() {
			f := rt.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			goKeys = append(goKeys, name)
			if !slices.Contains(strings.Split(opts, ","), "omitempty") {
				goRequired = append(goRequired, name)
			}
			ps, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s: %s.%s is key %q, not a property in openapi.json", key, rt.Name(), f.Name, name)
				continue
			}
			if got, want := allowsNull(components, ps), f.Tag.Get("pgq") == "nullable"; got != want {
				t.Errorf("%s: %q: null allowed by the document %v, by the decoder (pgq:\"nullable\") %v", key, name, got, want)
			}
			isDur := refName(ps) == "Duration"
			if items, ok := ps["items"]; ok && f.Type.Kind() == reflect.Slice {
				isDur = refName(items) == "Duration"
				if (f.Type.Elem() == durType) != isDur {
					t.Errorf("%s: %q: items Duration in the document %v, Go element %s", key, name, isDur, f.Type.Elem())
				}
				continue
			}
			if (f.Type == durType) != isDur {
				t.Errorf("%s: %q: Duration in the document %v, Go type %s", key, name, isDur, f.Type)
			}
		}
		for p := range props {
			if !slices.Contains(goKeys, p) {
				t.Errorf("%s: property %q of openapi.json is no key of %s", key, p, rt.Name())
			}
		}
		slices.Sort(docRequired)
		slices.Sort(goRequired)
		if !slices.Equal(docRequired, goRequired) {
			t.Errorf("%s: required keys: openapi.json %v, %s (no omitempty) %v", key, docRequired, rt.Name(), goRequired)
		}
	}

	dur := components["Duration"].(map[string]any)
	if dur["x-minimum"] != api.MinDuration.String() {
		t.Errorf("openapi.json Duration x-minimum %v, want %q (api.MinDuration)", dur["x-minimum"], api.MinDuration)
	}
}

// sampleValue is a valid JSON value for a property schema.
func sampleValue(components map[string]any, ps map[string]any) string {
	switch refName(ps) {
	case "Duration":
		return `"2s"`
	case "Position":
		return `"earliest"`
	case "GroupName":
		return `"strict-made"`
	case "Member":
		return `"m1"`
	}
	s := resolve(components, ps)
	if enum, ok := s["enum"].([]any); ok {
		b, _ := json.Marshal(enum[0])
		return string(b)
	}
	switch s["type"] {
	case "integer", "number":
		return "1"
	case "boolean":
		return "false"
	case "array":
		return "[" + sampleValue(components, s["items"].(map[string]any)) + "]"
	}
	return `"x"`
}

// TestLooseRequestsRefused drives every request body schema of
// openapi.json against a real server: from a body the decoder accepts
// (every documented key set), each key case-changed, sent twice, or
// null (where the document does not allow null), an unknown key, a
// required key left out, and each duration at 1ns and -1s is 400
// bad_request naming the key, never read as something else.
func TestLooseRequestsRefused(t *testing.T) {
	e := start(t, "")
	e.add(1, 2)
	ops, components := docSchemas(t)
	if len(ops) == 0 {
		t.Fatal("openapi.json has no request bodies")
	}
	type kv struct{ k, v string }
	render := func(kvs []kv) string {
		var b strings.Builder
		b.WriteByte('{')
		for i, p := range kvs {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%s", p.k, p.v)
		}
		b.WriteByte('}')
		return b.String()
	}
	for key, s := range ops {
		method, pattern, _ := strings.Cut(key, " ")
		p := path(pattern, "nope", "bf404")
		props, _ := s["properties"].(map[string]any)
		var names []string
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		var base []kv
		for _, n := range names {
			base = append(base, kv{n, sampleValue(components, props[n].(map[string]any))})
		}
		var required []string
		if r, ok := s["required"].([]any); ok {
			for _, n := range r {
				required = append(required, n.(string))
			}
		}

		// The base body passes the decoder (whatever the domain answers:
		// some keys are for other modes or other verbs).
		if resp, b, apiErr := e.do(method, p, render(base)); resp.StatusCode == 400 && (strings.Contains(apiErr.Message, "JSON body") || strings.Contains(apiErr.Message, "want 0 (the default)")) {
			t.Errorf("%s %s: %d %s: the sample body should pass the decoder", key, render(base), resp.StatusCode, b)
		}
		refused := func(body, mentions string) {
			t.Helper()
			resp, b, apiErr := e.do(method, p, body)
			if resp.StatusCode != 400 || apiErr.Code != api.CodeBadRequest || !strings.Contains(apiErr.Message, mentions) {
				t.Errorf("%s %s: %d %s, want 400 bad_request naming %s", key, body, resp.StatusCode, b, mentions)
			}
		}
		for i, kvp := range base {
			with := func(change func(kvs []kv) []kv) string {
				return render(change(slices.Clone(base)))
			}
			q := fmt.Sprintf("%q", kvp.k)
			// Case changed: the first letter, and the whole key.
			for _, other := range []string{strings.ToUpper(kvp.k[:1]) + kvp.k[1:], strings.ToUpper(kvp.k)} {
				refused(with(func(kvs []kv) []kv { kvs[i].k = other; return kvs }), fmt.Sprintf("%q", other))
				// Both spellings: v1 read the last into the field.
				refused(with(func(kvs []kv) []kv { return append(kvs, kv{other, kvp.v}) }), fmt.Sprintf("%q", other))
			}
			// Twice, with the same and with another value.
			refused(with(func(kvs []kv) []kv { return append(kvs, kvp) }), q)
			refused(with(func(kvs []kv) []kv { return slices.Insert(kvs, i, kv{kvp.k, `"other"`}) }), q)
			// null, where the document does not allow it.
			if !allowsNull(components, props[kvp.k].(map[string]any)) {
				refused(with(func(kvs []kv) []kv { kvs[i].v = "null"; return kvs }), q)
			}
			if strings.HasPrefix(kvp.v, "[") {
				refused(with(func(kvs []kv) []kv { kvs[i].v = "[null]"; return kvs }), q)
			}
			// Left out, when required.
			if slices.Contains(required, kvp.k) {
				refused(with(func(kvs []kv) []kv { return slices.Delete(kvs, i, i+1) }), q)
			}
			// Durations below the minimum (never rounded into the default).
			ps := props[kvp.k].(map[string]any)
			isList := false
			if items, ok := ps["items"]; ok {
				ps, isList = items.(map[string]any), true
			}
			if refName(ps) == "Duration" {
				for _, d := range []time.Duration{time.Nanosecond, 999 * time.Microsecond, -time.Second} {
					v, name := fmt.Sprintf("%q", d), kvp.k
					if isList {
						v, name = `["1s",`+v+`]`, name+"[1]"
					}
					refused(with(func(kvs []kv) []kv { kvs[i].v = v; return kvs }), name+" "+d.String())
				}
			}
		}
		refused(render(append(slices.Clone(base), kv{"unknown_key", "1"})), `"unknown_key"`)
		refused(render(base)+render(base), "trailing data")
		refused("null", "want a JSON object")
	}
}
