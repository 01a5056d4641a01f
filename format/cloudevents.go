package format

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pgq-dev/pgq"
)

// CloudEvents attribute values pgq writes.
const (
	// SpecVersion is the CloudEvents version of the events.
	SpecVersion = "1.0"
	// TypePrefix starts every event type: "pgq.insert", "pgq.update", ….
	TypePrefix = "pgq."
	// DataContentType is the media type of the data: the change as pgq's
	// JSON.
	DataContentType = "application/json"
)

func defaultSource(db, slot string) string {
	return "/pgq/" + url.PathEscape(db) + "/" + url.PathEscape(slot)
}

// Attributes are the CloudEvents context attributes of one change.
type Attributes struct {
	ID      string
	Source  string
	Type    string
	Subject string // "" when the change names no table
	Time    time.Time
	// Extensions: the commit LSN ("pgqlsn", "X/Y") and the transaction id
	// ("pgqxid").
	LSN pgq.LSN
	Xid uint32
}

// CloudEventAttributes returns the attributes of change i of tx: id the
// change's stable id (ChangeID), source the renderer's (database and
// slot), type "pgq.<op>", subject "schema.table" (a truncate's tables
// joined by ","; a ddl's object; none for a message or a gap), time the
// commit time.
func (r *Renderer) CloudEventAttributes(tx *pgq.Transaction, i int) Attributes {
	c := &tx.Changes[i]
	a := Attributes{
		ID:     ChangeID(tx.CommitLSN, tx.Ordinal(i), tx.Backfill),
		Source: r.o.Source,
		Type:   TypePrefix + c.Op.String(),
		Time:   tx.CommitTime.UTC(),
		LSN:    tx.CommitLSN,
		Xid:    tx.Xid,
	}
	switch c.Op {
	case pgq.OpMessage, pgq.OpGap:
	case pgq.OpTruncate:
		a.Subject = strings.Join(c.Tables, ",")
	case pgq.OpDDL:
		a.Subject = ddlObject(c.Content)
	default:
		a.Subject = c.Schema + "." + c.Table
	}
	return a
}

// AppendCloudEvent appends change i of tx as a CloudEvents 1.0 event in
// the JSON format (structured mode): the attributes and, as "data", the
// change in pgq's JSON with its ordinal, as the fetch answers carry it
// (AppendChangeJSONOrdinal with the renderer's JSONValues).
func (r *Renderer) AppendCloudEvent(b []byte, tx *pgq.Transaction, i int) []byte {
	a := r.CloudEventAttributes(tx, i)
	b = append(b, `{"specversion":"`+SpecVersion+`","id":`...)
	b = appendString(b, a.ID)
	b = append(b, `,"source":`...)
	b = appendString(b, a.Source)
	b = append(b, `,"type":`...)
	b = appendString(b, a.Type)
	if a.Subject != "" {
		b = append(b, `,"subject":`...)
		b = appendString(b, a.Subject)
	}
	b = append(b, `,"time":"`...)
	b = AppendCommitTime(b, a.Time)
	b = append(b, `","datacontenttype":"`+DataContentType+`","pgqlsn":"`...)
	b = a.LSN.Append(b)
	b = append(b, `","pgqxid":`...)
	b = strconv.AppendUint(b, uint64(a.Xid), 10)
	b = append(b, `,"data":`...)
	b = r.AppendCloudEventData(b, tx, i)
	return append(b, '}')
}

// AppendCloudEventData appends the data of change i's event: the change
// in pgq's JSON. With Headers it makes a binary-mode message.
func (r *Renderer) AppendCloudEventData(b []byte, tx *pgq.Transaction, i int) []byte {
	return AppendChangeJSONOrdinal(b, &tx.Changes[i], tx.Ordinal(i), r.o.JSONValues)
}

// Headers returns the binary-mode headers of a: name/value pairs, in a
// fixed order. The message's body is the data (AppendCloudEventData).
func (a Attributes) Headers(bind Binding) [][2]string {
	prefix, enc := "ce-", percentEncode
	ct := [2]string{"Content-Type", DataContentType}
	switch bind {
	case NATS:
		ct = [2]string{"ce-datacontenttype", DataContentType}
	case Kafka:
		prefix, enc = "ce_", func(s string) string { return s }
		ct = [2]string{"content-type", DataContentType}
	}
	h := make([][2]string, 0, 9)
	h = append(h,
		[2]string{prefix + "specversion", SpecVersion},
		[2]string{prefix + "id", enc(a.ID)},
		[2]string{prefix + "source", enc(a.Source)},
		[2]string{prefix + "type", enc(a.Type)})
	if a.Subject != "" {
		h = append(h, [2]string{prefix + "subject", enc(a.Subject)})
	}
	h = append(h,
		[2]string{prefix + "time", CommitTime(a.Time)},
		ct,
		[2]string{prefix + "pgqlsn", a.LSN.String()},
		[2]string{prefix + "pgqxid", strconv.FormatUint(uint64(a.Xid), 10)})
	return h
}

// percentEncode encodes a header value as the HTTP and NATS bindings
// say: space, double quote, percent and everything outside printable
// US-ASCII as %XX of its UTF-8 bytes.
func percentEncode(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '%' {
			sb.WriteByte('%')
			sb.WriteByte("0123456789ABCDEF"[c>>4])
			sb.WriteByte("0123456789ABCDEF"[c&0xf])
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// ddlObject is the object a ddl change names (its JSON's "object").
func ddlObject(content []byte) string {
	var d struct {
		Object string `json:"object"`
	}
	_ = jsonUnmarshal(content, &d) // a malformed payload names nothing
	return d.Object
}
