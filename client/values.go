package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
)

// Image chooses the row image of a change that Values and Scan read:
// NewImage (an insert's, an update's or a read's row) or OldImage (an
// update's or a delete's previous row, as the table's replica identity
// sends it). It is a bool underneath only so that calls written before it
// existed, Scan(c, false, &o), still compile for one release.
type Image bool

// The row images.
const (
	NewImage Image = false
	OldImage Image = true
)

// String returns "new" or "old".
func (img Image) String() string {
	if img == OldImage {
		return "old"
	}
	return "new"
}

// Values decodes the image img (NewImage or OldImage) of a row change
// into Go values by column name, with pgx's pgtype: int64 for int8, int32
// for int4, bool, float64, string for text, time.Time for timestamps,
// pgtype.Numeric for numeric, []any for arrays, nil for NULL. A domain
// decodes as its base type when the record carries it (Column.ValueType).
// json and jsonb give json.RawMessage, the value's JSON text byte for
// byte: unmarshal it as you need (decoding it here would turn 2.50 into
// 2.5, fail on 1e400, lose digits of big integers and collapse duplicate
// keys), and JSON null is json.RawMessage("null"), SQL NULL nil.
// Unchanged TOAST columns and, for a key-only old
// image, non-key columns are left out. m is not safe for concurrent use:
// give each goroutine its own (pgtype.NewMap()), or pass nil to use a
// pooled one.
//
// Passing a bare false or true for img is deprecated (it compiles for one
// release): write NewImage or OldImage.
func Values(m *pgtype.Map, c *pgq.Change, img Image) (map[string]any, error) {
	old := img == OldImage
	if m == nil {
		pm := typeMaps.Get().(*pgtype.Map)
		defer typeMaps.Put(pm)
		m = pm
	}
	vals := c.New
	if old {
		vals = c.Old
	}
	if vals == nil {
		return nil, nil
	}
	// A row's values: open-ended (the table's column names and types).
	out := make(map[string]any, len(vals))
	for i, v := range vals {
		if i >= len(c.Columns) || v.Kind == pgq.ValueUnchangedTOAST || (old && c.OldKind == pgq.OldKey && !c.Columns[i].Key) {
			continue
		}
		col := c.Columns[i]
		d, err := decodeValue(m, col.ValueType(), v)
		if err != nil {
			return nil, fmt.Errorf("client: column %s.%s.%s: %w", c.Schema, c.Table, col.Name, err)
		}
		out[col.Name] = d
	}
	return out, nil
}

// decodeValue is Value.Decode, except that json and jsonb keep their
// text (see Values).
func decodeValue(m *pgtype.Map, typeOID uint32, v pgq.Value) (any, error) {
	if v.Kind == pgq.ValueText && (typeOID == pgtype.JSONOID || typeOID == pgtype.JSONBOID) {
		return json.RawMessage(bytes.Clone(v.Data)), nil
	}
	return v.Decode(m, typeOID)
}

// typeMaps pools pgtype maps for callers that pass none.
var typeMaps = sync.Pool{New: func() any { return pgtype.NewMap() }}

// Scan stores the image img (NewImage or OldImage) of a row change into
// the struct dst points to, column by column, with pgx's conversions (so a
// numeric column scans into a float64, a string or a pgtype.Numeric, an
// int4 into any integer type, a json column into a map, a struct or a
// []byte, an array into a slice). A field takes the column named by its
// `pgq:"name"` tag, else the column whose name is the field's name in
// snake_case (OrderID ← order_id); `pgq:"-"` skips it. Columns without a
// field are ignored, and fields without a column (or whose column was not
// sent: unchanged TOAST, not in a key-only old image) keep their value. A
// NULL sets the field to its zero value. Passing a bare false or true for
// img is deprecated (it compiles for one release): write NewImage or
// OldImage.
func Scan(c *pgq.Change, img Image, dst any) error {
	old := img == OldImage
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return errors.New("client: scan: dst must be a non-nil pointer to a struct")
	}
	sv := rv.Elem()
	fields := fieldsOf(sv.Type())
	vals := c.New
	if old {
		vals = c.Old
	}
	m := typeMaps.Get().(*pgtype.Map)
	defer typeMaps.Put(m)
	for i, v := range vals {
		if i >= len(c.Columns) || v.Kind == pgq.ValueUnchangedTOAST || (old && c.OldKind == pgq.OldKey && !c.Columns[i].Key) {
			continue
		}
		col := c.Columns[i]
		fi, ok := fields[col.Name]
		if !ok {
			continue
		}
		f := sv.FieldByIndex(fi)
		if v.Kind == pgq.ValueNull {
			f.SetZero()
			continue
		}
		format := int16(pgtype.TextFormatCode)
		if v.Kind == pgq.ValueBinary {
			format = pgtype.BinaryFormatCode
		}
		if err := m.Scan(col.ValueType(), format, v.Data, f.Addr().Interface()); err != nil {
			return fmt.Errorf("client: scan column %s.%s.%s into %s: %w", c.Schema, c.Table, col.Name, f.Type(), err)
		}
	}
	return nil
}

// fieldCache maps a struct type to its column → field index table.
var fieldCache sync.Map // reflect.Type → map[string][]int

func fieldsOf(t reflect.Type) map[string][]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Tag.Get("pgq")
		if name == "-" {
			continue
		}
		if name == "" {
			name = snakeCase(f.Name)
		}
		m[name] = f.Index
	}
	fieldCache.Store(t, m)
	return m
}

// snakeCase turns OrderID into order_id and CreatedAt into created_at.
func snakeCase(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && !unicode.IsUpper(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if i > 0 && (prevLower || (nextLower && unicode.IsUpper(r[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
