package format

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
)

// pgq's own JSON: a transaction as a line of `pgq journal dump` and `pgq
// consume` (AppendJSON), a change as the fetch answers and the bridge's
// payloads carry it (AppendChangeJSONOrdinal, AppendChangeJSON). It is the
// PGQ format's rendering and the data of CloudEvents.

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
func AppendJSON(b []byte, tx *pgq.Transaction) []byte {
	return AppendJSONAs(b, tx, JSONEmbedded)
}

// AppendJSONHead appends the envelope of tx's line in AppendJSON, up to
// and including the opening bracket of "changes": what every format
// that keeps pgq's envelope (package format) shares.
func AppendJSONHead(b []byte, tx *pgq.Transaction) []byte {
	b = appendTxHead(b, tx)
	if tx.Origin != "" {
		b = append(b, `,"origin":`...)
		b = appendString(b, tx.Origin)
	}
	if tx.Backfill != "" {
		b = append(b, `,"backfill":`...)
		b = appendString(b, tx.Backfill)
	}
	b = appendTxPart(b, tx)
	return append(b, `,"changes":[`...)
}

// appendTxHead appends `{"offset":…,"xid":…,"commit_lsn":"…",
// "end_lsn":"…","commit_time":"…"`: how a transaction's line and a
// bridge payload (AppendPayloadHead) both start.
func appendTxHead(b []byte, tx *pgq.Transaction) []byte {
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
	return append(b, '"')
}

// appendTxPart appends `,"part":…,"final":…`.
func appendTxPart(b []byte, tx *pgq.Transaction) []byte {
	b = append(b, `,"part":`...)
	b = strconv.AppendUint(b, uint64(tx.Part), 10)
	b = append(b, `,"final":`...)
	return strconv.AppendBool(b, tx.Final)
}

// AppendPayloadHead appends the part of a bridge payload (pgq's format
// as a broker message, the bridge's wire format: package bridge's doc)
// shared by the changes of tx, up to and including the comma before
// "index": the transaction's offset, xid, LSNs, commit time, part and
// final.
func AppendPayloadHead(b []byte, tx *pgq.Transaction) []byte {
	return append(appendTxPart(appendTxHead(b, tx), tx), ',')
}

// AppendPayloadChange appends the rest of change i's bridge payload
// after AppendPayloadHead: "index" (within the record), "ordinal"
// (within the whole transaction), "count" (the record's changes) and
// "change" (AppendChangeJSON: without its ordinal, which the payload
// carries beside it).
func AppendPayloadChange(b []byte, tx *pgq.Transaction, i int) []byte {
	b = append(b, `"index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"ordinal":`...)
	b = strconv.AppendUint(b, uint64(tx.Ordinal(i)), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(len(tx.Changes)), 10)
	b = append(b, `,"change":`...)
	b = AppendChangeJSON(b, &tx.Changes[i])
	return append(b, '}')
}

// AppendJSONAs is AppendJSON with json and jsonb values written as jv
// says.
func AppendJSONAs(b []byte, tx *pgq.Transaction, jv JSONValues) []byte {
	b = AppendJSONHead(b, tx)
	for i := range tx.Changes {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPGQChange(b, &tx.Changes[i], int64(tx.Ordinal(i)), jv)
	}
	return append(b, "]}"...)
}

// AppendChangeJSON appends one change in the contract's JSON form,
// without its ordinal (a change alone does not know it: see
// AppendChangeJSONOrdinal).
func AppendChangeJSON(b []byte, c *pgq.Change) []byte {
	return appendPGQChange(b, c, -1, JSONEmbedded)
}

// AppendChangeJSONAs is AppendChangeJSON with json and jsonb values
// written as jv says.
func AppendChangeJSONAs(b []byte, c *pgq.Change, jv JSONValues) []byte {
	return appendPGQChange(b, c, -1, jv)
}

// AppendChangeJSONOrdinal appends one change as the contract's answers
// carry it: with "ordinal", its position in its whole transaction
// (pgq.Transaction.Ordinal), right after "op". Every change of a `pgq journal
// dump` / `pgq consume` line and of a fetch answer has it.
func AppendChangeJSONOrdinal(b []byte, c *pgq.Change, ordinal uint32, jv JSONValues) []byte {
	return appendPGQChange(b, c, int64(ordinal), jv)
}

