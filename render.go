package pgq

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// ErrUnchangedTOAST is returned when a caller asks for the value of an
// unchanged TOASTed column: PostgreSQL did not send it.
var ErrUnchangedTOAST = errors.New("pgq: unchanged TOAST value was not sent")

// Decode converts the value into a Go value with pgtype's codec for the
// column's type OID: int64 for int8, bool, pgtype.Numeric, time.Time, maps
// for json, and so on. NULL is nil; a type pgtype does not know (enums,
// domains of user types) comes back as its text form.
func (v Value) Decode(m *pgtype.Map, typeOID uint32) (any, error) {
	switch v.Kind {
	case ValueNull:
		return nil, nil
	case ValueUnchangedTOAST:
		return nil, ErrUnchangedTOAST
	}
	format := int16(pgtype.TextFormatCode)
	if v.Kind == ValueBinary {
		format = pgtype.BinaryFormatCode
	}
	t, ok := m.TypeForOID(typeOID)
	if !ok {
		if format == pgtype.BinaryFormatCode {
			return append([]byte(nil), v.Data...), nil
		}
		return string(v.Data), nil
	}
	return t.Codec.DecodeValue(m, typeOID, format, v.Data)
}

// Get returns the value of the named column in the new (or, with old set,
// the old) image, its column description, and whether it was present.
func (c *Change) Get(name string, old bool) (Value, Column, bool) {
	vals := c.New
	if old {
		vals = c.Old
	}
	for i, col := range c.Columns {
		if col.Name == name && i < len(vals) {
			if old && c.OldKind == OldKey && !col.Key {
				return Value{}, col, false
			}
			return vals[i], col, true
		}
	}
	return Value{}, Column{}, false
}

const commitTimeLayout = "2006-01-02T15:04:05.999999Z07:00"

// JSONValues says how the JSON renderers write a value of type json or
// jsonb.
type JSONValues uint8

const (
	// JSONEmbedded embeds the value's JSON in the document: the contract
	// of `pgq journal dump`, `pgq consume` and the JSON answers.
	JSONEmbedded JSONValues = iota
	// JSONAsText writes it as a JSON string holding the value's JSON
	// text byte for byte: the form the msgpack answers are converted from.
	// Embedded JSON would be parsed by the conversion, which turns numbers
	// into float64 (2.50 becomes 2.5, 1e400 +Inf, integers beyond 64 bits
	// lose digits) and collapses the duplicate keys of a json value.
	JSONAsText
)

// AppendJSON appends tx as one line of the `pgq journal dump` / `pgq
// consume` contract (without the trailing newline). Each change carries
// its ordinal in the whole transaction (see AppendChangeJSONOrdinal).
func AppendJSON(b []byte, tx *Transaction) []byte {
	return AppendJSONAs(b, tx, JSONEmbedded)
}

// AppendJSONHead appends the envelope of tx's line in AppendJSON, up to
// and including the opening bracket of "changes": what every format
// that keeps pgq's envelope (package format) shares.
func AppendJSONHead(b []byte, tx *Transaction) []byte {
	b = append(b, `{"offset":`...)
	b = strconv.AppendUint(b, uint64(tx.Offset), 10)
	b = append(b, `,"xid":`...)
	b = strconv.AppendUint(b, uint64(tx.Xid), 10)
	b = append(b, `,"commit_lsn":"`...)
	b = tx.CommitLSN.Append(b)
	b = append(b, `","end_lsn":"`...)
	b = tx.EndLSN.Append(b)
	b = append(b, `","commit_time":"`...)
	b = AppendCommitTime(b, tx.CommitTime)
	b = append(b, '"')
	if tx.Origin != "" {
		b = append(b, `,"origin":`...)
		b = appendString(b, tx.Origin)
	}
	if tx.Backfill != "" {
		b = append(b, `,"backfill":`...)
		b = appendString(b, tx.Backfill)
	}
	b = append(b, `,"part":`...)
	b = strconv.AppendUint(b, uint64(tx.Part), 10)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, tx.Final)
	b = append(b, `,"changes":[`...)
	return b
}

// AppendJSONAs is AppendJSON with json and jsonb values written as jv
// says.
func AppendJSONAs(b []byte, tx *Transaction, jv JSONValues) []byte {
	b = AppendJSONHead(b, tx)
	for i := range tx.Changes {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendChange(b, &tx.Changes[i], int64(tx.Ordinal(i)), jv)
	}
	return append(b, "]}"...)
}

