package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/vmihailenco/msgpack/v5"
)

var testCols = []pgq.Column{
	{Name: "id", TypeOID: 23, Key: true},
	{Name: "name", TypeOID: 25},
	{Name: "payload", TypeOID: 17},
	{Name: "note", TypeOID: 25},
}

func text(s string) pgq.Value { return pgq.Value{Kind: pgq.ValueText, Data: []byte(s)} }

// sampleTx holds every op, nil and empty images, binary values, an unknown
// value kind, a message and a truncate.
func sampleTx() *pgq.Transaction {
	other := []pgq.Column{{Name: "k", TypeOID: 20, Key: true}}
	return &pgq.Transaction{
		Offset:     42, // not encoded
		Xid:        4_000_000_000,
		CommitLSN:  0x16_B374_D848,
		EndLSN:     0x16_B374_D900,
		CommitTime: time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC),
		Origin:     "node-a",
		Part:       3,
		Final:      true,
		Changes: []pgq.Change{
			{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: testCols,
				New: []pgq.Value{text("1"), text(""), {Kind: pgq.ValueBinary, Data: []byte{0, 1, 2, 0xff}}, {Kind: pgq.ValueNull}}},
			{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: testCols, OldKind: pgq.OldKey,
				New: []pgq.Value{text("1"), {Kind: pgq.ValueUnchangedTOAST}, {Kind: pgq.ValueBinary, Data: []byte{}}, text("é")},
				Old: []pgq.Value{text("1"), {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}}},
			{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: testCols, New: []pgq.Value{}, Old: []pgq.Value{}},
			{Op: pgq.OpDelete, Schema: "s2", Table: "other", Columns: other, OldKind: pgq.OldFull,
				Old: []pgq.Value{text("9223372036854775807")}},
			{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: append([]pgq.Column(nil), testCols...),
				New: []pgq.Value{text("2"), {Kind: 'x', Data: []byte("odd kind")}, {Kind: pgq.ValueBinary, Data: bytes.Repeat([]byte{7}, 70000)}, text(string(bytes.Repeat([]byte("a"), 300)))}},
			{Op: pgq.OpTruncate, Tables: []string{"public.t", "s2.other"}, Cascade: true},
			{Op: pgq.OpTruncate, Tables: []string{"public.t"}, RestartIdentity: true},
			{Op: pgq.OpMessage, Prefix: "app", Content: []byte{0, 'h', 'i', 0xfe}, Transactional: true},
			{Op: pgq.OpMessage, Prefix: "", Content: []byte{}},
			{Op: pgq.OpGap, FromLSN: 0x16_0000_0001, ToLSN: 0x16_B374_D848},
			{Op: pgq.OpDDL, Prefix: "pgq.ddl", Content: []byte(`{"command":"ALTER TABLE"}`), Transactional: true},
		},
	}
}

