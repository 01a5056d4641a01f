package consumers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/servertest"
	"github.com/pgq-dev/pgq/server"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m, pgtest.Options{}))
}

// env is a running sidecar on a fresh database of the package's cluster
// with table t(id serial, v text) and table u(id int) (servertest.Env).
type env struct{ *servertest.Env }

func start(t *testing.T, mod func(*server.Options)) *env {
	t.Helper()
	return &env{servertest.Start(t, pgtest.Shared(t), mod)}
}

// call does an HTTP request with a raw body and returns status and body.
func (e *env) call(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if e.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.Token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// errCode returns the error code of a JSON error body ("" if none).
func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var eb struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, b)
	}
	return eb.Error.Code
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func fetch(t *testing.T, e *env, group, member string, max int, wait time.Duration) *client.FetchResult {
	t.Helper()
	res, err := e.C.Fetch(ctxT(t), group, client.FetchRequest{Member: member, Max: max, Wait: wait})
	if err != nil {
		t.Fatalf("fetch %s as %s: %v", group, member, err)
	}
	return res
}

func offsets(txs []*pgq.Transaction) []pgq.Offset {
	out := make([]pgq.Offset, len(txs))
	for i, tx := range txs {
		out[i] = tx.Offset
	}
	return out
}

var _ = bytes.NewReader
