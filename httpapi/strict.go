package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pgq-dev/pgq/api"
)

// Strict decoding: a request body means exactly what openapi.json says it
// means, so that a proxy, a validator or a WAF reading the body by the
// document sees the request pgq acts on. encoding/json (v1) matches keys
// case-insensitively and keeps the last of duplicate keys, so
// {"name":"a","Name":"x"} created a group named x and {"from":null} read
// as an absent key. Here:
//
//   - the body is one JSON object, nothing after it;
//   - keys match the request type's JSON names exactly (case-sensitive);
//     an unknown key is refused, naming it (and the key it differs from
//     only in case);
//   - a duplicate key is refused, at any depth;
//   - null is refused, at any depth, except as the value of a key whose
//     field is tagged `pgq:"nullable"` (the document's type then allows
//     null);
//   - every key whose json tag has no omitempty is required (the
//     document's required list);
//   - a duration (api.Duration) that is neither 0 nor at least
//     api.MinDuration is refused (api.CheckDurations).
//
// The parsing is github.com/go-json-experiment/json, the upstream of Go's
// encoding/json/v2 (which Go 1.26 builds only with GOEXPERIMENT=jsonv2):
// jsontext refuses duplicate names and invalid UTF-8, and Unmarshal
// matches names case-sensitively and, with RejectUnknownMembers, refuses
// unknown ones. Every error is api.ErrBadRequest and names the key.

// requestField is what strict decoding knows of a request body's key.
type requestField struct {
	required bool // no omitempty: the document lists it as required
	nullable bool // tagged pgq:"nullable": null is a value
}

// requestKeys returns the keys of the request body type t (a struct) by
// JSON name.
func requestKeys(t reflect.Type) map[string]requestField {
	if k, ok := keysCache.Load(t); ok {
		return k.(map[string]requestField)
	}
	keys := map[string]requestField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		keys[name] = requestField{
			required: !slices.Contains(strings.Split(opts, ","), "omitempty"),
			nullable: f.Tag.Get("pgq") == "nullable",
		}
	}
	keysCache.Store(t, keys)
	return keys
}

var keysCache sync.Map // reflect.Type → map[string]requestField

// decodeStrict decodes the JSON body data into dst, a pointer to a request
// body struct, by the rules above.
func decodeStrict(data []byte, dst any) error {
	t := reflect.TypeOf(dst)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("httpapi: decodeStrict into %T: want a pointer to a struct", dst)
	}
	keys := requestKeys(t.Elem())
	seen, err := scanBody(data, keys)
	if err != nil {
		return err
	}
	var missing []string
	for k, f := range keys {
		if f.required && !seen[k] {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return api.Errorf(api.ErrBadRequest, "invalid JSON body: missing required key %s", strings.Join(missing, ", "))
	}
	if err := json.Unmarshal(data, dst, json.RejectUnknownMembers(true)); err != nil {
		return api.Errorf(api.ErrBadRequest, "invalid JSON body: %s", describeJSONError(err))
	}
	return api.CheckDurations(dst)
}

// scanBody reads the body's tokens: one object, no duplicate key, no
// unknown or case-changed top-level key, no null but where keys allows
// it, nothing after the object. It returns the top-level keys seen.
func scanBody(data []byte, keys map[string]requestField) (map[string]bool, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	seen := map[string]bool{}
	var key string // the top-level key whose value is being read
	for first := true; ; first = false {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) && first {
			return nil, api.Errorf(api.ErrBadRequest, "empty request body: want a JSON object")
		}
		if err != nil {
			return nil, api.Errorf(api.ErrBadRequest, "invalid JSON body: %s", describeJSONError(err))
		}
		kind := tok.Kind()
		if first && kind != '{' {
			return nil, api.Errorf(api.ErrBadRequest, "invalid JSON body: want a JSON object, not %s", kindName(kind))
		}
		depth := dec.StackDepth()
		if depth == 0 { // the object ended
			if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
				return nil, api.Errorf(api.ErrBadRequest, "invalid JSON body: trailing data after the object")
			}
			return seen, nil
		}
		if c, n := dec.StackIndex(depth); depth == 1 && kind == '"' && c == '{' && n%2 == 1 {
			key = tok.String()
			if _, ok := keys[key]; !ok {
				return nil, api.Errorf(api.ErrBadRequest, "invalid JSON body: unknown key %q%s", key, caseHint(key, keys))
			}
			seen[key] = true
			continue
		}
		if kind == 'n' && (depth != 1 || !keys[key].nullable) {
			return nil, api.Errorf(api.ErrBadRequest, "invalid JSON body: null at %s: the API document allows none there (leave the key out for its default)", where(dec.StackPointer()))
		}
	}
}

// caseHint names the known key that key differs from only in case.
func caseHint(key string, keys map[string]requestField) string {
	for k := range keys {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf(" (keys are case-sensitive: %q)", k)
		}
	}
	return ""
}

// where renders a JSON pointer as the key it points at ("ack_ids[2]").
func where(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		switch {
		case b.Len() == 0:
			fmt.Fprintf(&b, "%q", tok)
		case tok != "" && strings.Trim(tok, "0123456789") == "":
			fmt.Fprintf(&b, "[%s]", tok)
		default:
			fmt.Fprintf(&b, ".%q", tok)
		}
	}
	if b.Len() == 0 {
		return "the top level"
	}
	return "key " + b.String()
}

// describeJSONError words a jsontext or json error by the key it is at.
func describeJSONError(err error) string {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		if ptr := se.JSONPointer; ptr != "" {
			return fmt.Sprintf("at %s: %v", where(ptr), se.Err)
		}
		return fmt.Sprintf("at byte %d: %v", se.ByteOffset, se.Err)
	}
	var me *json.SemanticError
	if errors.As(err, &me) {
		what := "a JSON " + kindName(me.JSONKind)
		if me.JSONValue != nil {
			what = string(me.JSONValue)
		}
		msg := fmt.Sprintf("at %s: cannot read %s", where(me.JSONPointer), what)
		if me.GoType != nil {
			msg += " as " + goTypeName(me.GoType)
		}
		if me.Err != nil {
			msg += ": " + me.Err.Error()
		}
		return msg
	}
	return err.Error()
}

// goTypeName words a Go type of a request field for a client.
func goTypeName(t reflect.Type) string {
	if t == reflect.TypeFor[api.Duration]() {
		return "a duration"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint32, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// kindName words a JSON kind.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// RequestBodies returns the JSON request body of every route that reads
// one, by "METHOD pattern" (Route.Body: a pointer to a zero value of its
// type). openapi.json's requestBody of each such operation describes that
// type, key for key (a test holds the two together).
//
// The values are any: each route's body is a type of its own.
func RequestBodies() map[string]any {
	out := map[string]any{}
	for _, r := range Routes(false) {
		if r.Body != nil {
			out[r.Method+" "+r.Pattern] = r.Body
		}
	}
	return out
}
