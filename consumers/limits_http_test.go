package consumers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// TestGroupLimitsHTTP: over the real API, the group bounds and checks of
// issue 23 answer with their code and a one-line message of their own:
// the names "." and "..", lease_ttl over 1h, max_ack_pending over 10000,
// over 1000 table patterns, a nak's negative delay, a repeated ack id
// (counted once) and an ack id naming a message that does not exist on a
// record already read (not_found).
func TestGroupLimitsHTTP(t *testing.T) {
	e := start(t, nil)
	var many []string
	for i := range consumers.MaxTablePatterns + 1 {
		many = append(many, fmt.Sprintf("%q", fmt.Sprintf("public.t%d", i)))
	}
	cases := []struct {
		path, body, code string
	}{
		{"/v1/groups", `{"name":"."}`, consumers.CodeInvalidName},
		{"/v1/groups", `{"name":".."}`, consumers.CodeInvalidName},
		{"/v1/groups", `{"name":"many","tables":[` + strings.Join(many, ",") + `]}`, consumers.CodeBadRequest},
		{"/v1/groups", `{"name":"wide","mode":"shared","max_ack_pending":10001}`, consumers.CodeBadRequest},
	}
	for _, c := range cases {
		e.refused(t, "POST", c.path, c.body, c.code)
	}
	if _, err := e.C.Consumer("..", client.ConsumerOptions{Member: "m"}); !errors.Is(err, api.ErrInvalidName) {
		t.Errorf("client consumer of group \"..\": %v", err)
	}
	if _, err := e.C.CreateGroup(ctxT(t), api.CreateRequest{Name: "ex", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/groups/ex/fetch", `{"member":"m","lease_ttl":"100000h"}`},
		{"/v1/groups/ex/fetch", `{"member":"m","lease_ttl":"-1s"}`},
		{"/v1/groups/ex/heartbeat", `{"member":"m","lease_ttl":"2h"}`},
		{"/v1/groups/ex/commit", `{"member":"m","offset":1,"lease_ttl":"2h"}`},
	} {
		e.refused(t, "POST", c.path, c.body, consumers.CodeBadRequest)
	}
	if code, body := e.call(t, "POST", "/v1/groups/ex/fetch", `{"member":"m","lease_ttl":"1h"}`); code != 200 {
		t.Fatalf("fetch with lease_ttl 1h: %d %s", code, body)
	}

	if _, err := e.C.CreateGroup(ctxT(t), api.CreateRequest{Name: "jobs", From: "latest", Mode: "shared", MaxAckPending: consumers.MaxAckPendingLimit}); err != nil {
		t.Fatal(err)
	}
	e.Insert(t, 1)
	msgs, err := e.C.FetchMessages(ctxT(t), "jobs", client.FetchRequest{Member: "w", Max: 10})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("shared fetch: %v %+v", err, msgs)
	}
	id := msgs[0].AckID
	e.refused(t, "POST", "/v1/groups/jobs/nak", `{"ack_ids":["`+id+`"],"delay":"-5s"}`, consumers.CodeBadRequest)
	// The record is read: an index it does not have names no message.
	bogus := fmt.Sprintf("%d.7.1.%s", msgs[0].Offset, id[strings.LastIndexByte(id, '.')+1:])
	e.refused(t, "POST", "/v1/groups/jobs/ack", `{"ack_ids":["`+bogus+`"]}`, consumers.CodeNotFound)
	code, body := e.call(t, "POST", "/v1/groups/jobs/nak", `{"ack_ids":["`+id+`","`+id+`","`+id+`"]}`)
	var res api.AckResult
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Count != 1 {
		t.Fatalf("nak naming one message 3 times: %d %s, want count 1", code, body)
	}
	gi, err := e.C.Group(ctxT(t), "jobs")
	if err != nil || gi.Shared.InFlight != 0 || gi.Shared.Pending != 1 {
		t.Fatalf("after the nak: %v %+v", err, gi.Shared)
	}
}

// refused calls the API and checks the error code and that the message
// is one line.
func (e *env) refused(t *testing.T, method, path, body, code string) {
	t.Helper()
	status, b := e.call(t, method, path, body)
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || status < 400 || eb.Error.Code != code || eb.Error.Message == "" || strings.Contains(eb.Error.Message, "\n") {
		short := body
		if len(short) > 60 {
			short = short[:60] + "…"
		}
		t.Errorf("%s %s %s: %d %s, want %s with a one-line message", method, path, short, status, b, code)
	}
}

// TestMultiPartPositionHTTP: over the real API, against a transaction
// ingest journaled in several parts, offset:N on a later part is refused
// with 400 bad_position naming the first part's offset (create, reset),
// and lsn: of the transaction starts at its first part.
func TestMultiPartPositionHTTP(t *testing.T) {
	e := start(t, func(o *server.Options) { o.Ingest.MaxRecordBytes = ingest.MinMaxRecordBytes })
	before := serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, "INSERT INTO t (v) SELECT repeat('x', 200) FROM generate_series(1, 200)")
	last := e.WaitLast(t, before+3)
	p0 := before + 1
	tx, err := serverparts.Of(e.S).Journal.Read(p0)
	if err != nil || tx.Part != 0 || tx.Final {
		t.Fatalf("test setup: offset %d is not part 0 of a multi-part transaction: %v %+v", p0, err, tx)
	}
	for off := p0 + 1; off <= last; off++ {
		later, err := serverparts.Of(e.S).Journal.Read(off)
		if err != nil || later.Xid != tx.Xid {
			t.Fatalf("test setup: offset %d: %v", off, err)
		}
		code, body := e.call(t, "POST", "/v1/groups", fmt.Sprintf(`{"name":"g%d","from":"offset:%d"}`, off, off))
		if code != 400 || errCode(t, body) != consumers.CodeBadPosition || !strings.Contains(string(body), fmt.Sprintf("offset:%d", p0)) {
			t.Errorf("create at offset:%d: %d %s, want 400 naming offset:%d", off, code, body, p0)
		}
	}
	if _, err := e.C.CreateGroup(ctxT(t), api.CreateRequest{Name: "g", From: fmt.Sprintf("lsn:%s", tx.CommitLSN)}); err != nil {
		t.Fatal(err)
	}
	e.refused(t, "POST", "/v1/groups/g/reset", fmt.Sprintf(`{"to":"offset:%d","dry_run":true}`, last), consumers.CodeBadPosition)
	res := fetch(t, e, "g", "m", 1, 0)
	if len(res.Transactions) == 0 || res.Transactions[0].Offset != p0 || !res.Transactions[len(res.Transactions)-1].Final {
		t.Fatalf("group at lsn:%s: %+v, want the whole transaction from offset %d", tx.CommitLSN, res.Transactions, p0)
	}
}
