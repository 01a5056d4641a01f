package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/internal/pgqbin"
)

// TestConsumeCutAnswer: a fetch answer whose body the server cuts short
// after its 200 (as pgq does when a record cannot be read once the answer
// started) makes `pgq consume` fail, printing none of the transactions
// the cut body held, instead of taking it for a complete answer.
func TestConsumeCutAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"name":"g","mode":"exclusive","committed_offset":0}` + "\n"))
		case strings.HasSuffix(r.URL.Path, "/fetch"):
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"transactions":[{"offset":1,"xid":7,"commit_lsn":"0/10","end_lsn":"0/20","commit_time":"2026-01-01T00:00:00Z","part":0,"final":false,"changes":[]},`))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		default:
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}
	}))
	t.Cleanup(srv.Close)
	cmd := exec.Command(pgqbin.Path(t), "consume", "--group", "g", "--give-up", "1s", "--addr", srv.URL)
	cmd.Env = cliEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil || stdout.Len() != 0 {
		t.Fatalf("pgq consume of a cut answer: err %v, stdout %q, stderr %q: want a failure and nothing printed", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "unexpected EOF") {
		t.Fatalf("stderr %q does not say the answer was cut", stderr.String())
	}
	t.Logf("stderr: %s", stderr.String())
}
