package format

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
)

// The type names (pgq.Column.TypeName) the Debezium format renders by.
const (
	hstoreName      = "hstore"
	hstoreArrayName = "hstore[]"
)

// hstorePair is one key and value of an hstore; value nil is NULL.
type hstorePair struct {
	key   string
	value *string
}

// appendColumn appends column c's value v: an hstore (c.TypeName) as
// Debezium writes it (appendHstore), anything else by its value type.
func (r *Renderer) appendColumn(b []byte, c *pgq.Column, v pgq.Value) []byte {
	if v.Kind == pgq.ValueText || v.Kind == pgq.ValueUnchangedTOAST {
		switch c.TypeName {
		case hstoreName:
			return r.appendHstore(b, v)
		case hstoreArrayName:
			if v.Kind == pgq.ValueText {
				return r.appendHstoreArray(b, string(v.Data))
			}
			if r.o.Hstore == HstoreMap {
				return append(append(append(b, '['), unavailableHstore...), ']')
			}
		}
	}
	return r.appendValue(b, c.ValueType(), c.Typmod(), v)
}

// unavailableHstore is the unchanged TOAST placeholder of an hstore in
// hstore.handling.mode=json: UnchangedToastedPlaceholder's map of the
// placeholder to itself, as PostgresValueConverter writes it as JSON.
const unavailableHstore = `{"` + unavailable + `":"` + unavailable + `"}`

// appendHstore appends an hstore value (text, or an unchanged TOAST
// value) as Debezium's hstore.handling.mode writes it: in json mode
// (its default) a string of the map as a JSON object
// (io.debezium.data.Json), in map mode the JSON object itself (Kafka
// Connect's map, as the JSON converter writes it), its keys in the
// order Debezium's map iterates them (hstoreJSON). A text that is not
// hstore's output stays the string it is.
func (r *Renderer) appendHstore(b []byte, v pgq.Value) []byte {
	if v.Kind == pgq.ValueUnchangedTOAST {
		if r.o.Hstore == HstoreMap {
			return append(b, unavailableHstore...)
		}
		return appendString(b, unavailableHstore)
	}
	pairs, ok := parseHstore(string(v.Data))
	if !ok {
		return appendString(b, string(v.Data))
	}
	if r.o.Hstore == HstoreMap {
		return hstoreJSON(b, pairs, appendString)
	}
	return appendString(b, string(hstoreJSON(nil, pairs, appendJacksonString)))
}

// appendHstoreArray appends an hstore[] as Debezium does: an array of
// its elements, each as appendHstore writes an hstore (null for NULL).
// A text that is no array literal stays the string it is, as does an
// element that is not hstore's output. (An unchanged TOASTed hstore[]
// is the placeholder of an array of strings in json mode, as Debezium
// writes it; in map mode, where Debezium has no placeholder of an array
// of maps, an array of the hstore placeholder: appendColumn.)
func (r *Renderer) appendHstoreArray(b []byte, s string) []byte {
	var elems []*string
	if err := r.m.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, []byte(s), &elems); err != nil {
		return appendString(b, s)
	}
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		if e == nil {
			b = append(b, "null"...)
			continue
		}
		b = r.appendHstore(b, pgq.Value{Kind: pgq.ValueText, Data: []byte(*e)})
	}
	return append(b, ']')
}

// parseHstore reads hstore's output form: "key"=>"value" pairs (value
// NULL unquoted), separated by ", ", keys and values with " and \
// escaped by a backslash. It reads what pgjdbc's HStoreConverter reads,
// the form PostgreSQL sends; ok is false for anything else.
func parseHstore(s string) (pairs []hstorePair, ok bool) {
	for s != "" {
		var key, value string
		if key, s, ok = hstoreQuoted(s); !ok {
			return nil, false
		}
		if s, ok = strings.CutPrefix(s, "=>"); !ok {
			return nil, false
		}
		p := hstorePair{key: key}
		if rest, null := strings.CutPrefix(s, "NULL"); null {
			s = rest
		} else {
			if value, s, ok = hstoreQuoted(s); !ok {
				return nil, false
			}
			p.value = &value
		}
		pairs = append(pairs, p)
		if s != "" {
			if s, ok = strings.CutPrefix(s, ", "); !ok || s == "" {
				return nil, false
			}
		}
	}
	return pairs, true
}

