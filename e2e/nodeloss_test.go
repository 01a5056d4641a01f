package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/bridgetest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// pgqProc is a `pgq run` process holding the slot for group g.
type pgqProc struct {
	cmd  *exec.Cmd
	addr string
	log  string
	done chan struct{}
}

// startPGQ runs pgq on dataDir with --hold-slot-for g and waits until
// its API answers with group g.
func startPGQ(t *testing.T, pgURL, slot, dataDir string) *pgqProc {
	t.Helper()
	bin := pgqbin.Path(t)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logf, err := os.CreateTemp(t.TempDir(), "pgq-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--pg-url", pgURL, "--slot", slot, "--create-slot", "--publication", "nl",
		"--data-dir", dataDir, "--listen", addr, "--hold-slot-for", "g")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pgqProc{cmd: cmd, addr: addr, log: logf.Name(), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	t.Cleanup(p.kill)
	cl := bridgetest.DialPGQ(t, addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		gi, err := cl.Group(ctx, "g")
		cancel()
		if err == nil && gi.HoldSlot {
			return p
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(p.log)
			t.Fatalf("pgq did not serve group g: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill SIGKILLs pgq and waits for it.
func (p *pgqProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// inserter inserts rows 1, 2, ... into t, one to three per transaction,
// until stopped; rows returns how many were committed.
type inserter struct {
	rows atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startInserter(t *testing.T, c *pgtest.Cluster, db string) *inserter {
	t.Helper()
	conn, err := c.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	in := &inserter{stop: make(chan struct{})}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer conn.Close(context.Background())
		ctx := context.Background()
		next := int64(1)
		for i := 0; ; i++ {
			select {
			case <-in.stop:
				return
			default:
			}
			n := int64(1 + i%3)
			_, err := conn.Exec(ctx, `INSERT INTO t (id, v) SELECT g, g FROM generate_series($1::bigint, $2::bigint) g`, next, next+n-1)
			if err != nil {
				t.Errorf("insert: %v", err)
				return
			}
			next += n
			in.rows.Store(next - 1)
			time.Sleep(time.Millisecond)
		}
	}()
	return in
}

func (in *inserter) finish() int {
	close(in.stop)
	in.wg.Wait()
	return int(in.rows.Load())
}

// nodeLoss runs the node-loss scenario of issue 24 against broker
// ("jetstream" or "kafka" at brokerURL) and returns the number of rows
// inserted: pgq with --hold-slot-for g and a bridge process of group g
// under insert load; both SIGKILLed; pgq's data dir deleted; a new pgq on
// an empty data dir (same slot, same flag) and a new bridge; the inserts
// go on throughout.
func nodeLoss(t *testing.T, broker, brokerURL string) (rows int, addr string) {
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	ctx := context.Background()
	db, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, `CREATE TABLE t (id bigint PRIMARY KEY, v bigint NOT NULL)`, `CREATE PUBLICATION nl FOR TABLE t`); err != nil {
		t.Fatal(err)
	}
	pgURL, slot := c.URL(db), "nl"
	dir1 := filepath.Join(t.TempDir(), "data")
	p1 := startPGQ(t, pgURL, slot, dir1)
	waitStreaming(t, p1.addr) // rows committed before the slot exists are in no journal
	in := startInserter(t, c, db)
	b1 := bridgetest.StartChild(t, broker, brokerURL, p1.addr)
	time.Sleep(2 * time.Second)
	// The node dies with its disk.
	_ = b1.Process.Kill()
	p1.kill()
	_ = b1.Wait()
	lost := in.rows.Load()
	if err := os.RemoveAll(dir1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // inserts go on meanwhile
	began := time.Now()
	p2 := startPGQ(t, pgURL, slot, filepath.Join(t.TempDir(), "data"))
	b2 := bridgetest.StartChild(t, broker, brokerURL, p2.addr)
	t.Cleanup(func() { _ = b2.Process.Kill(); _ = b2.Wait() }) // it publishes until the caller has read the broker
	time.Sleep(time.Second)
	rows = in.finish()
	// The new pgq journals what the slot kept for g and the bridge
	// publishes it: wait until the group's lag is 0 (the broker's count
	// is waited for by the caller).
	cl := bridgetest.DialPGQ(t, p2.addr)
	deadline := time.Now().Add(60 * time.Second)
	for {
		gi, err := cl.Group(ctx, "g")
		if err == nil && gi.Lag.Records == 0 && gi.CommittedOffset > 0 {
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(p2.log)
			t.Fatalf("group g not caught up after 60s: %+v %v\n%s", gi, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d rows inserted, %d of them before the node was lost; new pgq and bridge caught up %s after the new pgq started", rows, lost, time.Since(began).Round(time.Millisecond))
	return rows, p2.addr
}

// waitStreaming waits until pgq at addr streams from its slot (created
// and consistent by then).
func waitStreaming(t *testing.T, addr string) {
	t.Helper()
	cl := bridgetest.DialPGQ(t, addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := cl.Status(context.Background())
		if err == nil && st.ProtoVersion != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgq not streaming after 30s: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newJournalRows returns the rows the new pgq at addr journaled (it
// starts at the hold floor), read through a group of its own: when rows
// are missing in the broker, it tells the bridge's loss from the slot's.
func newJournalRows(t *testing.T, addr string) map[int]bool {
	t.Helper()
	cl := bridgetest.DialPGQ(t, addr)
	ctx := context.Background()
	if _, err := cl.CreateGroup(ctx, api.CreateRequest{Name: "audit", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	cs, err := cl.Consumer("audit", client.ConsumerOptions{Member: "audit", Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for {
		caughtUp, err := cs.Poll(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for cs.Buffered() > 0 {
			tx, err := cs.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tx.Changes {
				if len(c.New) > 0 {
					n, _ := strconv.Atoi(string(c.New[0].Data))
					out[n] = true
				}
			}
		}
		if caughtUp {
			return out
		}
	}
}

// checkRows checks that pls hold rows 1..rows exactly once each under
// unique ids; when rows are missing it says which of them the new pgq at
// addr journaled.
func checkRows(t *testing.T, ids []string, pls []bridgetest.Payload, rows int, addr string) {
	t.Helper()
	seenID := make(map[string]bool, len(ids))
	seenRow := make(map[int]int, rows)
	for i, id := range ids {
		if seenID[id] {
			t.Fatalf("message id %s twice", id)
		}
		seenID[id] = true
		r := pls[i].Change.New.ID
		if r < 1 || r > rows || pls[i].Change.Op != "insert" {
			t.Fatalf("message %s: row %d (%s), want an insert of 1..%d", id, r, pls[i].Change.Op, rows)
		}
		seenRow[r]++
	}
	var missing []int
	twice := 0
	for r := 1; r <= rows; r++ {
		switch seenRow[r] {
		case 0:
			missing = append(missing, r)
		case 1:
		default:
			twice++
		}
	}
	if len(missing) == 0 && twice == 0 && len(ids) == rows {
		return
	}
	inNew := 0
	if len(missing) > 0 {
		j := newJournalRows(t, addr)
		for _, r := range missing {
			if j[r] {
				inNew++
			}
		}
	}
	t.Fatalf("%d messages for %d rows: %d rows missing (%d of them in the new journal; first %v), %d more than once",
		len(ids), rows, len(missing), inNew, missing[:min(len(missing), 10)], twice)
}

// TestNodeLossJetStream: issue 24's node loss into a real nats-server
// whose stream has a duplicate window of 100ms, so what keeps the replay
// of the held slot out of the stream is the bridge resuming after the
// stream's last message, not the window: every row exactly once.
func TestNodeLossJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and processes")
	}
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), CreateStream: true, Duplicates: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	rows, addr := nodeLoss(t, "jetstream", ns.ClientURL())
	waitStream(t, ns.ClientURL(), "PGQ", rows)
	ids, pls := bridgetest.ReadStream(t, ns.ClientURL(), "PGQ")
	checkRows(t, ids, pls, rows, addr)
	t.Logf("%d rows exactly once in the stream across the node loss", rows)
}

// TestNodeLossKafka: issue 24's node loss into kfake (6 partitions):
// every row exactly once in the topic.
func TestNodeLossKafka(t *testing.T) {
	if testing.Short() || os.Getenv("PGQ_TEST_KAFKA_BROKERS") != "" {
		t.Skip("starts PostgreSQL and processes; the child uses the default topic on kfake only")
	}
	brokers := bridgetest.KafkaBrokers(t)
	rows, addr := nodeLoss(t, "kafka", brokers[0])
	ids, pls := bridgetest.ReadTopic(t, brokers, "pgq.public.t", rows)
	checkRows(t, ids, pls, rows, addr)
	t.Logf("%d rows exactly once in the topic across the node loss", rows)
}

// waitStream waits (up to 60s) until stream holds at least n messages,
// then a little longer for any beyond.
func waitStream(t *testing.T, url, stream string, n int) {
	t.Helper()
	js := bridgetest.JSClient(t, url)
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().State.Msgs >= uint64(n) {
			time.Sleep(500 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			t.Logf("stream %s holds %d messages after 60s, want %d", stream, st.CachedInfo().State.Msgs, n)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
