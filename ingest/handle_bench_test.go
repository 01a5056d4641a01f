package ingest

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
)

// xlogData frames a pgoutput payload as the CopyData of an XLogData
// message at lsn.
func xlogData(lsn pgq.LSN, payload []byte) []byte {
	b := []byte{'w'}
	b = binary.BigEndian.AppendUint64(b, uint64(lsn))
	b = binary.BigEndian.AppendUint64(b, uint64(lsn))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, payload...)
}

// smallTxMessages is one transaction as the benchmark's pgbench script
// writes it: Begin, two inserts, an update, Commit, at LSNs from lsn on.
func smallTxMessages(xid uint32, lsn pgq.LSN) [][]byte {
	be := binary.BigEndian
	pgTime := uint64(time.Since(pgq.PGEpoch).Microseconds())
	tuple := func(b []byte, vals ...string) []byte {
		b = be.AppendUint16(b, uint16(len(vals)))
		for _, v := range vals {
			b = append(b, 't')
			b = be.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
		return b
	}
	begin := be.AppendUint32(be.AppendUint64(be.AppendUint64([]byte{'B'}, uint64(lsn+400)), pgTime), xid)
	ins := tuple(append(be.AppendUint32([]byte{'I'}, 1), 'N'), "1234567", "42", "0.42", "small transaction payload", "2026-12-03 08:00:00.123456+00")
	upd := tuple(append(be.AppendUint32([]byte{'U'}, 2), 'N'), "42", "1234")
	commit := be.AppendUint64(be.AppendUint64(be.AppendUint64([]byte{'C', 0}, uint64(lsn+400)), uint64(lsn+450)), pgTime)
	return [][]byte{
		xlogData(lsn, begin), xlogData(lsn+100, ins), xlogData(lsn+200, ins), xlogData(lsn+300, upd), xlogData(lsn+400, commit),
	}
}

// relationMessages describe relations 1 (bench_events) and 2
// (bench_accounts).
func relationMessages() [][]byte {
	be := binary.BigEndian
	rel := func(id uint32, name string, cols ...string) []byte {
		b := append(append(append(be.AppendUint32([]byte{'R'}, id), "public\x00"...), name+"\x00"...), 'd')
		b = be.AppendUint16(b, uint16(len(cols)))
		for i, c := range cols {
			flags := byte(0)
			if i == 0 {
				flags = 1
			}
			b = append(append(b, flags), c+"\x00"...)
			b = be.AppendUint32(be.AppendUint32(b, 25), 0xffffffff)
		}
		return b
	}
	return [][]byte{
		xlogData(1, rel(1, "bench_events", "id", "account", "amount", "note", "created")),
		xlogData(2, rel(2, "bench_accounts", "id", "balance")),
	}
}

// BenchmarkHandleSmallTx runs the session's handling of the messages of
// one small transaction (receive buffer → decode → assemble → Submit) per
// iteration, into a real committer and journal (fsync off: the figure is
// the session's CPU and allocations, not the disk).
func BenchmarkHandleSmallTx(b *testing.B) {
	j, err := journal.Open(journal.Options{Dir: b.TempDir(), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	c := journal.NewCommitter(j, journal.CommitterOptions{})
	in, err := New(Options{PGURL: "postgres://x", Slot: "s", Publication: "p", Journal: j, Committer: c}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	s := newSession(in, nil)
	for _, m := range relationMessages() {
		if err := s.handleCopyData(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	// The messages of 1024 transactions, built before timing.
	const batch = 1024
	lsn := pgq.LSN(1 << 20)
	var msgs [][][]byte
	for i := range batch {
		msgs = append(msgs, smallTxMessages(uint32(1000+i), lsn+pgq.LSN(i)*500))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i > 0 && i%batch == 0 {
			// Next round: the same messages at higher LSNs, so none is a
			// re-send.
			b.StopTimer()
			lsn += batch * 500
			for k := range msgs {
				msgs[k] = smallTxMessages(uint32(1000+k), lsn+pgq.LSN(k)*500)
			}
			b.StartTimer()
		}
		for _, m := range msgs[i%batch] {
			if err := s.handleCopyData(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
	b.StopTimer()
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if j.LastEndLSN() == 0 {
		b.Fatal("nothing journaled")
	}
}
