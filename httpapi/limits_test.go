package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/httpapi"
)

// dial opens a raw connection to the API.
func (e *env) dial() net.Conn {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.Addr, 2*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedWithin reports whether the server closes c within d (reading
// and dropping whatever it answers first).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// TestSlowClientsAreCut: a body sent a byte at a time, headers that never
// end, and an idle keep-alive connection are each closed by the server
// after their limit; a client that keeps to the limits is served.
func TestSlowClientsAreCut(t *testing.T) {
	e := startLimited(t, "", httpapi.Limits{HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})

	body := e.dial()
	fmt.Fprintf(body, "POST /v1/groups HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	header := e.dial()
	fmt.Fprintf(header, "GET /v1/groups HTTP/1.1\r\nHost: x\r\n")
	idle := e.dial()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz on a keep-alive connection: %v %v", resp, err)
	}
	for name, c := range map[string]net.Conn{"a slow body": body, "unfinished headers": header, "an idle keep-alive": idle} {
		if !closedWithin(c, 3*time.Second) {
			t.Errorf("%s: the connection is still open 3 s after its 300 ms limit", name)
		}
	}
	if resp, b, _ := e.do("GET", "/v1/groups", ""); resp.StatusCode != 200 {
		t.Fatalf("a prompt client: %d %s", resp.StatusCode, b)
	}
}

// TestLongPollOutlivesWriteTimeout: the write deadline of a fetch covers
// its wait, so a long poll longer than WriteTimeout is answered, while
// the body deadline lifted after the body does not cancel it either.
func TestLongPollOutlivesWriteTimeout(t *testing.T) {
	e := startLimited(t, "", httpapi.Limits{WriteTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond, MaxWait: 5 * time.Second})
	if resp, b, _ := e.do("POST", "/v1/groups", `{"name":"g","from":"latest"}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	t0 := time.Now()
	resp, b, _ := e.do("POST", "/v1/groups/g/fetch", `{"member":"m","wait":"1s"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"transactions":[]`) {
		t.Fatalf("a 1 s long poll under a 200 ms write timeout: %d %s", resp.StatusCode, b)
	}
	if took := time.Since(t0); took < 900*time.Millisecond {
		t.Fatalf("the long poll returned after %s, before its wait", took)
	}
}

// TestConnectionCap: beyond MaxConns, ProbeConns more connections answer
// /healthz and /readyz (and 503 for anything else); beyond those, new
// connections wait until one closes; the process holds no more file
// descriptors than the caps allow, however many clients come.
func TestConnectionCap(t *testing.T) {
	e := startLimited(t, "", httpapi.Limits{MaxConns: 4, ProbeConns: 2, HeaderTimeout: 20 * time.Second, BodyTimeout: 20 * time.Second})
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	before := fds()
	// Four slow clients hold every ordinary slot.
	for range 4 {
		c := e.dial()
		fmt.Fprintf(c, "POST /v1/groups HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	}
	time.Sleep(100 * time.Millisecond)
	probe := func(path string) int {
		c := e.dial()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		if !resp.Close {
			t.Errorf("GET %s over the cap: no Connection: close", path)
		}
		return resp.StatusCode
	}
	for _, path := range []string{"/healthz", "/readyz", "/healthz"} {
		if got := probe(path); got != 200 {
			t.Errorf("GET %s with every connection slot held: %d, want 200", path, got)
		}
	}
	if got := probe("/v1/groups"); got != 503 {
		t.Errorf("GET /v1/groups over the cap: %d, want 503", got)
	}
	// Two more slow clients fill the probe slots; 50 more wait.
	for range 2 {
		c := e.dial()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	}
	waiting := make([]net.Conn, 50)
	for i := range waiting {
		waiting[i] = e.dial()
	}
	time.Sleep(200 * time.Millisecond)
	if got, limit := fds()-before, 2*(4+2)+50+8; got > limit {
		// Each accepted connection holds one descriptor in the server and
		// one in this test (the client side); a waiting one only the
		// client's. Anything past that is the server accepting beyond
		// its caps.
		t.Errorf("%d more descriptors with 56 clients, want at most %d", got, limit)
	}
	// The probe slots free up after their 2 s deadline: once the waiting
	// clients give up, a probe is answered again.
	for _, c := range waiting {
		_ = c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for probe("/healthz") != 200 {
		if time.Now().After(deadline) {
			t.Fatal("no probe answered within 10 s of filling the probe slots")
		}
	}
}
