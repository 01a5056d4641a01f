package pgoutput

import (
	"encoding/binary"
	"errors"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// msg builds a message from a tag and big-endian fields.
type msg []byte

func newMsg(tag byte) msg          { return msg{tag} }
func (m msg) u8(v uint8) msg       { return append(m, v) }
func (m msg) u16(v uint16) msg     { return binary.BigEndian.AppendUint16(m, v) }
func (m msg) u32(v uint32) msg     { return binary.BigEndian.AppendUint32(m, v) }
func (m msg) u64(v uint64) msg     { return binary.BigEndian.AppendUint64(m, v) }
func (m msg) str(s string) msg     { return append(append(m, s...), 0) }
func (m msg) text(s string) msg    { return append(m.u8('t').u32(uint32(len(s))), s...) }
func (m msg) raw(b ...byte) msg    { return append(m, b...) }
func (m msg) time(t time.Time) msg { return m.u64(uint64(t.Sub(pgq.PGEpoch).Microseconds())) }

var t0 = time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)

// relMsg describes relation 7 public.t (id int4 key, v text).
func relMsg() msg {
	return newMsg('R').u32(7).str("public").str("t").u8('d').u16(2).
		u8(1).str("id").u32(23).u32(0xffffffff).
		u8(0).str("v").u32(25).u32(0xffffffff)
}

func mustDecode(t *testing.T, d *Decoder, b []byte) Message {
	t.Helper()
	m, err := d.Decode(b)
	if err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return m
}

func TestDecodeSynthetic(t *testing.T) {
	d := NewDecoder()
	b := mustDecode(t, d, newMsg('B').u64(0x1_0000_0010).time(t0).u32(42)).(*Begin)
	if b.FinalLSN != 0x1_0000_0010 || !b.CommitTime.Equal(t0) || b.CommitTime.Location() != time.UTC || b.Xid != 42 {
		t.Errorf("begin %+v", b)
	}
	c := mustDecode(t, d, newMsg('C').u8(0).u64(10).u64(20).time(t0)).(*Commit)
	if c.CommitLSN != 10 || c.EndLSN != 20 || !c.CommitTime.Equal(t0) {
		t.Errorf("commit %+v", c)
	}
	rel := mustDecode(t, d, relMsg()).(*Relation)
	if got, ok := d.Relation(7); !ok || got != rel || len(rel.Columns) != 2 || !rel.Columns[0].Key || rel.Columns[1].Key || rel.Columns[1].TypeOID != 25 {
		t.Errorf("relation %+v", rel)
	}
	if rel.Columns[0].Typmod() != -1 || rel.Columns[1].Typmod() != -1 || rel.Columns[0].TypmodPlus1 != 0 {
		t.Errorf("relation without type modifiers %+v", rel.Columns)
	}
	ins := mustDecode(t, d, newMsg('I').u32(7).u8('N').u16(2).text("1").u8('n')).(*Row)
	if ins.Change.Op != pgq.OpInsert || ins.Change.Table != "t" || string(ins.Change.New[0].Data) != "1" ||
		ins.Change.New[1].Kind != pgq.ValueNull || &ins.Change.Columns[0] != &rel.Columns[0] {
		t.Errorf("insert %+v", ins)
	}
	up := mustDecode(t, d, newMsg('U').u32(7).u8('O').u16(2).text("1").text("a").u8('N').u16(2).text("1").u8('u')).(*Row)
	if up.Change.OldKind != pgq.OldFull || string(up.Change.Old[1].Data) != "a" || up.Change.New[1].Kind != pgq.ValueUnchangedTOAST {
		t.Errorf("update %+v", up)
	}
	bin := mustDecode(t, d, newMsg('I').u32(7).u8('N').u16(2).u8('b').u32(4).raw(0, 0, 0, 1).u8('n')).(*Row)
	if v := bin.Change.New[0]; v.Kind != pgq.ValueBinary || string(v.Data) != "\x00\x00\x00\x01" {
		t.Errorf("binary value %+v", v)
	}

	// Streaming: leading xid inside a stream only.
	ss := mustDecode(t, d, newMsg('S').u32(99).u8(1)).(*StreamStart)
	if ss.Xid != 99 || !ss.First || !d.InStream() {
		t.Errorf("stream start %+v", ss)
	}
	sr := mustDecode(t, d, newMsg('D').u32(100).u32(7).u8('K').u16(2).text("1").u8('n')).(*Row)
	if sr.Xid != 100 || sr.Change.OldKind != pgq.OldKey || sr.Change.New != nil {
		t.Errorf("streamed delete %+v", sr)
	}
	sm := mustDecode(t, d, newMsg('M').u32(100).u8(1).u64(77).str("p").u32(2).raw('h', 'i')).(*Row)
	if sm.Xid != 100 || sm.MessageLSN != 77 || !sm.Change.Transactional || string(sm.Change.Content) != "hi" || sm.Change.Prefix != "p" {
		t.Errorf("streamed message %+v", sm)
	}
	st := mustDecode(t, d, newMsg('T').u32(100).u32(1).u8(3).u32(7)).(*Row)
	if st.Xid != 100 || !st.Change.Cascade || !st.Change.RestartIdentity || len(st.Change.Tables) != 1 || st.Change.Tables[0] != "public.t" {
		t.Errorf("streamed truncate %+v", st)
	}
	mustDecode(t, d, newMsg('E'))
	if d.InStream() {
		t.Error("still in stream after stop")
	}
	sc := mustDecode(t, d, newMsg('c').u32(99).u8(0).u64(30).u64(40).time(t0)).(*StreamCommit)
	if sc.Xid != 99 || sc.CommitLSN != 30 || sc.EndLSN != 40 || !sc.CommitTime.Equal(t0) {
		t.Errorf("stream commit %+v", sc)
	}
	sa := mustDecode(t, d, newMsg('A').u32(99).u32(101)).(*StreamAbort)
	if sa.Xid != 99 || sa.SubXid != 101 || sa.AbortLSN != 0 || !sa.AbortTime.IsZero() {
		t.Errorf("stream abort v2 %+v", sa)
	}
	sa4 := mustDecode(t, d, newMsg('A').u32(99).u32(101).u64(55).time(t0)).(*StreamAbort)
	if sa4.AbortLSN != 55 || !sa4.AbortTime.Equal(t0) {
		t.Errorf("stream abort v4 %+v", sa4)
	}
	o := mustDecode(t, d, newMsg('O').u64(5).str("up")).(*Origin)
	if o.CommitLSN != 5 || o.Name != "up" {
		t.Errorf("origin %+v", o)
	}
	ty := mustDecode(t, d, newMsg('Y').u32(9).str("public").str("mood")).(*TypeMsg)
	if ty.ID != 9 || ty.Name != "mood" || ty.Xid != 0 {
		t.Errorf("type %+v", ty)
	}
}

