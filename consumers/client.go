package consumers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// ClientOptions configure Dial. The zero value talks msgpack without auth.
type ClientOptions struct {
	// Token is sent as "Authorization: Bearer <token>" when not empty.
	Token string
	// HTTPClient; zero → a client without an overall timeout (fetches
	// long-poll; every call is bounded by its context instead).
	HTTPClient *http.Client
	// JSON asks for JSON responses instead of msgpack (debugging).
	JSON bool
}

// Validate reports whether the options are usable.
func (o ClientOptions) Validate() error {
	if strings.ContainsAny(o.Token, "\r\n") {
		return errors.New("consumers: client options: token contains a newline")
	}
	return nil
}

// Client talks to a pgq sidecar's HTTP API. It is safe for concurrent use.
type Client struct {
	base string
	o    ClientOptions
	hc   *http.Client
}

// Dial returns a client of the sidecar at addr ("host:port" or an
// http(s):// URL). It does no I/O: the first call reports an unreachable
// server.
func Dial(addr string, o ClientOptions) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if addr == "" {
		return nil, errors.New("consumers: dial: empty address")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("consumers: dial %q: want host:port or an http(s) URL", addr)
	}
	hc := o.HTTPClient
	if hc == nil {
		// Keep enough idle connections for the overlapping fetch and
		// commit of each Consumer sharing the client.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), o: o, hc: hc}, nil
}

// do sends a JSON body and decodes the response into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	data, mp, err := c.roundTrip(ctx, method, path, body)
	if err != nil || out == nil {
		return err
	}
	if mp {
		err = msgpack.Unmarshal(data, out)
	} else {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return fmt.Errorf("consumers: %s %s: decode response: %w", method, path, err)
	}
	return nil
}