func roundTrip(t testing.TB, tx *pgq.Transaction) *pgq.Transaction {
	t.Helper()
	rec := Append(nil, tx)
	var got pgq.Transaction
	if err := Decode(rec, &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return &got
}

func checkEqual(t *testing.T, want, got *pgq.Transaction) {
	t.Helper()
	w := *want
	w.Offset = got.Offset
	if !reflect.DeepEqual(&w, got) {
		t.Fatalf("round trip mismatch\nwant %+v\n got %+v", &w, got)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	tx := sampleTx()
	got := roundTrip(t, tx)
	if got.Offset != 0 {
		t.Errorf("Offset = %d, want 0: offsets are not encoded", got.Offset)
	}
	checkEqual(t, tx, got)
	if got.CommitTime.Location() != time.UTC {
		t.Errorf("CommitTime location = %v, want UTC", got.CommitTime.Location())
	}
	// nil vs empty images survive.
	if got.Changes[0].Old != nil || got.Changes[2].New == nil || len(got.Changes[2].New) != 0 {
		t.Errorf("nil/empty images not preserved: %#v %#v", got.Changes[0].Old, got.Changes[2].New)
	}
	// Changes of the same relation share one decoded Columns slice.
	if &got.Changes[0].Columns[0] != &got.Changes[1].Columns[0] {
		t.Errorf("columns of one relation decoded twice")
	}
}

func TestRecordRoundTripEdges(t *testing.T) {
	cases := map[string]*pgq.Transaction{
		"zero":  {CommitTime: time.UnixMicro(0).UTC()},
		"empty": {Xid: 1, CommitLSN: 1, EndLSN: 2, CommitTime: time.Unix(1, 0).UTC(), Final: true, Changes: []pgq.Change{}},
		"max": {Xid: ^uint32(0), CommitLSN: ^pgq.LSN(0), EndLSN: ^pgq.LSN(0), Part: ^uint32(0),
			CommitTime: time.UnixMicro(-1 << 62).UTC()},
		"zero-cols":     {CommitTime: time.UnixMicro(5).UTC(), Changes: []pgq.Change{{Op: pgq.OpInsert, New: []pgq.Value{}}}},
		"negative-time": {CommitTime: time.UnixMicro(-17).UTC()},
	}
	for name, tx := range cases {
		t.Run(name, func(t *testing.T) {
			got := roundTrip(t, tx)
			if name == "empty" {
				// An empty Changes slice decodes as nil.
				tx.Changes = nil
			}
			checkEqual(t, tx, got)
		})
	}
	// The zero time.Time survives as an equal instant.
	got := roundTrip(t, &pgq.Transaction{})
	if !got.CommitTime.Equal(time.Time{}) {
		t.Errorf("zero time decoded as %v", got.CommitTime)
	}
}

func TestRecordRelationTable(t *testing.T) {
	tx := &pgq.Transaction{CommitTime: time.Unix(0, 0).UTC(), Final: true}
	for i := range 1000 {
		tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: testCols,
			New: []pgq.Value{text(fmt.Sprint(i)), text("name"), {Kind: pgq.ValueNull}, text("x")}})
	}
	rec := Append(nil, tx)
	if n := bytes.Count(rec, []byte("payload")); n != 1 {
		t.Errorf("column name stored %d times, want once", n)
	}
	// pgoutput sends 'I' + relid(4) + 'N' + ncols(2) and per column a kind
	// byte + int32 length (+ data); 'n' has no length.
	pgoutput := 0
	for _, c := range tx.Changes {
		pgoutput += 8
		for _, v := range c.New {
			pgoutput++
			if v.Kind == pgq.ValueText {
				pgoutput += 4 + len(v.Data)
			}
		}
	}
	t.Logf("1000 inserts: %d journal bytes (%.1f/change), pgoutput %d (%.1f/change)",
		len(rec), float64(len(rec))/1000, pgoutput, float64(pgoutput)/1000)
	if len(rec) > pgoutput {
		t.Errorf("record %d bytes is larger than pgoutput's %d", len(rec), pgoutput)
	}
}

func TestRecordErrors(t *testing.T) {
	rec := Append(nil, sampleTx())
	var tx pgq.Transaction

	bad := append([]byte(nil), rec...)
	bad[0] = 2
	if err := Decode(bad, &tx); !errors.Is(err, ErrBadVersion) {
		t.Errorf("version 2: %v, want ErrBadVersion", err)
	}
	bad = append([]byte(nil), rec...)
	bad[len(bad)/2] ^= 0x10
	if err := Decode(bad, &tx); !errors.Is(err, ErrChecksum) {
		t.Errorf("flipped byte: %v, want ErrChecksum", err)
	}
	for _, n := range []int{0, 1, 4} {
		if err := Decode(rec[:n], &tx); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%d bytes: %v, want ErrCorruptRecord", n, err)
		}
	}
	// Every truncation fails cleanly (checksum), and a re-checksummed
	// truncated body fails as corrupt, never panics.
	for n := HeaderSize; n < len(rec); n += 1 + n/50 {
		if err := Decode(rec[:n], &tx); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
		if err := Decode(reframe(rec[HeaderSize:n]), &tx); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("reframed body truncated to %d bytes: %v, want ErrCorruptRecord", n, err)
		}
	}
	// Trailing bytes after the body.
	if err := Decode(reframe(append(append([]byte(nil), rec[HeaderSize:]...), 0xc0)), &tx); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("trailing byte: %v, want ErrCorruptRecord", err)
	}
	// tx is left untouched on error.
	tx = pgq.Transaction{Xid: 7}
	_ = Decode(rec[:10], &tx)
	if tx.Xid != 7 {
		t.Errorf("tx modified on error")
	}
	if err := Check(rec); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// reframe wraps an arbitrary body in a valid header.