func TestDecodeErrors(t *testing.T) {
	d := NewDecoder()
	mustDecode(t, d, relMsg())
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrUnknownMessage},
		{"unknown tag", []byte("X"), ErrUnknownMessage},
		{"two-phase begin", newMsg('b'), ErrUnknownMessage},
		{"short begin", newMsg('B').u64(1), ErrTruncated},
		{"short commit", newMsg('C').u8(0).u64(1).u64(2), ErrTruncated},
		{"origin no NUL", newMsg('O').u64(1).raw('a'), ErrTruncated},
		{"unknown relation", newMsg('I').u32(8).u8('N').u16(0), ErrUnknownRelation},
		{"unknown relation in truncate", newMsg('T').u32(2).u8(0).u32(7).u32(8), ErrUnknownRelation},
		{"column count", newMsg('I').u32(7).u8('N').u16(1).text("1"), ErrMalformed},
		{"bad kind", newMsg('I').u32(7).u8('N').u16(2).u8('x').u8('n'), ErrMalformed},
		{"bad marker", newMsg('I').u32(7).u8('K').u16(2).u8('n').u8('n'), ErrMalformed},
		{"update bad marker", newMsg('U').u32(7).u8('Z'), ErrMalformed},
		{"update old without new", newMsg('U').u32(7).u8('K').u16(2).u8('n').u8('n'), ErrTruncated},
		{"delete with new", newMsg('D').u32(7).u8('N').u16(2).u8('n').u8('n'), ErrMalformed},
		{"negative length", newMsg('I').u32(7).u8('N').u16(2).u8('t').u32(0xffffffff).u8('n'), ErrMalformed},
		{"long length", newMsg('I').u32(7).u8('N').u16(2).u8('t').u32(1 << 30).u8('n'), ErrTruncated},
		{"huge column count", newMsg('R').u32(8).str("s").str("t").u8('d').u16(0xffff), ErrTruncated},
		{"huge truncate", newMsg('T').u32(0xffffffff).u8(0), ErrTruncated},
		{"negative content", newMsg('M').u8(0).u64(1).str("p").u32(0xffffffff), ErrMalformed},
		{"stop outside stream", newMsg('E'), ErrMalformed},
		{"short stream abort", newMsg('A').u32(1), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := d.Decode(tc.in)
			if !errors.Is(err, tc.want) || m != nil {
				t.Fatalf("got %v, %v; want %v", m, err, tc.want)
			}
			if len(err.Error()) < len("pgoutput: ") || err.Error()[:10] != "pgoutput: " {
				t.Errorf("error %q lacks context", err)
			}
		})
	}
	mustDecode(t, d, newMsg('S').u32(1).u8(1))
	if _, err := d.Decode(newMsg('S').u32(1).u8(0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("nested stream start: %v", err)
	}
	// A failed relation does not replace the cached one.
	if _, err := d.Decode(newMsg('R').u32(1).u32(7).str("x")); err == nil {
		t.Fatal("truncated relation decoded")
	}
	if r, _ := d.Relation(7); r.Name != "t" {
		t.Errorf("failed relation replaced cache entry: %+v", r)
	}
}

