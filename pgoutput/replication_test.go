package pgoutput

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// Streaming needs a tiny logical_decoding_work_mem so modest transactions
// are sent in progress.
// Fuzz worker processes only decode bytes: they start no cluster.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	os.Exit(pgtest.Main(m, pgtest.Options{Settings: []string{"logical_decoding_work_mem = '64kB'"}}))
}

// endPrefix is the prefix of the non-transactional message that ends every
// workload: once it is decoded, everything before it has been sent.
const endPrefix = "pgq-capture-end"

// setupSlot creates a publication for all tables and a pgoutput slot.
func setupSlot(t testing.TB, db *pgtest.DB, slot string) {
	t.Helper()
	db.Exec(t,
		"CREATE PUBLICATION pgq_pub FOR ALL TABLES",
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot),
	)
	t.Cleanup(func() { dropSlot(db, slot) })
}

// dropSlot drops slot once its walsender has gone (best effort: the
// cluster is thrown away anyway).
func dropSlot(db *pgtest.DB, slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		err := db.C.Exec(ctx, db.Name, fmt.Sprintf("SELECT pg_drop_replication_slot('%s')", slot))
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endWorkload emits the end marker.
func endWorkload(t testing.TB, db *pgtest.DB) {
	t.Helper()
	db.Exec(t, fmt.Sprintf("SELECT pg_logical_emit_message(false, '%s', 'end')", endPrefix))
}

// stream starts logical replication from slot with the given protocol
// version (streaming on for version 2) and returns every XLogData payload
// up to and including the end marker. It speaks the replication protocol
// with pgconn directly.
func stream(t testing.TB, db *pgtest.DB, slot string, proto int) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, db.URL+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	opts := fmt.Sprintf("proto_version '%d', publication_names 'pgq_pub', messages 'true'", proto)
	if proto >= 2 {
		opts += ", streaming 'true'"
	}
	conn.Frontend().Send(&pgproto3.Query{String: fmt.Sprintf("START_REPLICATION SLOT %s LOGICAL 0/0 (%s)", slot, opts)})
	if err := conn.Frontend().Flush(); err != nil {
		t.Fatal(err)
	}
	for started := false; !started; {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyBothResponse:
			started = true
		case *pgproto3.ErrorResponse:
			t.Fatal(pgconn.ErrorResponseToPgError(m))
		}
	}
	var (
		out     [][]byte
		dec     = NewDecoder()
		walLast uint64
	)
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(out), err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			t.Fatal(pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyData:
			switch {
			case len(m.Data) > 25 && m.Data[0] == 'w':
				walLast = binary.BigEndian.Uint64(m.Data[1:])
				payload := append([]byte(nil), m.Data[25:]...)
				out = append(out, payload)
				dm, err := dec.Decode(payload)
				if err != nil {
					t.Fatalf("message %d: %v", len(out)-1, err)
				}
				if r, ok := dm.(*Row); ok && r.Change.Op == pgq.OpMessage && r.Change.Prefix == endPrefix {
					return out
				}
			case len(m.Data) >= 18 && m.Data[0] == 'k':
				if m.Data[17] == 1 {
					if err := sendStatus(conn, max(walLast, binary.BigEndian.Uint64(m.Data[1:]))); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

func sendStatus(conn *pgconn.PgConn, lsn uint64) error {
	b := make([]byte, 34)
	b[0] = 'r'
	binary.BigEndian.PutUint64(b[1:], lsn)
	binary.BigEndian.PutUint64(b[9:], lsn)
	binary.BigEndian.PutUint64(b[17:], lsn)
	binary.BigEndian.PutUint64(b[25:], uint64(time.Since(pgq.PGEpoch).Microseconds()))
	conn.Frontend().Send(&pgproto3.CopyData{Data: b})
	return conn.Frontend().Flush()
}

// writeCapture stores payloads as 4-byte big-endian length + bytes.
func writeCapture(name string, msgs [][]byte) error {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return os.WriteFile(name, b, 0o644)
}

// readCapture reads a file written by writeCapture.
func readCapture(name string) ([][]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errors.New("capture: torn length")
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, errors.New("capture: torn message")
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out, nil
}

func pgtestShared(t testing.TB) *pgtest.Cluster { return pgtest.Shared(t) }
