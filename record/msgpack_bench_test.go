package record

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/pgq-dev/pgq"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file keeps the choice of a hand-written codec justified (issue 10):
// the same record body encoded and decoded with vmihailenco/msgpack's
// Encoder and Decoder, element by element, so both sides produce and read
// the identical bytes (TestLibraryCodecSameBytes) and the benchmarks
// compare only the codec:
//
//	go test -run '^$' -bench 'Record(Encode|Decode)' -benchmem ./record

// libEncodeBody writes tx's record body (no version or checksum) with the
// library's Encoder, in Version 1's layout.
func libEncodeBody(enc *msgpack.Encoder, buf *bytes.Buffer, tx *pgq.Transaction) error {
	var rels []relRef
	last := -1
	for i := range tx.Changes {
		c := &tx.Changes[i]
		if !isRowOp(c.Op) {
			continue
		}
		if last = findRel(rels, last, c); last < 0 {
			last = len(rels)
			rels = append(rels, relRef{c.Schema, c.Table, c.Columns})
		}
	}
	e := libEnc{enc: enc, buf: buf}
	e.arr(bodyLen(tx))
	e.uint(uint64(tx.Xid))
	e.uint(uint64(tx.CommitLSN))
	e.uint(uint64(tx.EndLSN))
	e.int(tx.CommitTime.UnixMicro())
	e.str(tx.Origin)
	e.uint(uint64(tx.Part))
	e.bool(tx.Final)
	e.arr(len(rels))
	for _, r := range rels {
		e.arr(3)
		e.str(r.schema)
		e.str(r.table)
		e.arr(3 * len(r.cols))
		for _, col := range r.cols {
			e.str(col.Name)
			e.uint(uint64(col.TypeOID))
			e.bool(col.Key)
		}
	}
	e.arr(len(tx.Changes))
	last = -1
	for i := range tx.Changes {
		c := &tx.Changes[i]
		switch c.Op {
		case pgq.OpTruncate:
			e.arr(3)
			e.uint(uint64(c.Op))
			e.arr(len(c.Tables))
			for _, t := range c.Tables {
				e.str(t)
			}
			var flags uint64
			if c.Cascade {
				flags |= 1
			}
			if c.RestartIdentity {
				flags |= 2
			}
			e.uint(flags)
		case pgq.OpMessage, pgq.OpDDL:
			e.arr(4)
			e.uint(uint64(c.Op))
			e.str(c.Prefix)
			e.bin(c.Content)
			e.bool(c.Transactional)
		case pgq.OpGap:
			e.arr(3)
			e.uint(uint64(c.Op))
			e.uint(uint64(c.FromLSN))
			e.uint(uint64(c.ToLSN))
		default:
			e.arr(5)
			e.uint(uint64(c.Op))
			last = findRel(rels, last, c)
			e.uint(uint64(last))
			e.uint(uint64(c.OldKind))
			e.values(c.New)
			e.values(c.Old)
		}
	}
	if tx.Backfill != "" {
		e.str(tx.Backfill)
	}
	return e.err
}

// libEnc keeps the first error of the Encoder, which writes to buf.
type libEnc struct {
	enc *msgpack.Encoder
	buf *bytes.Buffer
	err error
}

func (e *libEnc) do(err error) {
	if e.err == nil {
		e.err = err
	}
}
func (e *libEnc) arr(n int)     { e.do(e.enc.EncodeArrayLen(n)) }
func (e *libEnc) uint(v uint64) { e.do(e.enc.EncodeUint(v)) }
func (e *libEnc) int(v int64)   { e.do(e.enc.EncodeInt(v)) }
func (e *libEnc) str(s string)  { e.do(e.enc.EncodeString(s)) }
func (e *libEnc) bin(b []byte) {
	e.do(e.enc.EncodeBytesLen(len(b)))
	e.buf.Write(b)
}
func (e *libEnc) bool(v bool) { e.do(e.enc.EncodeBool(v)) }
func (e *libEnc) values(vs []pgq.Value) {
	if vs == nil {
		e.do(e.enc.EncodeNil())
		return
	}
	e.arr(len(vs))
	for _, v := range vs {
		switch v.Kind {
		case pgq.ValueNull:
			e.do(e.enc.EncodeNil())
		case pgq.ValueUnchangedTOAST:
			e.bool(false)
		case pgq.ValueText:
			e.str(unsafe.String(unsafe.SliceData(v.Data), len(v.Data)))
		case pgq.ValueBinary:
			e.bin(v.Data)
		default:
			e.arr(2)
			e.uint(uint64(v.Kind))
			e.bin(v.Data)
		}
	}
}

