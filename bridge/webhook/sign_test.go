package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/pgq-dev/pgq/bridge"
)

// testSecret is the Standard Webhooks specification's example secret (a
// 24-byte key).
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func testKey(t testing.TB) []byte {
	t.Helper()
	key, legacy, err := ParseSecret(testSecret)
	if err != nil || legacy {
		t.Fatalf("ParseSecret: %v (legacy %v)", err, legacy)
	}
	return key
}

// TestParseSecret: a whsec_ secret's key is its decoded bytes, at least
// 24 of them; a plain secret is legacy, its bytes the key, and whsec_ +
// its base64 (the documented migration) gives the same key.
func TestParseSecret(t *testing.T) {
	key := testKey(t)
	if len(key) != 24 {
		t.Fatalf("key of %d bytes, want 24", len(key))
	}
	for _, bad := range []string{"whsec_c2hvcnQ=", "whsec_!!notbase64", "whsec_"} {
		if _, _, err := ParseSecret(bad); !errors.Is(err, ErrSecret) {
			t.Errorf("%q: %v, want ErrSecret", bad, err)
		} else if strings.Contains(err.Error(), strings.TrimPrefix(bad, "whsec_")) && bad != "whsec_" {
			t.Errorf("%q: the error %q shows the secret", bad, err)
		}
	}
	old := "a plain secret of yesterday"
	k1, legacy, err := ParseSecret(old)
	if err != nil || !legacy || string(k1) != old {
		t.Fatalf("plain secret: %q %v %v, want its bytes, legacy", k1, legacy, err)
	}
	k2, legacy, err := ParseSecret("whsec_" + base64.StdEncoding.EncodeToString([]byte(old)))
	if err != nil || legacy || !bytes.Equal(k1, k2) {
		t.Fatalf("migrated secret: %q %v %v, want the plain secret's key", k2, legacy, err)
	}
	if k, legacy, err := ParseSecret(""); k != nil || legacy || err != nil {
		t.Fatalf("no secret: %q %v %v", k, legacy, err)
	}
}

// TestSignStandardVector checks SignStandard against the Standard
// Webhooks library's own Sign, and Sign (the deprecated header) against
// its vector, with the same key.
func TestSignStandardVector(t *testing.T) {
	key := testKey(t)
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	body := []byte(`[{"a":1}]`)
	want, err := wh.Sign("pgq_0123", at, body)
	if err != nil {
		t.Fatal(err)
	}
	if got := SignStandard(key, "pgq_0123", at, body); got != want {
		t.Fatalf("SignStandard = %s, the library's %s", got, want)
	}
	s := NewSigning(key, "pgq_0123", at)
	for _, p := range bytes.SplitAfter(body, []byte(",")) { // fed in pieces, as a body streams
		_, _ = s.Write(p)
	}
	if s.Signature() != want || s.LegacySignature() != Sign(key, body, at) {
		t.Fatalf("streamed %s %s", s.Signature(), s.LegacySignature())
	}
}

// hookRequest is a request a test receiver got.
type hookRequest struct {
	header http.Header
	body   []byte
}

// hookReceiver is a real HTTP receiver that verifies every request with
// the Standard Webhooks Go library (401 when it fails) and records it;
// refuse answers that many first verified requests 503.
type hookReceiver struct {
	t      testing.TB
	wh     *standardwebhooks.Webhook
	mu     sync.Mutex
	got    []hookRequest
	bad    []error
	refuse int
}

