package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pgq-dev/pgq/console"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pgtest.Options{})) }

// chromium returns the browser binary, "" when none is installed (.ci/run
// installs Debian's chromium, so CI always runs the browser test).
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

const token = "s3cret-console"

// call makes an API call with the token and decodes the JSON answer.
func call(t *testing.T, base, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type groupInfo struct {
	Lag struct {
		Records int `json:"records"`
	} `json:"lag"`
	Shared *struct {
		InFlight int `json:"in_flight"`
		Pending  int `json:"pending"`
		Parked   int `json:"parked"`
	} `json:"shared"`
}

// TestConsoleInBrowser drives the console in a real headless Chromium
// against a real pgq (with --auth-token) over a real PostgreSQL: the page
// asks for the token, loads without console errors, shows a group the test
// created with its lag, and its "requeue all" button requeues a parked
// message of a shared group (checked through the API). The screenshot
// goes to docs/console.png with PGQ_UPDATE_SCREENSHOT=1 (docs/monitoring.md
// shows it), otherwise to a temporary file.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)")
	}
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, item text)`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := server.Open(ctx, server.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", AuthToken: token,
		Ingest: ingest.Options{PGURL: db.URL, Slot: "ui_" + db.Name, Publication: "ui", CreateSlot: true, CreatePublication: "all"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := "http://" + s.Addr()

	deadline := time.Now().Add(30 * time.Second)
	for !serverparts.Of(s).Ingester.Status().Connected { // inserts before streaming would start past them
		if time.Now().After(deadline) {
			t.Fatal("ingest did not connect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 1; i <= 3; i++ {
		db.Exec(t, fmt.Sprintf(`INSERT INTO orders VALUES (%d, 'item %d')`, i, i))
	}
	for serverparts.Of(s).Journal.LastOffset() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("journal has %d records, want 3", serverparts.Of(s).Journal.LastOffset())
		}
		time.Sleep(20 * time.Millisecond)
	}
	call(t, base, "POST", "/v1/groups", `{"name":"billing","from":"earliest"}`, nil)
	call(t, base, "POST", "/v1/groups", `{"name":"mailer","mode":"shared","from":"earliest"}`, nil)
	var fetched struct {
		Messages []struct {
			AckID string `json:"ack_id"`
		} `json:"messages"`
	}
	call(t, base, "POST", "/v1/groups/mailer/fetch", `{"member":"w1","max":1}`, &fetched)
	if len(fetched.Messages) != 1 {
		t.Fatalf("fetch: %+v", fetched)
	}
	call(t, base, "POST", "/v1/groups/mailer/term", `{"ack_ids":["`+fetched.Messages[0].AckID+`"]}`, nil)
	var g groupInfo
	call(t, base, "GET", "/v1/groups/mailer", "", &g)
	if g.Shared == nil || g.Shared.Parked != 1 {
		t.Fatalf("mailer before the page: %+v", g.Shared)
	}
	var billing groupInfo
	call(t, base, "GET", "/v1/groups/billing", "", &billing)

	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox,
		// A container's small /dev/shm made the browser's first step block.
		chromedp.Flag("disable-dev-shm-usage", true))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	bctx, tcancel := context.WithTimeout(bctx, 60*time.Second)
	defer tcancel()

	var (
		mu       sync.Mutex
		problems []string
	)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 900)); err != nil { // starts the browser
		t.Fatal(err)
	}
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// The first API call, before the token is typed, answers 401
			// as it must; the browser logs that load as a network error.
			if m.Source == "network" && strings.Contains(m.Text, "401") {
				continue
			}
			if m.IsException() || m.Type == "error" || m.Type == "warning" {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()

	lag := `tr[data-group="billing"] td.lag-records`
	parked := `tr[data-group="mailer"] td.parked`
	steps := []struct {
		name string
		a    chromedp.Action[chromedp.Void]
	}{
		{"open /ui/", chromedp.Navigate(base + "/ui/")},
		{"token form", chromedp.WaitVisible(chromedp.CSS("#token"))},
		{"type the token", chromedp.SendKeys(chromedp.CSS("#token"), token)},
		{"submit", chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`))}, // a click fires the form's submit event; form.submit() (chromedp.Submit) does not, and reloads the page
		{"group billing shown", chromedp.WaitVisible(chromedp.CSS(lag))},
	}
	err = nil
	for _, st := range steps {
		if err = chromedp.Do(bctx, st.a); err != nil {
			err = fmt.Errorf("%s: %w", st.name, err)
			break
		}
	}
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(bctx), 5*time.Second)
		defer hcancel()
		html, herr := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("body")))
		if herr != nil {
			html = "(page not read: " + herr.Error() + ")"
		}
		t.Fatalf("console did not show group billing: %v\nconsole: %q\npage: %.3000s", err, problems, html)
	}
	shown, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(lag)))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(billing.Lag.Records); billing.Lag.Records != 3 || strings.TrimSpace(shown) != want {
		t.Errorf("billing lag shown %q, API says %d (want 3)", shown, billing.Lag.Records)
	}
	if got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(parked))); err != nil || strings.TrimSpace(got) != "1" {
		t.Fatalf("mailer parked shown %q, %v; want 1", got, err)
	}

	// Wait for a second sample so that the charts draw a line.
	for len(historySamples(t, base)) < 2 && time.Now().Before(deadline.Add(time.Minute)) {
		time.Sleep(200 * time.Millisecond)
	}
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(lag))); err != nil {
		t.Fatalf("reload (the token is kept for the tab): %v", err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	out := filepath.Join(t.TempDir(), "console.png")
	if os.Getenv("PGQ_UPDATE_SCREENSHOT") != "" {
		out = filepath.Join("..", "docs", "console.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}

	// Requeue through the page; the API then has nothing parked.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`button[data-action="requeue-all"][data-group="mailer"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`button[data-action="requeue-all"][data-group="mailer"]`)),
	); err != nil {
		t.Fatalf("requeue through the page: %v", err)
	}
	call(t, base, "GET", "/v1/groups/mailer", "", &g)
	if g.Shared.Parked != 0 || g.Shared.Pending+g.Shared.InFlight == 0 {
		t.Errorf("mailer after the page's requeue: %+v (want nothing parked, the message pending again)", *g.Shared)
	}
	if got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(parked))); err != nil || strings.TrimSpace(got) != "0" {
		t.Errorf("mailer parked shown %q after requeue, %v; want 0", got, err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser console: %s", p)
	}
}

func historySamples(t *testing.T, base string) []console.Sample {
	var h struct {
		Samples []console.Sample `json:"samples"`
	}
	call(t, base, "GET", "/v1/status/history", "", &h)
	return h.Samples
}
