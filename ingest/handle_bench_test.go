package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
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

// offlineSession is a session of an Ingester over j and c (whose Run
// it starts, until ctx ends) without a replication connection, to be fed
// messages: no status update falls due. pgURL is where it reads the key
// and base types of relations from, spillDir where it spills.
func offlineSession(ctx context.Context, tb testing.TB, c *journal.Committer, j *journal.Journal, pgURL, spillDir string) *session {
	tb.Helper()
	in, err := New(Options{PGURL: pgURL, Slot: "s", Publication: "p", Journal: j, Committer: c, SpillDir: spillDir})
	if err != nil {
		tb.Fatal(err)
	}
	go c.Run(ctx)
	s := newSession(in, nil)
	s.nextSend = time.Now().Add(time.Hour)
	s.lastSendAt = s.nextSend
	return s
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
	in, err := New(Options{PGURL: "postgres://x", Slot: "s", Publication: "p", Journal: j, Committer: c})
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

// BenchmarkHandleStreamedRows runs the session's handling of one row of a
// transaction the server streams in progress (protocol v2) per iteration:
// decode, spill (changes encoded in 128 KiB chunks and written to the spill
// file), and at the end the stream commit, which restamps the chunks into
// journal parts (fsync off).
func BenchmarkHandleStreamedRows(b *testing.B) {
	dir := b.TempDir()
	j, err := journal.Open(journal.Options{Dir: dir + "/journal", NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	c := journal.NewCommitter(j, journal.CommitterOptions{MaxPendingBytes: 8 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := offlineSession(ctx, b, c, j, "postgres://x", dir+"/spill")
	for _, m := range relationMessages() {
		if err := s.handleCopyData(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	be := binary.BigEndian
	const xid = 777
	start := func(first bool) []byte {
		f := byte(0)
		if first {
			f = 1
		}
		return xlogData(0, append(be.AppendUint32([]byte{'S'}, xid), f))
	}
	stop := xlogData(0, []byte{'E'})
	row := func(i int) []byte {
		p := append(be.AppendUint32(be.AppendUint32([]byte{'I'}, xid), 1), 'N')
		p = be.AppendUint16(p, 5)
		for _, v := range []string{fmt.Sprint(i), "42", "0.42", "bulk row " + fmt.Sprint(i), "2026-12-03 08:00:00.123456+00"} {
			p = append(be.AppendUint32(append(p, 't'), uint32(len(v))), v...)
		}
		return xlogData(pgq.LSN(1<<20+i), p)
	}
	rows := make([][]byte, 4096)
	for i := range rows {
		rows[i] = row(i)
	}
	pgTime := uint64(time.Since(pgq.PGEpoch).Microseconds())
	end := pgq.LSN(1<<40 + b.N)
	commit := xlogData(end, be.AppendUint64(be.AppendUint64(be.AppendUint64(append(be.AppendUint32([]byte{'c'}, xid), 0), uint64(end-8)), uint64(end)), pgTime))
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.handleCopyData(ctx, start(true)); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if i > 0 && i%1000 == 0 { // a stream block per 1000 rows
			if err := s.handleCopyData(ctx, stop); err != nil {
				b.Fatal(err)
			}
			if err := s.handleCopyData(ctx, start(false)); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.handleCopyData(ctx, rows[i%len(rows)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.handleCopyData(ctx, stop); err != nil {
		b.Fatal(err)
	}
	if err := s.handleCopyData(ctx, commit); err != nil {
		b.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if j.LastEndLSN() != end {
		b.Fatalf("journal ends at %s, want %s", j.LastEndLSN(), end)
	}
}
