package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// scrape reads one unlabelled sample of /metrics; ok is false when absent.
func scrape(t *testing.T, s *Server, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}

// TestIngestMetrics: the journal's size, the slot lag, the covered LSN and
// the connection state reach /metrics with the values the journal and
// ingest hold.
func TestIngestMetrics(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE om (id int PRIMARY KEY, v text)`)
	s, stop := start(t, db, t.TempDir())
	defer func() { _ = stop() }()
	for deadline := time.Now().Add(20 * time.Second); s.ingester.Status().ProtoVersion == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("ingest did not start streaming")
		}
	}
	db.Exec(t, `INSERT INTO om SELECT g, repeat('x', 100) FROM generate_series(1, 500) g`, `INSERT INTO om VALUES (1000, 'y')`)
	waitRecords(t, s, 2)
	deadline := time.Now().Add(20 * time.Second)
	for {
		size, okSize := scrape(t, s, "pgq_journal_size_bytes")
		covered, okCovered := scrape(t, s, "pgq_covered_lsn")
		conn, okConn := scrape(t, s, "pgq_ingest_connected")
		_, okLag := scrape(t, s, "pgq_slot_lag_bytes")
		if okSize && okCovered && okConn && okLag && size >= 500*100 && size == float64(s.journal.Size()) &&
			pgq.LSN(covered) >= s.journal.LastEndLSN() && conn == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("size %v (journal %d), covered %v (journal end %s), connected %v, lag present %v",
				size, s.journal.Size(), pgq.LSN(covered), s.journal.LastEndLSN(), conn, okLag)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSlotLag(t *testing.T) {
	for _, c := range []struct {
		walEnd, confirmed pgq.LSN
		want              uint64
	}{
		{0, 100, 0},   // no keepalive yet
		{100, 0, 0},   // nothing confirmed yet
		{100, 150, 0}, // confirmed after the keepalive
		{0x1_0000_0100, 0x1_0000_0000, 0x100},
	} {
		if got := slotLag(c.walEnd, c.confirmed); got != c.want {
			t.Errorf("slotLag(%s, %s) = %d, want %d", c.walEnd, c.confirmed, got, c.want)
		}
	}
}