// roundTrip sends a JSON body and returns a successful response's body and
// whether it is msgpack; an error response becomes an *Error.
func (c *Client) roundTrip(ctx context.Context, method, path string, body any) (data []byte, msgpackBody bool, err error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, false, fmt.Errorf("consumers: %s %s: encode: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, false, fmt.Errorf("consumers: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.o.JSON {
		req.Header.Set("Accept", "application/json")
	} else {
		req.Header.Set("Accept", MediaMsgpack+", "+api.MediaRecords)
	}
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("consumers: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err = readBody(resp)
	if err != nil {
		return nil, false, fmt.Errorf("consumers: %s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			eb.Error.Status = resp.StatusCode
			return nil, false, &eb.Error
		}
		return nil, false, &Error{Code: CodeInternal, Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: HTTP %s", method, path, resp.Status)}
	}
	ct := resp.Header.Get("Content-Type")
	return data, strings.HasPrefix(ct, MediaMsgpack) || strings.HasPrefix(ct, api.MediaRecords), nil
}

// maxPresize bounds the buffer readBody allocates from Content-Length
// before any byte arrived.
const maxPresize = 256 << 20

// readBody reads a whole response body, in one allocation when the server
// sent Content-Length (it always does).
func readBody(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > maxPresize {
		return io.ReadAll(resp.Body)
	}
	// One byte more, so that reading to EOF does not grow the buffer.
	buf := make([]byte, 0, n+1)
	for {
		k, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // longer than announced: grow
		}
	}
}

func groupPath(name string) string { return "/v1/groups/" + url.PathEscape(name) }

func utcInfo(gi *GroupInfo) {
	gi.Created, gi.Updated = gi.Created.UTC(), gi.Updated.UTC()
	if gi.LeaseExpires != nil {
		t := gi.LeaseExpires.UTC()
		gi.LeaseExpires = &t
	}
}

// CreateGroup creates a group.
func (c *Client) CreateGroup(ctx context.Context, req CreateRequest) (GroupInfo, error) {
	var gi GroupInfo
	err := c.do(ctx, http.MethodPost, "/v1/groups", req, &gi)
	utcInfo(&gi)
	return gi, err
}

// Groups lists the groups.
func (c *Client) Groups(ctx context.Context) ([]GroupInfo, error) {
	var lr listResponse
	if err := c.do(ctx, http.MethodGet, "/v1/groups", nil, &lr); err != nil {
		return nil, err
	}
	for i := range lr.Groups {
		utcInfo(&lr.Groups[i])
	}
	return lr.Groups, nil
}

// Group describes one group, with its lag.
func (c *Client) Group(ctx context.Context, name string) (GroupInfo, error) {
	var gi GroupInfo
	err := c.do(ctx, http.MethodGet, groupPath(name), nil, &gi)
	utcInfo(&gi)
	return gi, err
}

// DeleteGroup deletes a group.
func (c *Client) DeleteGroup(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, groupPath(name), nil, nil)
}

// ResetGroup moves a group to a position (see ParsePosition); with dryRun
// it only reports where the group would land.
func (c *Client) ResetGroup(ctx context.Context, name, to string, dryRun bool) (ResetResult, error) {
	var rr ResetResult
	err := c.do(ctx, http.MethodPost, groupPath(name)+"/reset", ResetBody{To: to, DryRun: dryRun}, &rr)
	return rr, err
}

// Fetch is one long-poll fetch (see Manager.Fetch). Most callers use a
// Consumer instead.
func (c *Client) Fetch(ctx context.Context, group string, req FetchRequest) (*FetchResult, error) {
	body := FetchBody{Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: Duration(req.Wait), FailFast: req.FailFast, LeaseTTL: Duration(req.LeaseTTL)}
	if c.o.JSON {
		return nil, errors.New("consumers: fetch needs msgpack responses (ClientOptions.JSON is set)")
	}
	data, mp, err := c.roundTrip(ctx, http.MethodPost, groupPath(group)+"/fetch", body)
	if err != nil {
		return nil, err
	}
	if !mp {
		return nil, fmt.Errorf("consumers: fetch %q: the server did not answer in msgpack", group)
	}
	res, err := decodeFetch(data)
	if err != nil {
		return nil, fmt.Errorf("consumers: fetch %q: decode response: %w", group, err)
	}
	return res, nil
}

// Commit commits offset for member (cumulative).
func (c *Client) Commit(ctx context.Context, group, member string, offset pgq.Offset) (CommitResult, error) {
	var cr CommitResult
	err := c.do(ctx, http.MethodPost, groupPath(group)+"/commit", CommitBody{Member: member, Offset: offset}, &cr)
	cr.LeaseExpires = cr.LeaseExpires.UTC()
	return cr, err
}

// Heartbeat renews member's lease.
func (c *Client) Heartbeat(ctx context.Context, group, member string) error {
	return c.do(ctx, http.MethodPost, groupPath(group)+"/heartbeat", MemberBody{Member: member}, nil)
}

// Release gives up member's lease.
func (c *Client) Release(ctx context.Context, group, member string) error {
	return c.do(ctx, http.MethodPost, groupPath(group)+"/release", MemberBody{Member: member}, nil)
}

// ConsumerOptions configure Client.Consumer. Zero values get the defaults
// noted.
type ConsumerOptions struct {
	// Member identifies this consumer; zero → "<hostname>-<random>".
	Member string
	// Max and MaxBytes per fetch; zero → the server defaults (100, 1 MiB).
	Max      int
	MaxBytes int64
	// Wait is the long-poll wait of each fetch; zero → 10s.
	Wait time.Duration
	// LeaseTTL; zero → the server default (30s).
	LeaseTTL time.Duration
	// FailFast makes a fetch fail with ErrConflict at once when another
	// member holds the group, instead of waiting for the lease.
	FailFast bool
}

// Validate rejects negative values.
func (o ConsumerOptions) Validate() error {
	if o.Max < 0 || o.MaxBytes < 0 || o.Wait < 0 || o.LeaseTTL < 0 || len(o.Member) > maxMemberLen {
		return errors.New("consumers: consumer options: negative limit or member over 256 bytes")
	}
	return nil
}

// Consumer reads one group as one member. It is not safe for concurrent
// use: one goroutine calls Next/Messages/Consume/Commit.
type Consumer struct {
	c     *Client
	group string
	o     ConsumerOptions

	buf       []*pgq.Transaction // fetched, not yet returned by Next
	next      pgq.Offset         // NextOffset of the last fetch
	last      pgq.Offset         // LastOffset of the last fetch
	done      pgq.Offset         // highest offset safe to commit
	committed pgq.Offset
}

// Consumer returns a consumer of group. Nothing is sent until Next.
func (c *Client) Consumer(group string, o ConsumerOptions) (*Consumer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateName(group); err != nil {
		return nil, err
	}
	if o.Member == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		host, _ := os.Hostname()
		o.Member = host + "-" + hex.EncodeToString(b[:])
	}
	if o.Wait == 0 {
		o.Wait = 10 * time.Second
	}
	return &Consumer{c: c, group: group, o: o}, nil
}

