package bridgetest

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
)

// StartNATS runs a nats-server with JetStream on dir; port 0 → a free one.
func StartNATS(t testing.TB, dir string, port int) *natsserver.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return ns
}

// StartNATSAt restarts a nats-server on the store dir and the port of url.
func StartNATSAt(t testing.TB, dir, url string) *natsserver.Server {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(url[len("nats://"):])
	port, _ := strconv.Atoi(portStr)
	var ns *natsserver.Server
	for i := 0; ; i++ {
		ns2, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go ns2.Start()
		if ns2.ReadyForConnections(5 * time.Second) {
			ns = ns2
			break
		}
		ns2.Shutdown()
		if i == 5 {
			t.Fatal("nats-server did not restart")
		}
	}
	return ns
}

// JSClient connects to url's JetStream until the test ends.
func JSClient(t *testing.T, url string) njs.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// ReadStream reads every message of stream in order.
func ReadStream(t *testing.T, url, stream string) (ids []string, pls []Payload) {
	t.Helper()
	js := JSClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, njs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for uint64(len(ids)) < info.State.Msgs {
		batch, err := cons.Fetch(1000, njs.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ids = append(ids, m.Headers().Get(njs.MsgIDHeader))
			var p Payload
			if err := json.Unmarshal(m.Data(), &p); err != nil {
				t.Fatalf("payload %q: %v", m.Data(), err)
			}
			if m.Headers().Get(bridge.HeaderOffset) != strconv.FormatUint(p.Offset, 10) || m.Headers().Get(bridge.HeaderOp) != p.Change.Op || m.Headers().Get(bridge.HeaderTable) != "public.t" {
				t.Fatalf("headers %v do not match payload %s", m.Headers(), m.Data())
			}
			pls = append(pls, p)
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
		if n == 0 {
			t.Fatalf("stream has %d messages, read %d", info.State.Msgs, len(ids))
		}
	}
	return ids, pls
}

// JetStreamMessages reads every message of the stream, in order.
func JetStreamMessages(t *testing.T, url, stream string) []Bridged {
	t.Helper()
	ctx := context.Background()
	st, err := JSClient(t, url).Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []Bridged
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		m := Bridged{Key: raw.Header.Get(jetstream.HeaderKey), Body: raw.Data, Hdr: map[string]string{}, Subject: raw.Subject}
		for h, v := range raw.Header {
			m.Hdr[h] = v[0]
		}
		m.Hdr["pgq-id"] = raw.Header.Get(njs.MsgIDHeader)
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Fatal("no message")
	}
	return out
}
