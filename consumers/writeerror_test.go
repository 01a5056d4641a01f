package consumers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/consumers"
)

// TestWriteErrorHidesInternalDetail: a 500 names an error id, not the
// internal error text (paths, storage errors); a 4xx keeps its message.
func TestWriteErrorHidesInternalDetail(t *testing.T) {
	rec := httptest.NewRecorder()
	consumers.WriteError(rec, errors.New("pebble: open /secret/path/index/000123.sst: input/output error"))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	var body struct{ Error consumers.Error }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != consumers.CodeInternal || strings.Contains(body.Error.Message, "/secret/path") || !strings.Contains(body.Error.Message, "error_id=") {
		t.Fatalf("500 body leaks or lacks the error id: %+v", body.Error)
	}

	rec = httptest.NewRecorder()
	consumers.WriteError(rec, fmt.Errorf("%w: group %q", consumers.ErrNotFound, "g1"))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `group \"g1\"`) {
		t.Fatalf("404 lost its message: %d %s", rec.Code, rec.Body.String())
	}
}
