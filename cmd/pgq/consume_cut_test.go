package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/record"
)

// TestConsumeCutAnswer: a fetch answer whose body the server cuts short
// after its 200 (as pgq does when a record cannot be read once the answer
// started), in the middle of a multi-part transaction, makes `pgq consume`
// fail naming the cut, and never commits: the part it decoded before the
// cut may be printed (it prints as it decodes), but the cursor stays
// before the transaction, so the next consume prints it again whole.
func TestConsumeCutAnswer(t *testing.T) {
	var commits atomic.Int32
	part := &pgq.Transaction{Xid: 7, CommitLSN: 0x10, EndLSN: 0x20, CommitTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Part: 0,
		Changes: []pgq.Change{{Op: pgq.OpMessage, Prefix: "p", Content: []byte("x")}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"name":"g","mode":"exclusive","committed_offset":0}` + "\n"))
		case strings.HasSuffix(r.URL.Path, "/fetch"):
			// The records form: the fields, then an array of two parts
			// of which only the first comes.
			var b bytes.Buffer
			enc := msgpack.NewEncoder(&b)
			_ = enc.EncodeMapLen(6)
			for _, kv := range []struct {
				k string
				v any
			}{{"next_offset", 3}, {"committed_offset", 0}, {"last_offset", 2}, {"lease_expires", time.Now().Add(time.Minute)}, {"generation", 1}} {
				_ = enc.EncodeString(kv.k)
				_ = enc.Encode(kv.v)
			}
			_ = enc.EncodeString("transactions")
			_ = enc.EncodeArrayLen(2)
			_ = enc.EncodeArrayLen(2)
			_ = enc.EncodeUint(1)
			b.Write(record.Append(nil, part)[record.HeaderSize:])
			w.Header().Set("Content-Type", api.MediaRecords)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(b.Bytes())
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		default:
			if strings.HasSuffix(r.URL.Path, "/commit") {
				commits.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}
	}))
	t.Cleanup(srv.Close)
	cmd := exec.Command(pgqbin.Path(t), "consume", "--group", "g", "--give-up", "1s", "--addr", srv.URL)
	cmd.Env = cliEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil || commits.Load() != 0 {
		t.Fatalf("pgq consume of a cut answer: err %v, %d commits, stdout %q, stderr %q: want a failure and no commit", err, commits.Load(), stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "unexpected EOF") {
		t.Fatalf("stderr %q does not say the answer was cut", stderr.String())
	}
	if lines := strings.Count(stdout.String(), "\n"); lines > 1 || (lines == 1 && !strings.Contains(stdout.String(), `"part":0,"final":false`)) {
		t.Fatalf("stdout %q: want at most the part decoded before the cut", stdout.String())
	}
	t.Logf("stdout: %sstderr: %s", stdout.String(), stderr.String())
}