// hstoreQuoted reads one double-quoted string at the start of s.
func hstoreQuoted(s string) (string, string, bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	var sb strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return sb.String(), s[i+1:], true
		case '\\':
			if i++; i == len(s) {
				return "", "", false
			}
			sb.WriteByte(s[i])
		default:
			sb.WriteByte(c)
		}
	}
	return "", "", false
}

// hstoreJSON appends pairs as the JSON object Debezium writes for an
// hstore: Jackson's JsonGenerator (json mode) or the JSON converter
// (map mode) over the java.util.HashMap pgjdbc's
// HStoreConverter.fromString fills in the text's order, so the keys
// come in that map's iteration order (javaHashMapOrder), each string
// written by str (appendJacksonString for the text of json mode).
func hstoreJSON(b []byte, pairs []hstorePair, str func([]byte, string) []byte) []byte {
	b = append(b, '{')
	for i, k := range javaHashMapOrder(pairs) {
		if i > 0 {
			b = append(b, ',')
		}
		b = str(b, pairs[k].key)
		b = append(b, ':')
		if v := pairs[k].value; v != nil {
			b = str(b, *v)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// javaHashMapOrder returns the indexes of pairs in the order a
// java.util.HashMap (default capacity 16, load factor 0.75) iterates
// them after they were put in order: bucket by bucket, a bucket's keys
// in the order they were put, the table doubled when it holds more than
// three quarters of its capacity or, below 64 buckets, when a bucket
// reaches 9 keys (treeifyBin). A bucket of 9 or more keys in a table of
// 64 or more becomes a tree, whose iteration order this does not
// follow: such a map's keys come in put order within that bucket (the
// same map, in another order: it needs dozens of keys whose hashes
// collide). hstore's keys are unique, so every put adds a key.
func javaHashMapOrder(pairs []hstorePair) []int {
	n := 16
	hashes := make([]uint32, len(pairs))
	buckets := make([][]int, n)
	for i := range pairs {
		hashes[i] = javaSpread(javaStringHash(pairs[i].key))
		k := hashes[i] & uint32(n-1)
		buckets[k] = append(buckets[k], i)
		if size := i + 1; size > n*3/4 || (len(buckets[k]) >= 9 && n < 64) {
			n *= 2
			buckets = rehash(buckets, hashes, n)
		}
	}
	order := make([]int, 0, len(pairs))
	for _, bk := range buckets {
		order = append(order, bk...)
	}
	return order
}

// rehash moves the keys of buckets into n buckets, keeping each
// bucket's order, as HashMap.resize splits a bucket in two.
func rehash(buckets [][]int, hashes []uint32, n int) [][]int {
	next := make([][]int, n)
	for _, bk := range buckets {
		for _, i := range bk {
			k := hashes[i] & uint32(n-1)
			next[k] = append(next[k], i)
		}
	}
	return next
}

// javaStringHash is Java's String.hashCode: s as UTF-16 code units,
// h = 31*h + c in 32-bit arithmetic.
func javaStringHash(s string) uint32 {
	var h uint32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + uint32(hi)
			h = 31*h + uint32(lo)
			continue
		}
		h = 31*h + uint32(r)
	}
	return h
}

// javaSpread is HashMap.hash: the high half folded into the low one.
func javaSpread(h uint32) uint32 { return h ^ h>>16 }

// appendJacksonString appends s as Jackson's JsonGenerator writes a
// string by default: " and \ escaped by a backslash, \b \t \n \f \r
// by their short escapes, other control characters as \u00XX (upper
// case hex), everything else (non-ASCII included) as it is. Invalid
// UTF-8 becomes U+FFFD, as Java's decoding of the text would make it.
func appendJacksonString(b []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', upperHex[c>>4], upperHex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}
