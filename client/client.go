package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/backoff"
)

// Options configure New. The zero value talks msgpack without auth and
// retries transient failures for as long as each call's context lives.
type Options struct {
	// Token is sent as "Authorization: Bearer <token>" when not empty.
	Token string
	// HTTPClient; zero → a client without an overall timeout (fetches
	// long-poll; every call is bounded by its context instead).
	HTTPClient *http.Client
	// JSON asks for JSON responses instead of msgpack (debugging). Fetch
	// needs msgpack.
	JSON bool
	// Retry is the backoff of calls that failed transiently.
	Retry RetryOptions
	// TLS configures an https:// address: the CAs trusted and the
	// client's certificate (tls.go). Zero: the system's roots.
	TLS TLSOptions
}

// RetryOptions say how a call that failed transiently (pgq unreachable,
// restarting or shutting down: a network error, 502, 503 or 504) is
// retried: after a wait drawn from [d/2, d], d doubling from Min to Max.
type RetryOptions struct {
	// Min and Max bound the wait; zero → 100ms and 5s.
	Min, Max time.Duration
	// GiveUp is how long a call keeps retrying before it returns the last
	// error; zero → until its context ends. Negative: no retries.
	GiveUp time.Duration
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if strings.ContainsAny(o.Token, "\r\n") {
		return errors.New("client: options: token contains a newline")
	}
	if o.Retry.Min < 0 || o.Retry.Max < 0 || (o.Retry.Max > 0 && o.Retry.Max < o.Retry.Min) {
		return errors.New("client: options: retry Min and Max must be positive, Max at least Min")
	}
	return o.TLS.validate()
}

// Client talks to a pgq sidecar's HTTP API. It is safe for concurrent use.
type Client struct {
	base string
	o    Options
	hc   *http.Client
}

// New returns a client of the sidecar at addr ("host:port" or an
// http(s):// URL). It does no I/O: the first call connects.
func New(addr string, o Options) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Retry.Min == 0 {
		o.Retry.Min = 100 * time.Millisecond
	}
	if o.Retry.Max == 0 {
		o.Retry.Max = max(5*time.Second, o.Retry.Min)
	}
	if addr == "" {
		return nil, errors.New("client: empty address")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: address %q: want host:port or an http(s) URL", addr)
	}
	tc, err := tlsConfig(o, u) // tls.go
	if err != nil {
		return nil, err
	}
	hc := o.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		tr.TLSClientConfig = tc
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), o: o, hc: hc}, nil
}

// Dial is New.
//
// Deprecated: use New (Dial does no I/O, which its name suggested); Dial
// goes in the next release.
func Dial(addr string, o Options) (*Client, error) { return New(addr, o) }

// IsTransient reports whether err is worth retrying: pgq could not be
// reached, or answered that it is unavailable (restarting, shutting down).
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTLS) {
		return false
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code == api.CodeUnavailable || ae.Status == http.StatusBadGateway || ae.Status == http.StatusGatewayTimeout
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// retry runs call until it succeeds, fails for good, ctx ends, or the
// give-up time passes.
func (c *Client) retry(ctx context.Context, call func() error) error {
	var start time.Time
	wait := c.o.Retry.Min
	for {
		err := call()
		if err == nil || !IsTransient(err) || c.o.Retry.GiveUp < 0 {
			return err
		}
		last := err
		if start.IsZero() {
			start = time.Now()
		}
		if g := c.o.Retry.GiveUp; g > 0 && time.Since(start) >= g {
			return fmt.Errorf("client: gave up after %s: %w", g, err)
		}
		if err := backoff.Sleep(ctx, backoff.Jitter(wait)); err != nil {
			return fmt.Errorf("%w (last error: %v)", err, last)
		}
		wait = min(wait*2, c.o.Retry.Max)
	}
}

// do sends body as JSON and decodes the response into out (nil: discard),
// retrying transient failures.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	return c.retry(ctx, func() error {
		data, mp, err := c.roundTrip(ctx, method, path, "", body)
		if err != nil || out == nil {
			return err
		}
		if mp {
			err = msgpack.Unmarshal(data, out)
		} else {
			err = json.Unmarshal(data, out)
		}
		if err != nil {
			return fmt.Errorf("client: %s %s: decode response: %w", method, path, err)
		}
		return nil
	})
}

// roundTrip sends one request and reads its answer whole; an error
// response becomes an *api.Error. accept overrides the Accept header ("":
// msgpack, or JSON with Options.JSON); msgpackBody reports a msgpack
// answer of either kind.
func (c *Client) roundTrip(ctx context.Context, method, path, accept string, body any) (data []byte, msgpackBody bool, err error) {
	resp, err := c.send(ctx, method, path, accept, body)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	data, err = readBody(resp)
	if err != nil {
		return nil, false, fmt.Errorf("client: %s %s: read response: %w", method, path, err)
	}
	return data, isMsgpack(resp), nil
}