func reframe(body []byte) []byte {
	out := []byte{Version, 0, 0, 0, 0}
	out = append(out, body...)
	c := crc32Checksum(body)
	out[1], out[2], out[3], out[4] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
	return out
}

// TestBodyIsPlainMsgpack: a generic msgpack decoder reads a record body.
func TestBodyIsPlainMsgpack(t *testing.T) {
	rec := Append(nil, sampleTx())
	var generic []any
	if err := msgpack.Unmarshal(rec[HeaderSize:], &generic); err != nil || len(generic) != 9 {
		t.Fatalf("generic decode: %v, %d elements", err, len(generic))
	}
}

func TestPeekRecord(t *testing.T) {
	tx := sampleTx()
	rec := Append(nil, tx)
	ri, err := Peek(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Xid: tx.Xid, CommitLSN: tx.CommitLSN, EndLSN: tx.EndLSN, CommitTime: tx.CommitTime, Part: tx.Part, Final: tx.Final}
	if ri != want {
		t.Errorf("Peek = %+v, want %+v", ri, want)
	}
	nonFinal := &pgq.Transaction{Part: 7, CommitTime: time.UnixMicro(-5).UTC()}
	if ri, err := Peek(Append(nil, nonFinal)); err != nil || ri.Part != 7 || ri.Final || !ri.CommitTime.Equal(nonFinal.CommitTime) {
		t.Errorf("non-final part: %+v, %v", ri, err)
	}
	bad := append([]byte(nil), rec...)
	bad[len(bad)-1] ^= 1
	if _, err := Peek(bad); !errors.Is(err, ErrChecksum) {
		t.Errorf("flipped byte: %v, want ErrChecksum", err)
	}
	if _, err := Peek(reframe([]byte{0x93, 1, 2, 3})); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("short record array: %v, want ErrCorruptRecord", err)
	}
	if _, err := Peek(reframe(rec[HeaderSize : HeaderSize+6])); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("truncated header: %v, want ErrCorruptRecord", err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = Peek(rec) }); allocs > 0 {
		t.Errorf("Peek: %.1f allocs, want 0", allocs)
	}
}

func TestDecodeRecordBody(t *testing.T) {
	tx := sampleTx()
	rec := Append(nil, tx)
	body := rec[HeaderSize:]
	got := pgq.Transaction{Offset: 9}
	if err := DecodeBody(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Offset != 9 {
		t.Errorf("Offset = %d, want 9 (kept)", got.Offset)
	}
	checkEqual(t, tx, &got)
	// The values alias body.
	i := bytes.Index(body, []byte("odd kind"))
	if &got.Changes[4].New[1].Data[0] != &body[i] {
		t.Errorf("values do not alias the body")
	}
	if err := DecodeBody(append(append([]byte(nil), body...), 0xc0), &got); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("trailing byte: %v, want ErrCorruptRecord", err)
	}
	if err := DecodeBody(body[:len(body)-1], &got); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("truncated: %v, want ErrCorruptRecord", err)
	}
}

