package jetstream_test

import (
	"context"
	"strings"
	"testing"

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
			m := bridgetest.JetStreamMessages(t, ns.ClientURL(), stream)[0]
			bridgetest.CheckFormat(t, src, f, "ce-", m)
		})
	}
}