// AppendChangeJSON appends one change in the contract's JSON form,
// without its ordinal (a change alone does not know it: see
// AppendChangeJSONOrdinal).
func AppendChangeJSON(b []byte, c *Change) []byte {
	return appendChange(b, c, -1, JSONEmbedded)
}

// AppendChangeJSONAs is AppendChangeJSON with json and jsonb values
// written as jv says.
func AppendChangeJSONAs(b []byte, c *Change, jv JSONValues) []byte {
	return appendChange(b, c, -1, jv)
}

// AppendChangeJSONOrdinal appends one change as the contract's answers
// carry it: with "ordinal", its position in its whole transaction
// (Transaction.Ordinal), right after "op". Every change of a `pgq journal
// dump` / `pgq consume` line and of a fetch answer has it.
func AppendChangeJSONOrdinal(b []byte, c *Change, ordinal uint32, jv JSONValues) []byte {
	return appendChange(b, c, int64(ordinal), jv)
}

// appendChange renders c; ordinal < 0 leaves the field out.
func appendChange(b []byte, c *Change, ordinal int64, jv JSONValues) []byte {
	b = append(b, `{"op":"`...)
	b = append(b, c.Op.String()...)
	b = append(b, '"')
	if ordinal >= 0 {
		b = append(b, `,"ordinal":`...)
		b = strconv.AppendInt(b, ordinal, 10)
	}
	switch c.Op {
	case OpTruncate:
		b = append(b, `,"tables":[`...)
		for i, t := range c.Tables {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t)
		}
		b = append(b, `],"cascade":`...)
		b = strconv.AppendBool(b, c.Cascade)
		b = append(b, `,"restart_identity":`...)
		b = strconv.AppendBool(b, c.RestartIdentity)
		return append(b, '}')
	case OpMessage:
		b = append(b, `,"prefix":`...)
		b = appendString(b, c.Prefix)
		b = append(b, `,"content":`...)
		if utf8.Valid(c.Content) {
			b = appendString(b, string(c.Content))
			b = append(b, `,"content_encoding":"utf8"`...)
		} else {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, c.Content)
			b = append(b, `","content_encoding":"base64"`...)
		}
		b = append(b, `,"transactional":`...)
		b = strconv.AppendBool(b, c.Transactional)
		return append(b, '}')
	case OpDDL:
		var d struct {
			Command    string `json:"command"`
			Object     string `json:"object"`
			Schema     string `json:"schema"`
			ObjectType string `json:"object_type"`
			Statement  string `json:"statement"`
		}
		_ = json.Unmarshal(c.Content, &d) // a malformed payload renders empty fields
		b = append(b, `,"command":`...)
		b = appendString(b, d.Command)
		b = append(b, `,"object":`...)
		b = appendString(b, d.Object)
		b = append(b, `,"schema":`...)
		b = appendString(b, d.Schema)
		b = append(b, `,"object_type":`...)
		b = appendString(b, d.ObjectType)
		b = append(b, `,"statement":`...)
		b = appendString(b, d.Statement)
		return append(b, '}')
	case OpGap:
		b = append(b, `,"from_lsn":"`...)
		b = c.FromLSN.Append(b)
		b = append(b, `","to_lsn":"`...)
		b = c.ToLSN.Append(b)
		return append(b, `"}`...)
	}
	b = append(b, `,"schema":`...)
	b = appendString(b, c.Schema)
	b = append(b, `,"table":`...)
	b = appendString(b, c.Table)
	b = append(b, `,"new":`...)
	b = appendTuple(b, c.Columns, c.New, false, jv)
	b = append(b, `,"old":`...)
	b = appendTuple(b, c.Columns, c.Old, c.OldKind == OldKey, jv)
	toast := false
	for i, v := range c.New {
		if v.Kind != ValueUnchangedTOAST || i >= len(c.Columns) {
			continue
		}
		if !toast {
			b = append(b, `,"unchanged_toast":[`...)
			toast = true
		} else {
			b = append(b, ',')
		}
		b = appendString(b, c.Columns[i].Name)
	}
	if toast {
		b = append(b, ']')
	}
	b = appendJSONNulls(b, c)
	return append(b, '}')
}