func TestBodyDecoder(t *testing.T) {
	var bd BodyDecoder
	tx := sampleTx()
	body := Append(nil, tx)[HeaderSize:]
	var a, b pgq.Transaction
	if err := bd.Decode(body, &a); err != nil {
		t.Fatal(err)
	}
	if err := bd.Decode(body, &b); err != nil {
		t.Fatal(err)
	}
	checkEqual(t, tx, &a)
	checkEqual(t, tx, &b)
	if &a.Changes[0].Columns[0] != &b.Changes[0].Columns[0] {
		t.Errorf("the relation was decoded twice")
	}
	// A relation differing in one column type is another relation.
	other := sampleTx()
	other.Changes[0].Columns = append([]pgq.Column(nil), testCols...)
	other.Changes[0].Columns[1].TypeOID = 1043
	var c pgq.Transaction
	if err := bd.Decode(Append(nil, other)[HeaderSize:], &c); err != nil {
		t.Fatal(err)
	}
	checkEqual(t, other, &c)
	// Past the cache limit, decoding stays right.
	for i := range maxCachedRelations + 10 {
		x := &pgq.Transaction{CommitTime: time.UnixMicro(0).UTC(), Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "s", Table: fmt.Sprint("t", i), Columns: testCols[:1], New: []pgq.Value{text("1")}}}}
		var got pgq.Transaction
		if err := bd.Decode(Append(nil, x)[HeaderSize:], &got); err != nil {
			t.Fatal(err)
		}
		checkEqual(t, x, &got)
	}
	if len(bd.rels) > maxCachedRelations {
		t.Errorf("%d cached relations", len(bd.rels))
	}
	// Corrupt relation tables fail as with DecodeBody.
	for n := 1; n < len(body); n += 1 + n/40 {
		if err := bd.Decode(body[:n], &c); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
}

func TestRecordEncodeAllocs(t *testing.T) {
	tx := sampleTx()
	buf := Append(nil, tx)
	allocs := testing.AllocsPerRun(100, func() { buf = Append(buf[:0], tx) })
	if allocs > 0 {
		t.Errorf("Append: %.1f allocs, want 0", allocs)
	}
}

func FuzzRecord(f *testing.F) {
	// Seeds stay small: the fuzzer minimizes slowly on large inputs.
	small := sampleTx()
	small.Changes[4].New = small.Changes[4].New[:2]
	f.Add(Append(nil, small))
	f.Add(Append(nil, &pgq.Transaction{}))
	f.Add(Append(nil, benchTx(3)))
	f.Add(Append(nil, typmodTx()))
	f.Add(Append(nil, typeNameTx()))
	f.Add([]byte{})
	// Every record of the golden journal (tidwall/wal entries: uvarint
	// length + payload).
	segs, _ := filepath.Glob(filepath.Join("..", "testdata", "journal", "v1", "0*"))
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			f.Fatal(err)
		}
		for len(data) > 0 {
			n, k := binary.Uvarint(data)
			if k <= 0 || n > uint64(len(data)-k) {
				f.Fatalf("%s: bad entry", seg)
			}
			f.Add(data[k : k+int(n)])
			data = data[k+int(n):]
		}
	}
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Add(reframe([]byte{0x99, 0, 0, 0, 0, 0xa0, 0, 0xc2, 0x90, 0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var tx pgq.Transaction
		// Arbitrary bytes, framed as found and re-framed so that the body
		// decoder sees them past the checksum.
		_ = Decode(data, &tx)
		if len(data) >= HeaderSize {
			data = reframe(data[HeaderSize:])
		}
		if err := Decode(data, &tx); err != nil {
			if !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrBadVersion) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		// Whatever decodes must re-encode to something that decodes equal.
		rec := Append(nil, &tx)
		var again pgq.Transaction
		if err := Decode(rec, &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(&tx), normalize(&again)) {
			t.Fatalf("round trip mismatch\n%+v\n%+v", tx, again)
		}
	})
}

// normalize drops what the encoding does not carry for an op, so that a
// decoded-then-reencoded transaction compares equal.
func normalize(tx *pgq.Transaction) *pgq.Transaction {
	out := *tx
	out.Changes = nil
	for _, c := range tx.Changes {
		if c.Op != pgq.OpInsert && c.Op != pgq.OpUpdate && c.Op != pgq.OpDelete && c.Op != pgq.OpTruncate && c.Op != pgq.OpMessage {
			c.Op = pgq.OpInsert + 100 // any row-layout op
		}
		for _, vs := range [][]pgq.Value{c.New, c.Old} {
			for i := range vs {
				if vs[i].Kind == pgq.ValueNull || vs[i].Kind == pgq.ValueUnchangedTOAST {
					vs[i].Data = nil
				}
			}
		}
		out.Changes = append(out.Changes, c)
	}
	return &out
}