// appendChange renders c; ordinal < 0 leaves the field out.
func appendPGQChange(b []byte, c *pgq.Change, ordinal int64, jv JSONValues) []byte {
	b = append(b, `{"op":"`...)
	b = append(b, c.Op.String()...)
	b = append(b, '"')
	if ordinal >= 0 {
		b = append(b, `,"ordinal":`...)
		b = strconv.AppendInt(b, ordinal, 10)
	}
	switch c.Op {
	case pgq.OpTruncate:
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
	case pgq.OpMessage:
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
	case pgq.OpDDL:
		var d ddlContent
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
	case pgq.OpGap:
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
	b = appendPGQTuple(b, c.Columns, c.New, false, jv)
	b = append(b, `,"old":`...)
	b = appendPGQTuple(b, c.Columns, c.Old, c.OldKind == pgq.OldKey, jv)
	toast := false
	for i, v := range c.New {
		if v.Kind != pgq.ValueUnchangedTOAST || i >= len(c.Columns) {
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
func appendJSONNulls(b []byte, c *pgq.Change) []byte {
	if !hasJSONNull(c.Columns, c.New, false) && !hasJSONNull(c.Columns, c.Old, c.OldKind == pgq.OldKey) {
		return b
	}
	b = append(b, `,"json_null":{"new":`...)
	b = appendJSONNullNames(b, c.Columns, c.New, false)
	b = append(b, `,"old":`...)
	b = appendJSONNullNames(b, c.Columns, c.Old, c.OldKind == pgq.OldKey)
	return append(b, '}')
}

func hasJSONNull(cols []pgq.Column, vals []pgq.Value, keyOnly bool) bool {
	for i := range vals {
		if i < len(cols) && (!keyOnly || cols[i].Key) && IsJSONNull(cols[i].ValueType(), vals[i]) {
			return true
		}
	}
	return false
}

func appendJSONNullNames(b []byte, cols []pgq.Column, vals []pgq.Value, keyOnly bool) []byte {
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
// holding JSON's null (not SQL NULL, which is a pgq.Value of kind pgq.ValueNull).
func IsJSONNull(typeOID uint32, v pgq.Value) bool {
	if v.Kind != pgq.ValueText || (typeOID != pgtype.JSONOID && typeOID != pgtype.JSONBOID) {
		return false
	}
	// json keeps the text as written, blanks around it included.
	return string(bytes.Trim(v.Data, " \t\r\n")) == "null"
}

func appendPGQTuple(b []byte, cols []pgq.Column, vals []pgq.Value, keyOnly bool, jv JSONValues) []byte {
	if vals == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	first := true
	for i, v := range vals {
		if i >= len(cols) || v.Kind == pgq.ValueUnchangedTOAST || (keyOnly && !cols[i].Key) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, cols[i].Name)
		b = append(b, ':')
		b = appendPGQValue(b, cols[i].ValueType(), v, jv)
	}
	return append(b, '}')
}

// AppendValueJSON renders one value by its type: integer types as JSON
// numbers, bool as true/false, json/jsonb embedded, NULL as null, binary
// values as base64 strings and every other type as PostgreSQL's text form.
// For a domain, pass its base type (pgq.Column.ValueType).
func AppendValueJSON(b []byte, typeOID uint32, v pgq.Value) []byte {
	return appendPGQValue(b, typeOID, v, JSONEmbedded)
}

func appendPGQValue(b []byte, typeOID uint32, v pgq.Value, jv JSONValues) []byte {
	switch v.Kind {
	case pgq.ValueNull, pgq.ValueUnchangedTOAST:
		return append(b, "null"...)
	case pgq.ValueBinary:
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

// CommitTime renders a commit time as the contract does.
func CommitTime(t time.Time) string { return t.UTC().Format(commitTimeLayout) }

// AppendCommitTime appends CommitTime's form of t to b.
func AppendCommitTime(b []byte, t time.Time) []byte { return t.UTC().AppendFormat(b, commitTimeLayout) }