// TestTruncatedCaptures feeds every strict prefix of every captured
// message, in stream order, and expects an error without a state change.
func TestTruncatedCaptures(t *testing.T) {
	for _, cp := range captures {
		t.Run(cp.name, func(t *testing.T) {
			msgs, err := readCapture(capturePath(cp.name))
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder()
			for i, raw := range msgs {
				rels, in := maps.Clone(d.rels), d.inStream
				step := 1
				if len(raw) > 512 {
					step = 7
				}
				for n := 0; n < len(raw); n += step {
					if m, err := d.Decode(raw[:n]); err == nil {
						t.Fatalf("message %d (%q) truncated to %d/%d decoded: %+v", i, raw[0], n, len(raw), m)
					}
					if !maps.Equal(rels, d.rels) || in != d.inStream {
						t.Fatalf("message %d truncated to %d changed decoder state", i, n)
					}
				}
				if _, err := d.Decode(raw); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
		})
	}
}

// captureSeeds returns the decoder state before each captured message and
// the message, for seeding fuzzing and benchmarks.
func captureSeeds(tb testing.TB) (rels map[uint32]*Relation, seeds []seed) {
	tb.Helper()
	rels = map[uint32]*Relation{}
	for _, cp := range captures {
		msgs, err := readCapture(capturePath(cp.name))
		if err != nil {
			tb.Fatal(err)
		}
		d := NewDecoder()
		for _, raw := range msgs {
			seeds = append(seeds, seed{d.inStream, raw})
			if _, err := d.Decode(raw); err != nil {
				tb.Fatal(err)
			}
		}
		maps.Copy(rels, d.rels)
	}
	return rels, seeds
}

type seed struct {
	inStream bool
	data     []byte
}

// fixedLen is the exact length of the fixed-size messages.
var fixedLen = map[byte]int{'B': 21, 'C': 26, 'S': 6, 'E': 1, 'c': 30}

func FuzzDecode(f *testing.F) {
	rels, seeds := captureSeeds(f)
	seen := map[string]bool{}
	add := func(in bool, b []byte) {
		k := string(b)
		if in {
			k = "S" + k
		}
		if !seen[k] {
			seen[k] = true
			f.Add(in, b)
		}
	}
	// The captures repeat near-identical rows: keep a few messages per
	// kind and size so the baseline corpus stays quick to run.
	perKind := map[[3]int]int{}
	for _, s := range seeds {
		k := [3]int{int(s.data[0]), len(s.data) / 64, 0}
		if s.inStream {
			k[2] = 1
		}
		if perKind[k]++; perKind[k] > 3 || len(s.data) > 4096 {
			continue
		}
		add(s.inStream, s.data)
		for _, n := range []int{0, 1, len(s.data) / 2, len(s.data) - 1} {
			if n >= 0 && n < len(s.data) {
				add(s.inStream, s.data[:n])
			}
		}
	}
	f.Fuzz(func(t *testing.T, inStream bool, data []byte) {
		d := &Decoder{rels: maps.Clone(rels), inStream: inStream}
		m, err := d.Decode(data)
		if (m == nil) == (err == nil) {
			t.Fatalf("message %v with error %v", m, err)
		}
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrUnknownMessage) &&
				!errors.Is(err, ErrUnknownRelation) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		tag := data[0]
		if n, ok := fixedLen[tag]; ok && len(data) < n {
			t.Fatalf("%q of %d bytes (< %d) decoded", tag, len(data), n)
		}
		if tag == 'A' && len(data) < 9 {
			t.Fatalf("stream abort of %d bytes decoded", len(data))
		}
		if r, ok := m.(*Row); ok {
			c := &r.Change
			if c.New != nil && len(c.New) != len(c.Columns) || c.Old != nil && len(c.Old) != len(c.Columns) {
				t.Fatalf("tuple/column mismatch: %+v", c)
			}
			_ = format.AppendChangeJSON(nil, c)
		}
		_ = appendRender(nil, m)
	})
}

