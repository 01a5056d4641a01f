package connectcheck

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"testing"
)

// Assert fails t unless msg passes Check.
func Assert(t testing.TB, msg []byte) {
	t.Helper()
	if err := Check(msg); err != nil {
		t.Errorf("not Kafka Connect JSON with schemas: %v\n%s", err, msg)
	}
}

// Check returns why msg is not what Kafka Connect's JSON converter
// with schemas.enable=true reads, or nil (the package doc says how
// strict it is).
func Check(msg []byte) error {
	if string(bytes.TrimSpace(msg)) == "null" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(msg))
	d.UseNumber()
	var top any
	if err := d.Decode(&top); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	obj, ok := top.(map[string]any)
	if !ok || len(obj) != 2 {
		return fmt.Errorf(`JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional fields`)
	}
	schema, hasSchema := obj["schema"]
	payload, hasPayload := obj["payload"]
	if !hasSchema || !hasPayload {
		return fmt.Errorf(`JsonConverter with schemas.enable requires "schema" and "payload" fields`)
	}
	if schema == nil {
		if payload != nil {
			return fmt.Errorf("payload without a schema")
		}
		return nil
	}
	s, err := parseConnectSchema(schema, "schema")
	if err != nil {
		return err
	}
	return s.check(payload, "payload")
}

// cschema is a parsed Connect schema (JsonConverter.asConnectSchema).
type cschema struct {
	typ      string
	optional bool
	name     string
	params   map[string]string
	hasDef   bool
	fields   []cfield
	items    *cschema
	keys     *cschema
	values   *cschema
}

type cfield struct {
	name   string
	schema *cschema
}

func parseConnectSchema(v any, path string) (*cschema, error) {
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a schema is a JSON object", path)
	}
	s := &cschema{}
	typ, ok := o["type"].(string)
	if !ok {
		return nil, fmt.Errorf("%s: schema without a string type", path)
	}
	s.typ = typ
	if opt, ok := o["optional"]; ok {
		b, isBool := opt.(bool)
		if !isBool {
			return nil, fmt.Errorf("%s: optional is not a boolean", path)
		}
		s.optional = b
	}
	if n, ok := o["name"]; ok {
		if s.name, ok = n.(string); !ok {
			return nil, fmt.Errorf("%s: name is not a string", path)
		}
	}
	if ver, ok := o["version"]; ok {
		n, isNum := ver.(json.Number)
		if _, err := strconv.Atoi(string(n)); !isNum || err != nil {
			return nil, fmt.Errorf("%s: version is not an integer", path)
		}
	}
	if p, ok := o["parameters"]; ok {
		pm, isObj := p.(map[string]any)
		if !isObj {
			return nil, fmt.Errorf("%s: parameters is not an object", path)
		}
		s.params = map[string]string{}
		for k, v := range pm {
			str, isStr := v.(string)
			if !isStr {
				return nil, fmt.Errorf("%s: parameter %s is not a string", path, k)
			}
			s.params[k] = str
		}
	}
	_, s.hasDef = o["default"]
	switch typ {
	case "int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes":
	case "array":
		items, err := parseConnectSchema(o["items"], path+".items")
		if err != nil {
			return nil, err
		}
		s.items = items
	case "map":
		var err error
		if s.keys, err = parseConnectSchema(o["keys"], path+".keys"); err != nil {
			return nil, err
		}
		if s.values, err = parseConnectSchema(o["values"], path+".values"); err != nil {
			return nil, err
		}
	case "struct":
		fs, ok := o["fields"].([]any)
		if !ok {
			return nil, fmt.Errorf("%s: struct schema without a fields array", path)
		}
		seen := map[string]bool{}
		for i, f := range fs {
			fo, _ := f.(map[string]any)
			name, ok := fo["field"].(string)
			if !ok {
				return nil, fmt.Errorf("%s.fields[%d]: no field name", path, i)
			}
			if seen[name] {
				return nil, fmt.Errorf("%s: field %s twice", path, name)
			}
			seen[name] = true
			fsch, err := parseConnectSchema(f, path+"."+name)
			if err != nil {
				return nil, err
			}
			s.fields = append(s.fields, cfield{name, fsch})
		}
	default:
		return nil, fmt.Errorf("%s: unknown schema type %q", path, typ)
	}
	return s, s.checkLogical(path)
}

