package consumers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
)

// TestFetchMsgpackIsLanguageNeutral: with Accept: application/msgpack a
// fetch answers the JSON response's maps (transactions as dump lines);
// the Go client's record form is a separate media type.
func TestFetchMsgpackIsLanguageNeutral(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "mp", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	e.Insert(t, 2)
	fetch := func(accept string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", e.Base+"/v1/groups/mp/fetch", strings.NewReader(`{"member":"x","max":10}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b []byte
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		return resp, b
	}
	resp, body := fetch(api.MediaMsgpack)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != api.MediaMsgpack {
		t.Fatalf("fetch: %d %s", resp.StatusCode, ct)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	txs, _ := m["transactions"].([]any)
	if len(txs) < 2 {
		t.Fatalf("transactions: %#v", m["transactions"])
	}
	tx := txs[0].(map[string]any)
	ch := tx["changes"].([]any)[0].(map[string]any)
	if tx["offset"] != int8(1) && tx["offset"] != int64(1) && tx["offset"] != uint64(1) {
		t.Fatalf("offset %#v (%T)", tx["offset"], tx["offset"])
	}
	if ch["op"] != "insert" || ch["table"] != "t" || tx["final"] != true {
		t.Fatalf("change %#v", ch)
	}
	if _, ok := m["next_offset"]; !ok {
		t.Fatalf("no next_offset in %v", m)
	}
	resp, _ = fetch(api.MediaRecords)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != api.MediaRecords {
		t.Fatalf("records fetch: %d %s", resp.StatusCode, ct)
	}
}