// appendJSONNulls appends "json_null":{"new":[…],"old":[…]}, the columns
// of each image whose json or jsonb value is JSON's null, when there are
// any. Their values render as null, like SQL NULL: a consumer that knows
// nothing of json_null reads what it always did, one that does can tell
// the two apart.
func appendJSONNulls(b []byte, c *Change) []byte {
	if !hasJSONNull(c.Columns, c.New, false) && !hasJSONNull(c.Columns, c.Old, c.OldKind == OldKey) {
		return b
	}
	b = append(b, `,"json_null":{"new":`...)
	b = appendJSONNullNames(b, c.Columns, c.New, false)
	b = append(b, `,"old":`...)
	b = appendJSONNullNames(b, c.Columns, c.Old, c.OldKind == OldKey)
	return append(b, '}')
}

func hasJSONNull(cols []Column, vals []Value, keyOnly bool) bool {
	for i := range vals {
		if i < len(cols) && (!keyOnly || cols[i].Key) && IsJSONNull(cols[i].ValueType(), vals[i]) {
			return true
		}
	}
	return false
}

func appendJSONNullNames(b []byte, cols []Column, vals []Value, keyOnly bool) []byte {
	b = append(b, '[')
	first := true
	for i := range vals {
		if i >= len(cols) || (keyOnly && !cols[i].Key) || !IsJSONNull(cols[i].ValueType(), vals[i]) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, cols[i].Name)
	}
	return append(b, ']')
}

// IsJSONNull reports whether v, of type typeOID, is a json or jsonb value
// holding JSON's null (not SQL NULL, which is a Value of kind ValueNull).
func IsJSONNull(typeOID uint32, v Value) bool {
	if v.Kind != ValueText || (typeOID != pgtype.JSONOID && typeOID != pgtype.JSONBOID) {
		return false
	}
	// json keeps the text as written, blanks around it included.
	return string(bytes.Trim(v.Data, " \t\r\n")) == "null"
}

func appendTuple(b []byte, cols []Column, vals []Value, keyOnly bool, jv JSONValues) []byte {
	if vals == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	first := true
	for i, v := range vals {
		if i >= len(cols) || v.Kind == ValueUnchangedTOAST || (keyOnly && !cols[i].Key) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, cols[i].Name)
		b = append(b, ':')
		b = appendValue(b, cols[i].ValueType(), v, jv)
	}
	return append(b, '}')
}

// AppendValueJSON renders one value by its type: integer types as JSON
// numbers, bool as true/false, json/jsonb embedded, NULL as null, binary
// values as base64 strings and every other type as PostgreSQL's text form.
// For a domain, pass its base type (Column.ValueType).
func AppendValueJSON(b []byte, typeOID uint32, v Value) []byte {
	return appendValue(b, typeOID, v, JSONEmbedded)
}

func appendValue(b []byte, typeOID uint32, v Value, jv JSONValues) []byte {
	switch v.Kind {
	case ValueNull, ValueUnchangedTOAST:
		return append(b, "null"...)
	case ValueBinary:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Data)
		return append(b, '"')
	}
	switch typeOID {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		if isCanonicalInt(v.Data) {
			return append(b, v.Data...)
		}
	case pgtype.BoolOID:
		switch string(v.Data) {
		case "t":
			return append(b, "true"...)
		case "f":
			return append(b, "false"...)
		}
	case pgtype.JSONOID, pgtype.JSONBOID:
		if jv == JSONEmbedded && json.Valid(v.Data) {
			return append(b, v.Data...)
		}
	}
	return appendString(b, string(v.Data))
}

// isCanonicalInt reports whether s is an integer as PostgreSQL writes
// one (and JSON allows): no sign but a minus, no leading zeros, within 64
// bits. Anything else ("+5", "007") would make the line invalid JSON or
// change in the msgpack conversion; it renders as a string.
func isCanonicalInt(s []byte) bool {
	var tmp [24]byte
	if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		return string(strconv.AppendInt(tmp[:0], n, 10)) == string(s)
	}
	if n, err := strconv.ParseUint(string(s), 10, 64); err == nil {
		return string(strconv.AppendUint(tmp[:0], n, 10)) == string(s)
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// FormatCommitTime renders a commit time as the contract does.
func FormatCommitTime(t time.Time) string { return t.UTC().Format(commitTimeLayout) }

// AppendCommitTime appends FormatCommitTime's form of t to b.
func AppendCommitTime(b []byte, t time.Time) []byte { return t.UTC().AppendFormat(b, commitTimeLayout) }