// isMsgpack reports a msgpack answer of either kind.
func isMsgpack(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	return strings.HasPrefix(ct, api.MediaMsgpack) || strings.HasPrefix(ct, api.MediaRecords)
}

// send sends one request and returns a 2xx answer with its body unread
// (the caller closes it); an error response becomes an *api.Error.
func (c *Client) send(ctx context.Context, method, path, accept string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		// The server refuses a duration that is neither 0 nor at least
		// api.MinDuration; say so here, before the round trip.
		if err := api.CheckDurations(body); err != nil {
			return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: encode: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case accept != "":
		req.Header.Set("Accept", accept)
	case c.o.JSON:
		req.Header.Set("Accept", "application/json")
	default:
		req.Header.Set("Accept", api.MediaMsgpack)
	}
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, tlsHint(err))
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: read response: %w", method, path, err)
	}
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		eb.Error.Status = resp.StatusCode
		return nil, &eb.Error
	}
	if err := plainToTLS(resp.StatusCode, data); err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	return nil, &api.Error{Code: api.CodeInternal, Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: HTTP %s", method, path, resp.Status)}
}

// readBody reads resp's body into one array sized by its Content-Length
// when the server sent one (a fetch answer of megabytes would otherwise
// be copied through io.ReadAll's doublings).
func readBody(resp *http.Response) ([]byte, error) {
	const maxPresize = 64 << 20 // a length above is believed only as it arrives
	if n := resp.ContentLength; n > 0 && n <= maxPresize {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(resp.Body)
}

func groupPath(name string) string { return "/v1/groups/" + url.PathEscape(name) }

// utcInfo puts gi's times in UTC and fills the deprecated Committed
// (not on the wire) from CommittedOffset.
func utcInfo(gi *api.GroupInfo) {
	gi.Committed = gi.CommittedOffset //nolint:staticcheck // filled for one release, see api.GroupInfo
	gi.Created, gi.Updated = gi.Created.UTC(), gi.Updated.UTC()
	if gi.LeaseExpires != nil {
		t := gi.LeaseExpires.UTC()
		gi.LeaseExpires = &t
	}
}

// CreateGroup creates a group.
func (c *Client) CreateGroup(ctx context.Context, req api.CreateRequest) (api.GroupInfo, error) {
	var gi api.GroupInfo
	err := c.do(ctx, http.MethodPost, "/v1/groups", req, &gi)
	utcInfo(&gi)
	return gi, err
}

// Groups lists the groups.
func (c *Client) Groups(ctx context.Context) ([]api.GroupInfo, error) {
	var lr api.ListResponse
	if err := c.do(ctx, http.MethodGet, "/v1/groups", nil, &lr); err != nil {
		return nil, err
	}
	for i := range lr.Groups {
		utcInfo(&lr.Groups[i])
	}
	return lr.Groups, nil
}

// Group describes one group, with its lag.
func (c *Client) Group(ctx context.Context, name string) (api.GroupInfo, error) {
	var gi api.GroupInfo
	err := c.do(ctx, http.MethodGet, groupPath(name), nil, &gi)
	utcInfo(&gi)
	return gi, err
}

// DeleteGroup deletes a group.
func (c *Client) DeleteGroup(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, groupPath(name), nil, nil)
}

// ResetGroup moves a group to a position (earliest, latest, offset:N,
// lsn:X/Y, time:RFC3339); with dryRun it only reports where it would land.
func (c *Client) ResetGroup(ctx context.Context, name, to string, dryRun bool) (api.ResetResult, error) {
	var rr api.ResetResult
	err := c.do(ctx, http.MethodPost, groupPath(name)+"/reset", api.ResetBody{To: to, DryRun: dryRun}, &rr)
	rr.PreviousCommitted, rr.Committed = rr.PreviousCommittedOffset, rr.CommittedOffset //nolint:staticcheck // filled for one release, see api.ResetResult
	return rr, err
}