// libDecodeBody decodes a record body with the library's Decoder into tx,
// as record.DecodeBody does (values alias nothing: the Decoder copies).
func libDecodeBody(dec *msgpack.Decoder, tx *pgq.Transaction) error {
	*tx = pgq.Transaction{}
	nbody, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	xid, err := dec.DecodeUint32()
	if err != nil {
		return err
	}
	tx.Xid = xid
	var u uint64
	if u, err = dec.DecodeUint64(); err != nil {
		return err
	}
	tx.CommitLSN = pgq.LSN(u)
	if u, err = dec.DecodeUint64(); err != nil {
		return err
	}
	tx.EndLSN = pgq.LSN(u)
	us, err := dec.DecodeInt64()
	if err != nil {
		return err
	}
	tx.CommitTime = time.UnixMicro(us).UTC()
	if tx.Origin, err = dec.DecodeString(); err != nil {
		return err
	}
	if tx.Part, err = dec.DecodeUint32(); err != nil {
		return err
	}
	if tx.Final, err = dec.DecodeBool(); err != nil {
		return err
	}
	nrel, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	rels := make([]relRef, max(nrel, 0))
	for k := range rels {
		if _, err := dec.DecodeArrayLen(); err != nil {
			return err
		}
		if rels[k].schema, err = dec.DecodeString(); err != nil {
			return err
		}
		if rels[k].table, err = dec.DecodeString(); err != nil {
			return err
		}
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return err
		}
		cols := make([]pgq.Column, n/3)
		for i := range cols {
			if cols[i].Name, err = dec.DecodeString(); err != nil {
				return err
			}
			if cols[i].TypeOID, err = dec.DecodeUint32(); err != nil {
				return err
			}
			if cols[i].Key, err = dec.DecodeBool(); err != nil {
				return err
			}
		}
		rels[k].cols = cols
	}
	nch, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if nch > 0 {
		tx.Changes = make([]pgq.Change, nch)
	}
	for i := range tx.Changes {
		c := &tx.Changes[i]
		if _, err := dec.DecodeArrayLen(); err != nil {
			return err
		}
		op, err := dec.DecodeUint8()
		if err != nil {
			return err
		}
		c.Op = pgq.Op(op)
		switch c.Op {
		case pgq.OpTruncate:
			nt, err := dec.DecodeArrayLen()
			if err != nil {
				return err
			}
			c.Tables = make([]string, nt)
			for k := range c.Tables {
				if c.Tables[k], err = dec.DecodeString(); err != nil {
					return err
				}
			}
			flags, err := dec.DecodeUint8()
			if err != nil {
				return err
			}
			c.Cascade, c.RestartIdentity = flags&1 != 0, flags&2 != 0
		case pgq.OpMessage, pgq.OpDDL:
			if c.Prefix, err = dec.DecodeString(); err != nil {
				return err
			}
			if c.Content, err = dec.DecodeBytes(); err != nil {
				return err
			}
			if c.Transactional, err = dec.DecodeBool(); err != nil {
				return err
			}
		case pgq.OpGap:
			if u, err = dec.DecodeUint64(); err != nil {
				return err
			}
			c.FromLSN = pgq.LSN(u)
			if u, err = dec.DecodeUint64(); err != nil {
				return err
			}
			c.ToLSN = pgq.LSN(u)
		default:
			ri, err := dec.DecodeUint32()
			if err != nil {
				return err
			}
			if int(ri) >= len(rels) {
				return fmt.Errorf("relation %d of %d", ri, len(rels))
			}
			ok, err := dec.DecodeUint8()
			if err != nil {
				return err
			}
			c.OldKind = pgq.OldKind(ok)
			if c.New, err = libDecodeValues(dec); err != nil {
				return err
			}
			if c.Old, err = libDecodeValues(dec); err != nil {
				return err
			}
			r := &rels[ri]
			c.Schema, c.Table, c.Columns = r.schema, r.table, r.cols
		}
	}
	if nbody == 10 {
		if tx.Backfill, err = dec.DecodeString(); err != nil {
			return err
		}
	}
	return nil
}