// Member returns the member id.
func (cs *Consumer) Member() string { return cs.o.Member }

// Poll does one fetch with the given wait and buffers the result; it
// reports whether the group has caught up with the journal's end.
func (cs *Consumer) Poll(ctx context.Context, wait time.Duration) (caughtUp bool, err error) {
	res, err := cs.c.Fetch(ctx, cs.group, FetchRequest{Member: cs.o.Member, Max: cs.o.Max, MaxBytes: cs.o.MaxBytes, Wait: wait, LeaseTTL: cs.o.LeaseTTL, FailFast: cs.o.FailFast})
	if err != nil {
		return false, err
	}
	cs.buf = append(cs.buf, res.Transactions...)
	cs.next, cs.last = res.NextOffset, res.LastOffset
	if cs.committed == 0 {
		cs.committed = res.Committed
	}
	if len(cs.buf) == 0 {
		cs.done = max(cs.done, res.NextOffset-1) // filtered-out records
	}
	return res.NextOffset > res.LastOffset, nil
}

// Buffered reports how many fetched transactions Next will return without
// a fetch.
func (cs *Consumer) Buffered() int { return len(cs.buf) }

// Next returns the next transaction, long-polling as needed until one
// arrives or ctx ends. Returned transactions are not committed: call
// Commit after processing them (at-least-once).
func (cs *Consumer) Next(ctx context.Context) (*pgq.Transaction, error) {
	for len(cs.buf) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := cs.Poll(ctx, cs.o.Wait); err != nil {
			return nil, err
		}
	}
	tx := cs.buf[0]
	cs.buf[0] = nil
	cs.buf = cs.buf[1:]
	if tx.Final {
		cs.done = max(cs.done, tx.Offset)
	}
	if len(cs.buf) == 0 {
		cs.done = max(cs.done, cs.next-1)
	}
	return tx, nil
}

// Commit commits everything Next returned (and the filtered-out records
// around it). It never commits inside a multi-part transaction.
func (cs *Consumer) Commit(ctx context.Context) error {
	if cs.done <= cs.committed {
		return nil
	}
	cr, err := cs.c.Commit(ctx, cs.group, cs.o.Member, cs.done)
	if err != nil {
		return err
	}
	cs.committed = cr.Committed
	return nil
}

// Messages iterates over transactions until ctx ends or a fetch fails (the
// error is yielded last). Commit is the caller's: call Consumer.Commit.
func (cs *Consumer) Messages(ctx context.Context) iter.Seq2[*pgq.Transaction, error] {
	return func(yield func(*pgq.Transaction, error) bool) {
		for {
			tx, err := cs.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(tx, nil) {
				return
			}
		}
	}
}