// FetchRequest asks for transactions (see docs/http-api.md).
type FetchRequest struct {
	Member   string
	Max      int
	MaxBytes int64
	// Wait is how long the server waits for data, and for a lease another
	// member holds.
	Wait time.Duration
	// FailFast returns api.ErrConflict at once when another member holds
	// the lease.
	FailFast bool
	LeaseTTL time.Duration
	// Session and From: see api.FetchBody (a Consumer sets both).
	Session string
	From    pgq.Offset
	// Format and Debezium's value modes (DecimalHandlingMode: string,
	// precise, double; TimePrecisionMode: microseconds, adaptive;
	// IntervalHandlingMode: numeric, string; HstoreHandlingMode: json,
	// map) render the changes of FetchMessages' JSON answer on the server
	// (see api.FetchBody; empty: pgq's format and defaults). The typed
	// fetches (Fetch, FetchStream, FetchShared) read pgq's records and
	// leave them out: render their changes with package format
	// (format.Options Decimal, Time, Interval, Hstore).
	Format               string
	DecimalHandlingMode  string
	TimePrecisionMode    string
	IntervalHandlingMode string
	HstoreHandlingMode   string
	// ProvideTransactionMetadata fills the debezium format's transaction
	// block (api.FetchBody; false: transaction is null, Debezium's
	// default).
	ProvideTransactionMetadata bool

	// Schemas asks FetchMessages for Debezium's events with their
	// Connect schemas ({"schema":…,"payload":…}; api.FetchBody.Schemas).
	Schemas bool
}

// FetchResult is what a fetch delivered.
type FetchResult struct {
	// Transactions passing the group's filter, whole.
	Transactions []*pgq.Transaction
	// NextOffset is the first offset not delivered yet; commit
	// NextOffset-1 after processing.
	NextOffset pgq.Offset
	// CommittedOffset is the group's cursor (committed_offset on the
	// wire).
	CommittedOffset pgq.Offset
	// Committed is CommittedOffset, kept for one release: the client
	// fills both.
	//
	// Deprecated: use CommittedOffset.
	Committed pgq.Offset
	// LastOffset is the journal's last offset: NextOffset > LastOffset
	// means caught up.
	LastOffset   pgq.Offset
	LeaseExpires time.Time
	// Generation is the lease generation (0 from a server that has
	// none); commits carry it.
	Generation uint64
}

// Fetch is one long-poll fetch; it does not retry (a Consumer does). It
// holds the whole answer: FetchStream decodes it as it arrives.
func (c *Client) Fetch(ctx context.Context, group string, req FetchRequest) (*FetchResult, error) {
	s, err := c.FetchStream(ctx, group, req)
	if err != nil {
		return nil, err
	}
	return s.collect()
}

// FetchStream is one long-poll fetch whose answer is decoded as it
// arrives, one transaction (journal record) at a time: Next returns each
// while the rest of the answer is still on the way, so a transaction of
// any size is read holding one of its parts. It returns once the answer's
// fields (FetchStream.Result) are read; the caller reads the transactions
// with Next (or All) and calls Close. It does not retry.
func (c *Client) FetchStream(ctx context.Context, group string, req FetchRequest) (*FetchStream, error) {
	if c.o.JSON {
		return nil, errors.New("client: fetch needs msgpack responses (Options.JSON is set)")
	}
	body := api.FetchBody{Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: api.Duration(req.Wait), FailFast: req.FailFast, LeaseTTL: api.Duration(req.LeaseTTL),
		Session: req.Session, From: req.From}
	resp, err := c.send(ctx, http.MethodPost, groupPath(group)+"/fetch", api.MediaRecords, body)
	if err != nil {
		return nil, err
	}
	if !isMsgpack(resp) {
		resp.Body.Close()
		return nil, fmt.Errorf("client: fetch %q: the server did not answer with records", group)
	}
	s, err := newFetchStream(group, resp.Body)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Commit commits offset for member (cumulative), retrying transient
// failures: committing the same offset twice is harmless. generation is
// the lease generation of the fetch that delivered it (0: unchecked).
func (c *Client) Commit(ctx context.Context, group, member string, offset pgq.Offset, generation uint64) (api.CommitResult, error) {
	return c.commit(ctx, group, member, offset, generation, 0)
}

// commit is Commit renewing the lease for ttl (0: the server's default).
func (c *Client) commit(ctx context.Context, group, member string, offset pgq.Offset, generation uint64, ttl time.Duration) (api.CommitResult, error) {
	var cr api.CommitResult
	err := c.do(ctx, http.MethodPost, groupPath(group)+"/commit", api.CommitBody{Member: member, Offset: offset, Generation: generation, LeaseTTL: api.Duration(ttl)}, &cr)
	cr.LeaseExpires = cr.LeaseExpires.UTC()
	cr.Committed = cr.CommittedOffset //nolint:staticcheck // filled for one release, see api.CommitResult
	return cr, err
}

// Heartbeat renews member's lease.
func (c *Client) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) error {
	return c.do(ctx, http.MethodPost, groupPath(group)+"/heartbeat", api.MemberBody{Member: member, LeaseTTL: api.Duration(ttl)}, nil)
}

// Release gives up member's lease.
func (c *Client) Release(ctx context.Context, group, member string) error {
	return c.do(ctx, http.MethodPost, groupPath(group)+"/release", api.MemberBody{Member: member}, nil)
}