func benchTx(n int) *pgq.Transaction {
	tx := &pgq.Transaction{Xid: 1234, CommitLSN: 1 << 33, EndLSN: 1<<33 + 500, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true}
	for i := range n {
		tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "accounts", Columns: testCols,
			New: []pgq.Value{text(fmt.Sprint(i)), text("some name"), {Kind: pgq.ValueBinary, Data: []byte("0123456789")}, {Kind: pgq.ValueNull}},
			Old: []pgq.Value{text(fmt.Sprint(i)), {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}}, OldKind: pgq.OldKey})
	}
	return tx
}

func BenchmarkRecordEncode(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			tx := benchTx(n)
			buf := Append(nil, tx)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = Append(buf[:0], tx)
			}
		})
	}
}

func BenchmarkRecordDecode(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			rec := Append(nil, benchTx(n))
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			var tx pgq.Transaction
			for b.Loop() {
				if err := Decode(rec, &tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func crc32Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func TestRestampRecord(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}
	chunk := &pgq.Transaction{Xid: 77, Changes: []pgq.Change{
		{Op: pgq.OpInsert, Schema: "s", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueNull}}},
		{Op: pgq.OpDelete, Schema: "s", Table: "t", Columns: cols, OldKind: pgq.OldKey, Old: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("2")}, {Kind: pgq.ValueNull}}},
		{Op: pgq.OpMessage, Prefix: "p", Content: []byte{0, 1}, Transactional: true},
	}}
	rec := Append(nil, chunk)
	hdr := &pgq.Transaction{Xid: 9, CommitLSN: 0x10, EndLSN: 0x20, CommitTime: time.UnixMicro(1_700_000_000_123_456).UTC(), Origin: "o", Part: 3, Final: true}
	out, n, err := Restamp([]byte("keep"), rec, hdr)
	if err != nil || n != 3 || string(out[:4]) != "keep" {
		t.Fatalf("Restamp: n %d err %v", n, err)
	}
	var got pgq.Transaction
	if err := Decode(out[4:], &got); err != nil {
		t.Fatal(err)
	}
	want := *hdr
	want.Changes = chunk.Changes
	if string(Append(nil, &got)) != string(Append(nil, &want)) || string(out[4:]) != string(Append(nil, &want)) {
		t.Fatalf("restamped record differs from encoding the transaction:\n got %+v\nwant %+v", got, want)
	}
	rec[len(rec)-1] ^= 1
	if _, _, err := Restamp(nil, rec, hdr); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt input: %v, want ErrChecksum", err)
	}
}