// Consume calls handler for each transaction and commits after each
// fetched batch has been handled. Commits run in the background so that
// their fsync is not on the delivery path: at most one is in flight, and a
// batch that ends while one is in flight is committed with a later batch
// (or when Consume returns). A failed commit cuts short the fetch it
// overlaps and is returned; what was handled after the last successful
// commit is delivered again (at-least-once). When handler fails, what
// succeeded is committed and the error is returned (the failed transaction
// is delivered again to the next member; Close the consumer after an
// error). It returns ctx's error when ctx ends, after committing what was
// handled.
func (cs *Consumer) Consume(ctx context.Context, handler func(context.Context, *pgq.Transaction) error) error {
	var inflight *commitCall
	// finish waits for the commit in flight, if any, and returns its error.
	finish := func() error {
		if inflight == nil {
			return nil
		}
		c := inflight
		inflight = nil
		return cs.finishCommit(c)
	}
	// commitRest commits what was handled, waiting for it; even when ctx
	// has just ended.
	commitRest := func() error {
		if err := finish(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return cs.Commit(cctx)
	}
	for {
		before := cs.done // always a transaction boundary
		nctx := ctx
		if inflight != nil {
			nctx = inflight.fetchCtx
		}
		tx, err := cs.Next(nctx)
		if err != nil {
			if cerr := commitRest(); cerr != nil {
				return cerr // a failed commit also ends the fetch
			}
			return err
		}
		if err := handler(ctx, tx); err != nil {
			cs.done = before
			cs.buf = nil // the server redelivers after the lease changes
			if cerr := commitRest(); cerr != nil {
				return errors.Join(err, cerr)
			}
			return err
		}
		if len(cs.buf) > 0 {
			continue
		}
		// End of a batch: collect a finished commit, start the next one.
		if inflight != nil {
			select {
			case <-inflight.done:
				if err := finish(); err != nil {
					return err
				}
			default: // still running: this batch goes with a later commit
			}
		}
		if inflight == nil && cs.done > cs.committed {
			inflight = cs.startCommit(ctx)
		}
	}
}

// commitCall is a commit running in the background of Consume.
type commitCall struct {
	done chan struct{}
	res  CommitResult
	err  error
	// fetchCtx is the context of the fetch overlapping the commit; it is
	// cancelled when the commit fails.
	fetchCtx context.Context
	cancel   context.CancelFunc
}

// startCommit commits cs.done in the background, with a 10s timeout that
// does not end with ctx.
func (cs *Consumer) startCommit(ctx context.Context) *commitCall {
	c := &commitCall{done: make(chan struct{})}
	c.fetchCtx, c.cancel = context.WithCancel(ctx)
	group, member, offset := cs.group, cs.o.Member, cs.done
	go func() {
		defer close(c.done)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		c.res, c.err = cs.c.Commit(cctx, group, member, offset)
		if c.err != nil {
			c.cancel()
		}
	}()
	return c
}

// finishCommit waits for a background commit and records its result.
func (cs *Consumer) finishCommit(c *commitCall) error {
	<-c.done
	c.cancel()
	if c.err != nil {
		return c.err
	}
	cs.committed = max(cs.committed, c.res.Committed)
	return nil
}

// Close releases the lease so another member can take over at once.
// Uncommitted transactions will be delivered again.
func (cs *Consumer) Close(ctx context.Context) error {
	return cs.c.Release(ctx, cs.group, cs.o.Member)
}

// RowValues decodes the new (or old) image of a row change into Go values
// by column name, with pgtype (see pgq.Value.Decode). Unchanged TOAST
// columns and, for a key-only old image, non-key columns are left out.
// m is not safe for concurrent use; give each goroutine its own
// (pgtype.NewMap()).
func RowValues(m *pgtype.Map, c *pgq.Change, old bool) (map[string]any, error) {
	vals := c.New
	if old {
		vals = c.Old
	}
	if vals == nil {
		return nil, nil
	}
	out := make(map[string]any, len(vals))
	for i, v := range vals {
		if i >= len(c.Columns) || v.Kind == pgq.ValueUnchangedTOAST || (old && c.OldKind == pgq.OldKey && !c.Columns[i].Key) {
			continue
		}
		col := c.Columns[i]
		d, err := v.Decode(m, col.TypeOID)
		if err != nil {
			return nil, fmt.Errorf("consumers: column %s.%s.%s: %w", c.Schema, c.Table, col.Name, err)
		}
		out[col.Name] = d
	}
	return out, nil
}