func newHookReceiver(t testing.TB, refuse int, maxHeaderBytes int) (*hookReceiver, *httptest.Server) {
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &hookReceiver{t: t, wh: wh, refuse: refuse}
	srv := httptest.NewUnstartedServer(rc)
	srv.Config.MaxHeaderBytes = maxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.bad = append(rc.bad, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	rc.got = append(rc.got, hookRequest{r.Header.Clone(), body})
	if rc.refuse > 0 {
		rc.refuse--
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// testMessages are n messages of group g with stable ids as the bridge
// makes them, pad bytes of padding each.
func testMessages(n, pad int) []bridge.Message {
	msgs := make([]bridge.Message, n)
	for i := range msgs {
		id := fmt.Sprintf("0/1A2B%04X.%d", i/3, i%3)
		key := fmt.Appendf(nil, "k%d", i%7)
		msgs[i] = bridge.Message{ID: id, Group: "g", Key: key, RowKey: key,
			Payload: fmt.Appendf(nil, `{"id":%q,"pad":"%s"}`, id, strings.Repeat("x", pad))}
	}
	return msgs
}

// TestSigningStandardLibrary: every request the publisher sends, from
// memory and spooled to a file, with one lane and with several, verifies
// with the Standard Webhooks Go library; webhook-id holds no '.', is the
// same on every attempt of a batch (the receiver refuses the first) and
// another for a batch cut differently (another BatchSize); the
// deprecated Pgq-Signature verifies with the same key.
func TestSigningStandardLibrary(t *testing.T) {
	key := testKey(t)
	ids := func(batch, lanes int, memory int64) []string {
		rc, srv := newHookReceiver(t, 1, 0)
		p, err := New(Options{URL: srv.URL, Secret: key, BatchSize: batch, Concurrency: lanes, MaxBodyMemory: memory, SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		msgs := testMessages(120, 100)
		acked := make([]bool, len(msgs))
		ctx := context.Background()
		for range 3 {
			if err := p.Publish(ctx, msgs, acked); err == nil {
				break
			}
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.bad) > 0 {
			t.Fatalf("batch %d, %d lanes: %d requests failed the library's verification: %v", batch, lanes, len(rc.bad), rc.bad[0])
		}
		for i, a := range acked {
			if !a {
				t.Fatalf("batch %d, %d lanes: message %d not acknowledged", batch, lanes, i)
			}
		}
		var out []string
		for i, r := range rc.got {
			id := r.header.Get(HeaderID)
			if !strings.HasPrefix(id, "pgq_") || strings.Contains(id, ".") {
				t.Fatalf("webhook-id %q: want pgq_<hex>, no '.'", id)
			}
			if err := Verify(key, r.body, r.header.Get(HeaderSignature), time.Now(), time.Minute); err != nil {
				t.Fatalf("request %d: Pgq-Signature: %v", i, err)
			}
			if r.header.Get("Pgq-Ids") != "" {
				t.Fatalf("request %d carries Pgq-Ids", i)
			}
			out = append(out, id)
		}
		// The refused first request came again with the same id (with
		// lanes, maybe after other lanes' requests).
		if len(out) < 2 || slices.Index(out[1:], out[0]) < 0 {
			t.Fatalf("batch %d, %d lanes: ids %v: the retry of the refused batch has another id", batch, lanes, out)
		}
		return out[1:]
	}
	mem := ids(50, 1, 0)
	spooled := ids(50, 1, 1<<10) // 50 changes of ~120 bytes: spooled
	if strings.Join(mem, ",") != strings.Join(spooled, ",") {
		t.Fatalf("the same batches spooled have other ids: %v, %v", mem, spooled)
	}
	lanes := ids(50, 3, 0)
	other := ids(40, 1, 0)
	seen := map[string]bool{}
	for _, id := range append(mem, append(lanes, other...)...) {
		if seen[id] {
			t.Fatalf("webhook-id %s names two different batches (%v, %v, %v)", id, mem, lanes, other)
		}
		seen[id] = true
	}
	t.Logf("ids of 50-change batches %v, of 40-change batches %v", mem, other)
}

// TestWebhookReplayAlteredID: a request captured on the wire and replayed
// within the tolerance window verifies as is, but with another webhook-id
// (a receiver that deduplicates by it would take the replay for new) or
// another body it fails the Standard Webhooks verification. The
// deprecated Pgq-Signature does not cover the id: it is why the id is
// now signed.
func TestWebhookReplayAlteredID(t *testing.T) {
	key := testKey(t)
	rc, srv := newHookReceiver(t, 0, 0)
	p, err := New(Options{URL: srv.URL, Secret: key, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	msgs := testMessages(20, 10)
	if err := p.Publish(context.Background(), msgs, make([]bool, len(msgs))); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	captured := rc.got[0]
	otherID := rc.got[1].header.Get(HeaderID)
	rc.mu.Unlock()
	replay := func(mutate func(h http.Header, body []byte) []byte) int {
		h := captured.header.Clone()
		body := mutate(h, bytes.Clone(captured.body))
		req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			if k != "Content-Length" {
				req.Header[k] = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := replay(func(_ http.Header, b []byte) []byte { return b }); code != http.StatusNoContent {
		t.Fatalf("the unaltered replay answered %d", code)
	}
	for name, mutate := range map[string]func(http.Header, []byte) []byte{
		"another batch's id": func(h http.Header, b []byte) []byte { h.Set(HeaderID, otherID); return b },
		"a made-up id": func(h http.Header, b []byte) []byte {
			h.Set(HeaderID, "pgq_ffffffffffffffffffffffffffffffff")
			return b
		},
		"altered body ids": func(_ http.Header, b []byte) []byte {
			return bytes.Replace(b, []byte(msgs[0].ID), []byte(msgs[10].ID), 1)
		},
		"another timestamp": func(h http.Header, b []byte) []byte {
			h.Set(HeaderTimestamp, fmt.Sprint(time.Now().Unix()+1))
			return b
		},
	} {
		if code := replay(mutate); code != http.StatusUnauthorized {
			t.Errorf("replay with %s answered %d, want 401", name, code)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) != 4 || !errors.Is(rc.bad[0], standardwebhooks.ErrNoMatchingSignature) {
		t.Fatalf("verification errors %v, want 4 mismatches", rc.bad)
	}
	// What the old header alone let through: it verifies whatever the id.
	if err := Verify(key, captured.body, captured.header.Get(HeaderSignature), time.Now(), time.Minute); err != nil {
		t.Fatalf("Pgq-Signature: %v", err)
	}
}
