package httpapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
)

// TestDecodeStrict: decodeStrict reads what openapi.json says and nothing
// else, and its refusals name the key.
func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{``, "empty request body"},
		{`  `, "empty request body"},
		{`[]`, "want a JSON object, not array"},
		{`null`, "want a JSON object, not null"},
		{`{"name":"a28","Name":"x"}`, `unknown key "Name" (keys are case-sensitive: "name")`},
		{`{"NAME":"a29"}`, `unknown key "NAME" (keys are case-sensitive: "name")`},
		{`{"name":"a","name":"b"}`, `at key "name": duplicate object member name`},
		{`{"name":"a","from":null}`, `null at key "from"`},
		{`{"name":null}`, `null at key "name"`},
		{`{"name":"a","tables":null}`, `null at key "tables"`},
		{`{"name":"a","tables":["x",null]}`, `null at key "tables"[1]`},
		{`{"name":"a","nope":1}`, `unknown key "nope"`},
		{`{"from":"earliest"}`, `missing required key "name"`},
		{`{"name":"a"} {}`, "trailing data after the object"},
		{`{"name":"a"}x`, "trailing data after the object"},
		{`{"name":"a"`, "invalid JSON body"},
		{`{"name":1}`, `at key "name": cannot read a JSON number as a string`},
		{`{"name":"a","ack_wait":"1ns"}`, `ack_wait 1ns: want 0 (the default) or at least 1ms`},
		{`{"name":"a","ack_wait":"-1s"}`, `ack_wait -1s: want 0 (the default) or at least 1ms`},
		{`{"name":"a","backoff":["1s","999µs"]}`, `backoff[1] 999µs: want 0 (the default) or at least 1ms`},
		{`{"name":"a","ack_wait":"soon"}`, `at key "ack_wait": cannot read a JSON string as a duration: invalid duration "soon"`},
		{"{\"name\":\"\xff\"}", "invalid UTF-8"},
	} {
		var req api.CreateRequest
		err := decodeStrict([]byte(tc.body), &req)
		if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want bad_request containing %q", tc.body, err, tc.want)
		}
	}

	var req api.CreateRequest
	if err := decodeStrict([]byte(`{"name":"a","ack_wait":"1ms","backoff":["0s","2s"],"hold_slot":true}`), &req); err != nil {
		t.Fatal(err)
	}
	if req.Name != "a" || time.Duration(req.AckWait) != time.Millisecond || len(req.Backoff) != 2 || !req.HoldSlot {
		t.Errorf("decoded %+v", req)
	}

	// A key tagged nullable takes null (and only at its own level).
	type nullable struct {
		Rate *float64 `json:"rate" pgq:"nullable"`
		List []string `json:"list,omitempty" pgq:"nullable"`
	}
	var n nullable
	if err := decodeStrict([]byte(`{"rate":null,"list":null}`), &n); err != nil || n.Rate != nil {
		t.Errorf("nullable keys: %v %+v", err, n)
	}
	if err := decodeStrict([]byte(`{"rate":null,"list":[null]}`), &n); !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("null inside a nullable list: %v", err)
	}
	if err := decodeStrict([]byte(`{"list":[]}`), &n); err == nil || !strings.Contains(err.Error(), `missing required key "rate"`) {
		t.Errorf("a nullable required key left out: %v", err)
	}
}