func BenchmarkDecodeInsert(b *testing.B) {
	rels, seeds := captureSeeds(b)
	var in []byte
	for _, s := range seeds {
		if !s.inStream && len(s.data) > 0 && s.data[0] == 'I' {
			in = s.data // the first insert: the 15-column t_all row
			break
		}
	}
	for _, reuse := range []bool{false, true} {
		b.Run(map[bool]string{false: "fresh", true: "reuse"}[reuse], func(b *testing.B) {
			d := &Decoder{rels: rels, Reuse: reuse}
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := d.Decode(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeReuse decodes every captured message with and without Reuse:
// the messages are equal, and the changes a caller copied out of reused
// rows keep their values after later decodes (tuples never share memory).
func TestDecodeReuse(t *testing.T) {
	for _, cp := range captures {
		msgs, err := readCapture(capturePath(cp.name))
		if err != nil {
			t.Fatal(err)
		}
		fresh, reuse := NewDecoder(), NewDecoder()
		reuse.Reuse = true
		var kept, want []pgq.Change
		rows := 0
		for i, raw := range msgs {
			a, err := fresh.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			b, err := reuse.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s message %d: reused %+v, fresh %+v", cp.name, i, b, a)
			}
			if r, ok := b.(*Row); ok {
				rows++
				kept = append(kept, r.Change)
				want = append(want, a.(*Row).Change)
				// Appending to a kept tuple must not reach the next one.
				if cap(r.Change.New) != len(r.Change.New) || cap(r.Change.Old) != len(r.Change.Old) {
					t.Fatalf("%s message %d: tuple capacity beyond its length", cp.name, i)
				}
			}
		}
		if rows == 0 {
			t.Fatalf("%s: no rows", cp.name)
		}
		if !reflect.DeepEqual(kept, want) {
			t.Fatalf("%s: changes copied out of reused rows changed after later decodes", cp.name)
		}
	}
	// Begin and Commit are reused too.
	d := &Decoder{Reuse: true}
	b1 := mustDecode(t, d, newMsg('B').u64(1).time(t0).u32(1))
	b2 := mustDecode(t, d, newMsg('B').u64(2).time(t0).u32(2))
	if b1 != b2 || b2.(*Begin).Xid != 2 {
		t.Errorf("begin not reused: %p %p %+v", b1, b2, b2)
	}
}

// TestDecodeTypmod: the Relation message's atttypmod is kept per column:
// numeric(10,3) is ((10<<16)|3)+4, timestamp(3) is 3, timestamp(0) is 0.
func TestDecodeTypmod(t *testing.T) {
	d := NewDecoder()
	rel := mustDecode(t, d, newMsg('R').u32(8).str("public").str("m").u8('d').u16(4).
		u8(1).str("id").u32(23).u32(0xffffffff).
		u8(0).str("amount").u32(1700).u32(10<<16|3+4).
		u8(0).str("at").u32(1114).u32(3).
		u8(0).str("at0").u32(1114).u32(0)).(*Relation)
	for i, want := range []int32{-1, 10<<16 | 3 + 4, 3, 0} {
		if got := rel.Columns[i].Typmod(); got != want {
			t.Errorf("column %s: typmod %d, want %d", rel.Columns[i].Name, got, want)
		}
	}
}
