package jetstream_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestJetStreamFormats bridges into JetStream in each format and checks a
// message's body and headers.
func TestJetStreamFormats(t *testing.T) {
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	for _, f := range []format.Format{format.PGQ, format.Debezium, format.CloudEvents} {
		t.Run(f.String(), func(t *testing.T) {
			src := bridgetest.StartSource(t, 50)
			stream := "F" + strings.ToUpper(f.String())
			p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: stream, Subject: stream + ".{table}", CreateStream: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			bridgetest.BridgeFormat(t, p, src, f)
			nc, err := nats.Connect(ns.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := njs.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			st, err := js.Stream(context.Background(), stream)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := st.GetMsg(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			m := bridgetest.Bridged{Key: raw.Header.Get(jetstream.HeaderKey), Body: raw.Data, Hdr: map[string]string{"pgq-id": raw.Header.Get(njs.MsgIDHeader)}}
			for h, v := range raw.Header {
				m.Hdr[h] = v[0]
			}
			m.Hdr["pgq-id"] = raw.Header.Get(njs.MsgIDHeader)
			bridgetest.CheckFormat(t, src, f, "ce-", m)
		})
	}
}
