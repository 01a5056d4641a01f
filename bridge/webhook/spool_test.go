package webhook

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
)

// TestSpooledBody: a batch whose body passes MaxBodyMemory goes out in one
// request, from a file in SpoolDir (the receiver sees the file while the
// request is on its way), with its Content-Length and a signature valid
// for the whole body; the file is gone afterwards, after a failed attempt
// (the receiver refuses the first) as after the acknowledged one. A batch
// under the bound is not spooled.
func TestSpooledBody(t *testing.T) {
	secret := []byte("s3cret")
	spool := t.TempDir()
	var mu sync.Mutex
	var bodies []string
	var spooled []int
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ents, _ := os.ReadDir(spool)
		body, err := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		requests++
		spooled = append(spooled, len(ents))
		if err != nil || r.ContentLength != int64(len(body)) {
			t.Errorf("request %d: Content-Length %d, body %d bytes (%v)", requests, r.ContentLength, len(body), err)
		}
		if err := Verify(secret, body, r.Header.Get(HeaderSignature), time.Now(), time.Minute); err != nil {
			t.Errorf("request %d: %v", requests, err)
		}
		if requests == 1 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		bodies = append(bodies, string(body))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	p, err := New(Options{URL: srv.URL, Secret: secret, BatchSize: 1000, MaxBodyMemory: 4 << 10, SpoolDir: spool})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]bridge.Message, 200)
	for i := range msgs {
		msgs[i] = bridge.Message{ID: fmt.Sprintf("0/10.%d", i), Key: []byte("k"), RowKey: []byte("k"), Payload: fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 100))}
	}
	acked := make([]bool, len(msgs))
	ctx := context.Background()
	if err := p.Publish(ctx, msgs, acked); err == nil {
		t.Fatal("the refused attempt succeeded")
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Fatalf("%d spool files left after a failed attempt", len(ents))
	}
	if err := p.Publish(ctx, msgs, acked); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Fatalf("%d spool files left after the request", len(ents))
	}
	small := []bridge.Message{msgs[0]}
	if err := p.Publish(ctx, small, []bool{false}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || strings.Count(bodies[0], `"i":`) != len(msgs) || len(bodies[0]) <= 4<<10 {
		t.Fatalf("%d acknowledged requests, the first of %d bytes: want the whole batch in one request", len(bodies), len(bodies[0]))
	}
	if spooled[0] != 1 || spooled[1] != 1 || spooled[2] != 0 {
		t.Fatalf("spool files seen by the receiver per request: %v, want [1 1 0] (the big body spooled, the small one not)", spooled)
	}
	t.Logf("body of %d bytes sent from a spool file, signature valid, file removed", len(bodies[0]))
}