// TestRestampInPlace: a record encoded with headroom gets its header in
// place, byte for byte what encoding the restamped transaction gives
// (and Restamp), for headers of every size up to the longest origin
// name; one that does not fit is refused and leaves the buffer as it was.
func TestRestampInPlace(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 25}}
	chunk := &pgq.Transaction{Final: true, Backfill: "bf7", Changes: []pgq.Change{
		{Op: pgq.OpRead, Schema: "s", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueNull}}},
		{Op: pgq.OpRead, Schema: "s", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("2")}, {Kind: pgq.ValueText, Data: []byte("two")}}},
	}}
	for _, hdr := range []*pgq.Transaction{
		{Final: true},
		{Xid: 9, CommitLSN: 0x10, EndLSN: 0x20, CommitTime: time.UnixMicro(1_700_000_000_123_456).UTC(), Origin: "o", Final: true},
		{Xid: math.MaxUint32, CommitLSN: math.MaxUint64 - 1, EndLSN: math.MaxUint64, CommitTime: time.UnixMicro(math.MaxInt64).UTC(),
			Origin: strings.Repeat("n", 63), Part: math.MaxUint32, Final: true},
	} {
		buf := AppendRestampable([]byte("keep"), chunk)[4:]
		out, n, err := RestampInPlace(buf, hdr)
		if err != nil || n != 2 {
			t.Fatalf("RestampInPlace(%+v): n %d err %v", hdr, n, err)
		}
		if &out[len(out)-1] != &buf[len(buf)-1] {
			t.Fatal("RestampInPlace moved the changes")
		}
		want := *hdr
		want.Changes, want.Backfill = chunk.Changes, chunk.Backfill
		if string(out) != string(Append(nil, &want)) {
			t.Fatalf("restamped in place differs from encoding %+v", want)
		}
		if copied, _, err := Restamp(nil, Append(nil, chunk), hdr); err != nil || string(copied) != string(out) {
			t.Fatalf("Restamp gives other bytes (err %v)", err)
		}
		var got pgq.Transaction
		if err := Decode(out, &got); err != nil || got.Xid != hdr.Xid || got.EndLSN != hdr.EndLSN || got.Origin != hdr.Origin || got.Backfill != "bf7" || len(got.Changes) != 2 {
			t.Fatalf("decoded %+v, err %v", got, err)
		}
	}
	buf := AppendRestampable(nil, chunk)
	before := string(buf)
	if _, _, err := RestampInPlace(buf, &pgq.Transaction{Origin: strings.Repeat("x", 2*Headroom)}); !errors.Is(err, ErrNoHeadroom) || string(buf) != before {
		t.Fatalf("a header larger than the headroom: err %v, buffer changed %v", err, string(buf) != before)
	}
	if _, _, err := RestampInPlace(buf[:Headroom+3], &pgq.Transaction{}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("a cut record: err %v, want ErrCorruptRecord", err)
	}
}

// TestReadsEncoder: rows encoded as they come give AppendRestampable's
// bytes for the same read changes (and restamp in place like them), for
// no row, one, and more than an array's short form (16) and than a
// 16-bit count, with and without a backfill id, with NULLs and wide
// values.
func TestReadsEncoder(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "note", TypeOID: 25}, {Name: "n", TypeOID: 1700}}
	for _, rows := range []int{0, 1, 15, 16, 70000} {
		for _, backfill := range []string{"", "bf12"} {
			tx := &pgq.Transaction{Final: true, Backfill: backfill}
			e := NewReadsEncoder(make([]byte, 0, 64), "public", "orders", cols)
			for i := range rows {
				row := []pgq.Value{{Kind: pgq.ValueText, Data: []byte(fmt.Sprint(i))}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueText, Data: bytes.Repeat([]byte("x"), i%300)}}
				e.Add(row)
				tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpRead, Schema: "public", Table: "orders", Columns: cols, New: row})
			}
			if e.Len() != rows {
				t.Fatalf("Len %d, want %d", e.Len(), rows)
			}
			got, want := e.Finish(backfill), AppendRestampable(nil, tx)
			if !bytes.Equal(got[Headroom:], want[Headroom:]) {
				t.Fatalf("%d rows, backfill %q: the encoder's record differs from Append's", rows, backfill)
			}
			// The storage serves the next record (smaller or larger).
			e2 := NewReadsEncoder(e.Storage(), "public", "orders", cols)
			for i := range tx.Changes {
				e2.Add(tx.Changes[i].New)
			}
			if again := e2.Finish(backfill); !bytes.Equal(again[Headroom:], want[Headroom:]) {
				t.Fatalf("%d rows: the record encoded in reused storage differs", rows)
			}
			got = AppendRestampable(nil, tx) // e2 reused got's storage
			hdr := &pgq.Transaction{Xid: 5, CommitLSN: 100, EndLSN: 180, CommitTime: time.UnixMicro(1_800_000_000_000_000).UTC(), Final: true}
			a, na, erra := RestampInPlace(got, hdr)
			b, nb, errb := RestampInPlace(want, hdr)
			if erra != nil || errb != nil || na != rows || nb != rows || !bytes.Equal(a, b) {
				t.Fatalf("%d rows: restamped differently (%v, %v)", rows, erra, errb)
			}
		}
	}
}