// checkLogical checks the parameters of the logical types that need them.
func (s *cschema) checkLogical(path string) error {
	switch s.name {
	case "org.apache.kafka.connect.data.Decimal":
		if s.typ != "bytes" {
			return fmt.Errorf("%s: Decimal of type %s", path, s.typ)
		}
		if _, err := strconv.Atoi(s.params["scale"]); err != nil {
			return fmt.Errorf("%s: Decimal without an integer scale parameter", path)
		}
	case "org.apache.kafka.connect.data.Date", "org.apache.kafka.connect.data.Time", "io.debezium.time.Date", "io.debezium.time.Time":
		if s.typ != "int32" {
			return fmt.Errorf("%s: %s of type %s", path, s.name, s.typ)
		}
	case "org.apache.kafka.connect.data.Timestamp", "io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp",
		"io.debezium.time.MicroTime", "io.debezium.time.MicroDuration", "io.debezium.time.NanoTimestamp":
		if s.typ != "int64" {
			return fmt.Errorf("%s: %s of type %s", path, s.name, s.typ)
		}
	case "io.debezium.data.Bits":
		if _, err := strconv.Atoi(s.params["length"]); s.typ != "bytes" || err != nil {
			return fmt.Errorf("%s: Bits needs type bytes and an integer length parameter", path)
		}
	}
	return nil
}

var intRange = map[string][2]int64{
	"int8":  {math.MinInt8, math.MaxInt8},
	"int16": {math.MinInt16, math.MaxInt16},
	"int32": {math.MinInt32, math.MaxInt32},
	"int64": {math.MinInt64, math.MaxInt64},
}

// check checks v, the payload at path, against s.
func (s *cschema) check(v any, path string) error {
	if v == nil {
		if s.optional || s.hasDef {
			return nil
		}
		return fmt.Errorf("%s: invalid null value for required %s field", path, s.typ)
	}
	switch s.typ {
	case "int8", "int16", "int32", "int64":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: %s field holds %T, not a JSON integer", path, s.typ, v)
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || i < intRange[s.typ][0] || i > intRange[s.typ][1] {
			return fmt.Errorf("%s: %s is no %s", path, n, s.typ)
		}
	case "float32", "float64":
		switch x := v.(type) {
		case json.Number:
		case string:
			if x != "NaN" && x != "Infinity" && x != "-Infinity" {
				return fmt.Errorf("%s: %s field holds the string %q", path, s.typ, x)
			}
		default:
			return fmt.Errorf("%s: %s field holds %T", path, s.typ, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: boolean field holds %T", path, v)
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: string field holds %T", path, v)
		}
	case "bytes":
		return s.checkBytes(v, path)
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: array field holds %T", path, v)
		}
		for i, e := range a {
			if err := s.items.check(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case "map":
		return s.checkMap(v, path)
	case "struct":
		return s.checkStruct(v, path)
	}
	return nil
}

func (s *cschema) checkBytes(v any, path string) error {
	str, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s: bytes field holds %T, not a base64 string", path, v)
	}
	raw, err := base64.StdEncoding.DecodeString(str)
	if err != nil {
		return fmt.Errorf("%s: bytes field %q is not base64: %v", path, str, err)
	}
	if s.name != "org.apache.kafka.connect.data.Decimal" {
		return nil
	}
	if len(raw) == 0 {
		return fmt.Errorf("%s: Decimal of zero bytes (BigInteger refuses it)", path)
	}
	unscaled := new(big.Int).SetBytes(raw)
	if raw[0]&0x80 != 0 { // two's complement negative
		unscaled.Sub(unscaled, new(big.Int).Lsh(big.NewInt(1), uint(8*len(raw))))
	}
	if p, ok := s.params["connect.decimal.precision"]; ok {
		prec, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("%s: precision %q", path, p)
		}
		if digits := len(new(big.Int).Abs(unscaled).String()); unscaled.Sign() != 0 && digits > prec {
			return fmt.Errorf("%s: Decimal %s has %d digits, precision %d", path, unscaled, digits, prec)
		}
	}
	return nil
}

func (s *cschema) checkMap(v any, path string) error {
	if s.keys.typ == "string" {
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: map field holds %T", path, v)
		}
		for k, e := range o {
			if err := s.values.check(e, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%s: map with non-string keys holds %T, not an array of pairs", path, v)
	}
	for i, e := range a {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return fmt.Errorf("%s[%d]: not a [key, value] pair", path, i)
		}
		if err := s.keys.check(pair[0], path+"[key]"); err != nil {
			return err
		}
		if err := s.values.check(pair[1], path+"[value]"); err != nil {
			return err
		}
	}
	return nil
}

func (s *cschema) checkStruct(v any, path string) error {
	o, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: structs should be encoded as JSON objects, got %T", path, v)
	}
	named := map[string]bool{}
	for _, f := range s.fields {
		named[f.name] = true
		if err := f.schema.check(o[f.name], path+"."+f.name); err != nil {
			return err
		}
	}
	for k := range o {
		if !named[k] {
			return fmt.Errorf("%s.%s: not in the schema (the converter would drop it)", path, k)
		}
	}
	return nil
}