func libDecodeValues(dec *msgpack.Decoder) ([]pgq.Value, error) {
	code, err := dec.PeekCode()
	if err != nil {
		return nil, err
	}
	if code == msgpcode.Nil {
		return nil, dec.DecodeNil()
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	vs := make([]pgq.Value, n)
	for i := range vs {
		code, err := dec.PeekCode()
		if err != nil {
			return nil, err
		}
		switch {
		case code == msgpcode.Nil:
			vs[i].Kind = pgq.ValueNull
			err = dec.DecodeNil()
		case code == msgpcode.False:
			vs[i].Kind = pgq.ValueUnchangedTOAST
			_, err = dec.DecodeBool()
		case msgpcode.IsString(code):
			vs[i].Kind = pgq.ValueText
			vs[i].Data, err = dec.DecodeBytes()
		case msgpcode.IsBin(code):
			vs[i].Kind = pgq.ValueBinary
			vs[i].Data, err = dec.DecodeBytes()
		default:
			if _, err = dec.DecodeArrayLen(); err != nil {
				return nil, err
			}
			var k uint8
			if k, err = dec.DecodeUint8(); err != nil {
				return nil, err
			}
			vs[i].Kind = pgq.ValueKind(k)
			vs[i].Data, err = dec.DecodeBytes()
		}
		if err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// TestLibraryCodecSameBytes: the library encoding of the benchmarks is
// byte for byte the record body, and the library decoding reads back the
// same transaction, so the benchmarks compare codecs, not layouts.
func TestLibraryCodecSameBytes(t *testing.T) {
	for name, tx := range map[string]*pgq.Transaction{"sample": sampleTx(), "bench": benchTx(3)} {
		rec := Append(nil, tx)
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		if err := libEncodeBody(enc, &buf, tx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(buf.Bytes(), rec[HeaderSize:]) {
			t.Fatalf("%s: library body differs\n lib %x\nhand %x", name, buf.Bytes(), rec[HeaderSize:])
		}
		var got, want pgq.Transaction
		if err := libDecodeBody(msgpack.NewDecoder(bytes.NewReader(rec[HeaderSize:])), &got); err != nil {
			t.Fatalf("%s: library decode: %v", name, err)
		}
		if err := Decode(rec, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: library decode\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// BenchmarkRecordEncodeLibrary is BenchmarkRecordEncode with the library's
// Encoder (body only, plus the same CRC32C).
func BenchmarkRecordEncodeLibrary(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			tx := benchTx(n)
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			b.SetBytes(int64(len(Append(nil, tx))))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				buf.Write([]byte{Version, 0, 0, 0, 0})
				if err := libEncodeBody(enc, &buf, tx); err != nil {
					b.Fatal(err)
				}
				_ = crc32Checksum(buf.Bytes()[HeaderSize:])
			}
		})
	}
}

// BenchmarkRecordDecodeLibrary is BenchmarkRecordDecode with the library's
// Decoder (the same CRC32C check first).
func BenchmarkRecordDecodeLibrary(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			rec := Append(nil, benchTx(n))
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			var tx pgq.Transaction
			r := bytes.NewReader(nil)
			dec := msgpack.NewDecoder(r)
			for b.Loop() {
				if err := Check(rec); err != nil {
					b.Fatal(err)
				}
				r.Reset(rec[HeaderSize:])
				dec.Reset(r)
				if err := libDecodeBody(dec, &tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
