package consumers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/record"
)

// FetchRequest asks for transactions.
type FetchRequest struct {
	// Member identifies the consumer (required, up to 256 bytes).
	Member string
	// Max transactions; zero → 100. MaxBytes of encoded records; zero →
	// 1 MiB. At least one whole transaction is returned when one is
	// available, even if larger than MaxBytes.
	Max      int
	MaxBytes int64
	// Wait is how long to wait for data (and for a lease held by another
	// member); zero returns at once.
	Wait time.Duration
	// FailFast returns ErrConflict at once when another member holds the
	// lease, instead of waiting up to Wait for it.
	FailFast bool
	// LeaseTTL overrides the Manager's lease TTL for this member; at most
	// MaxLeaseTTL.
	LeaseTTL time.Duration
	// Session identifies the consumer's incarnation (a random id per
	// process or Consumer). A fetch from a new session of the member
	// holding the lease restarts delivery at the cursor, so a member that
	// restarted with the same id is redelivered what it had fetched but not
	// committed, instead of skipping it. Empty: not tracked.
	Session string
	// From is the first offset the consumer has not received (the
	// NextOffset of its last fetch; zero: unknown). When an answer was
	// lost, delivery resumes there (never below the cursor) instead of
	// after what the server last handed out.
	From pgq.Offset
}

// FetchResult is what a fetch delivered.
type FetchResult struct {
	// Transactions passing the group's filter, whole (every part of a
	// multi-part transaction, in order).
	Transactions []*pgq.Transaction
	// NextOffset is the first offset not delivered yet. After processing,
	// commit NextOffset-1: this also moves the cursor over filtered-out
	// records, which are never returned.
	NextOffset pgq.Offset
	// Committed is the group's cursor.
	Committed pgq.Offset
	// LastOffset is the journal's last offset when the fetch returned:
	// NextOffset > LastOffset means the group has caught up.
	LastOffset   pgq.Offset
	LeaseExpires time.Time
}

func (m *Manager) clampFetch(req *FetchRequest) error {
	if req.Member == "" || len(req.Member) > maxMemberLen {
		return errf(ErrBadRequest, "member must be 1 to %d bytes", maxMemberLen)
	}
	if req.Max < 0 || req.MaxBytes < 0 || req.Wait < 0 {
		return errf(ErrBadRequest, "max, max_bytes and wait must not be negative")
	}
	ttl, err := m.leaseTTL(req.LeaseTTL)
	if err != nil {
		return err
	}
	req.LeaseTTL = ttl
	if req.Max == 0 {
		req.Max = 100
	}
	if req.MaxBytes == 0 {
		req.MaxBytes = 1 << 20
	}
	req.Max = min(req.Max, m.o.MaxFetch)
	req.MaxBytes = min(req.MaxBytes, m.o.MaxFetchBytes)
	req.Wait = min(req.Wait, m.o.MaxWait)
	return nil
}

// Fetch delivers the next transactions to member, taking or renewing the
// group's lease. It long-polls: it returns as soon as at least one
// transaction passes the filter, or when Wait ends (possibly with none, but
// with NextOffset moved past filtered-out records). A cursor below the
// journal's start fails with ErrOutOfRange. It holds every delivered
// record in memory: FetchStream reads them one at a time.
func (m *Manager) Fetch(ctx context.Context, name string, req FetchRequest) (*FetchResult, error) {
	s, err := m.FetchStream(ctx, name, req, true)
	if err != nil {
		return nil, err
	}
	res := &FetchResult{NextOffset: s.NextOffset, Committed: s.Committed, LastOffset: s.LastOffset, LeaseExpires: s.LeaseExpires}
	if s.Len > 0 {
		res.Transactions = make([]*pgq.Transaction, 0, s.Len)
	}
	for r, err := range s.Records() {
		if err != nil {
			return nil, err
		}
		res.Transactions = append(res.Transactions, r.Tx)
	}
	return res, nil
}

// planned is one record a fetch delivers: what collect learnt of it
// while choosing the answer. The record itself is read again when the
// answer is written (RecordStream.Records), so that a fetch holds one
// record at a time however large the transaction.
type planned struct {
	off   pgq.Offset
	final bool
	// commit is the transaction's commit time.
	commit time.Time
}

// fetchBatch is what fetch chose to deliver; see FetchResult.
type fetchBatch struct {
	recs                  []planned
	next, committed, last pgq.Offset
	leaseExpires          time.Time
	gen                   uint64 // the lease generation the records were delivered under
	g                     *group
	// filter is the group's filter collect applied: Records applies it
	// again to each record it reads.
	filter Filter
}

// fetch chooses what an exclusive fetch delivers (collect) and marks it
// delivered; RecordStream reads the records.
func (m *Manager) fetch(ctx context.Context, name string, req FetchRequest) (*fetchBatch, error) {
	if err := m.clampFetch(&req); err != nil {
		return nil, err
	}
	g, err := m.get(name)
	if err != nil {
		return nil, err
	}
	if err := g.exclusive(); err != nil {
		return nil, err
	}
	// One timer for the whole fetch: the wait for the group's fetch slot,
	// for the lease and for data all come out of req.Wait.
	deadline := time.Now().Add(req.Wait)
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()

	if err := m.enterFetch(ctx, g, name, timer); err != nil {
		return nil, err
	}
	defer func() { <-g.sem }()
	gen, err := m.fetchLease(ctx, g, name, &req, deadline, timer)
	if err != nil {
		return nil, err
	}
	return m.fetchData(ctx, g, name, &req, gen, deadline, timer)
}

// enterFetch takes g's fetch slot (one fetch of a group at a time),
// waiting for it until the timer fires.
func (m *Manager) enterFetch(ctx context.Context, g *group, name string, timer *time.Timer) error {
	select {
	case g.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case g.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-m.done:
		return ErrClosed
	case <-timer.C:
		return errf(ErrConflict, "group %q: another fetch of the group is in progress", name)
	}
}

// leaseTry is the outcome of one attempt at a group's lease.
type leaseTry struct {
	ok     bool
	gen    uint64 // the group's lease generation
	holder string // the member holding the lease
	exp    time.Time
	free   <-chan struct{} // closed when the lease is released
}

// fetchLease takes or renews req.Member's lease of g and returns its
// generation. Another member's lease fails the fetch at once with
// FailFast, else it waits for that lease to end until the deadline.
func (m *Manager) fetchLease(ctx context.Context, g *group, name string, req *FetchRequest, deadline time.Time, timer *time.Timer) (uint64, error) {
	pmuHeld := false
	for {
		t, err := m.tryLease(g, name, req, pmuHeld)
		// A renewal needs no write: only a new lease waits for g.pmu (and
		// so for a commit's write in progress).
		pmuHeld = errors.Is(err, errNeedPersist)
		if pmuHeld {
			continue
		}
		if err != nil {
			return 0, err
		}
		if t.ok {
			return t.gen, nil
		}
		if req.FailFast || !time.Now().Before(deadline) {
			holder, exp := t.holder, t.exp
			return 0, errf(ErrConflict, "group %q is leased by member %q until %s", name, holder, exp.UTC().Format(time.RFC3339Nano))
		}
		if err := m.waitLease(ctx, t.free, t.exp, timer); err != nil {
			return 0, err
		}
	}
}

// tryLease makes one attempt at g's lease for req.Member, holding g.pmu
// too when the previous attempt found that taking the lease needs a write.
func (m *Manager) tryLease(g *group, name string, req *FetchRequest, pmuHeld bool) (leaseTry, error) {
	if pmuHeld {
		g.pmu.Lock()
		defer g.pmu.Unlock()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return leaseTry{}, errf(ErrNotFound, "group %q not found", name)
	}
	ok, exp, free, err := m.acquireLocked(g, req.Member, req.LeaseTTL, m.o.Now(), pmuHeld)
	if ok {
		if err := g.resumeLocked(req.Session, req.From); err != nil {
			return leaseTry{}, err
		}
	}
	return leaseTry{ok: ok, gen: g.gen, holder: g.st.Member, exp: exp, free: free}, err
}

// waitLease waits for the lease that another member holds until exp to be
// released or to expire. When the fetch's timer fires it is re-armed to
// fire at once, so that the next attempt ends the fetch with ErrConflict.
func (m *Manager) waitLease(ctx context.Context, free <-chan struct{}, exp time.Time, timer *time.Timer) error {
	expiry := time.NewTimer(time.Until(exp) + time.Millisecond)
	defer expiry.Stop()
	select {
	case <-free:
	case <-expiry.C:
	case <-timer.C:
		timer.Reset(0)
	case <-ctx.Done():
		return ctx.Err()
	case <-m.done:
		return ErrClosed
	}
	return nil
}

// fetchData collects the records after what g has delivered, under lease
// generation gen, until some pass the filter or the deadline passes,
// waiting for the journal to grow in between.
func (m *Manager) fetchData(ctx context.Context, g *group, name string, req *FetchRequest, gen uint64, deadline time.Time, timer *time.Timer) (*fetchBatch, error) {
	waited := false // the records now coming were appended during this fetch
	// hint is where the wake that ended the last wait says the data
	// starts; next the first offset not delivered before that wait.
	var hint, next pgq.Offset
	for {
		changed, seen := m.j.Changed(), m.j.LastOffset()
		g.mu.Lock()
		from := g.delivered + 1
		g.mu.Unlock()
		start, carried := m.wakeStart(from, next, hint)
		res, lastRead, nonFinal, more, err := m.collect(g, start, carried, *req)
		if err != nil {
			return nil, err
		}
		if err := m.markDelivered(g, name, req, gen, from, lastRead, nonFinal, res); err != nil {
			return nil, err
		}
		if len(res.recs) > 0 && waited {
			m.observeTailDelivery(res.recs)
		}
		if len(res.recs) > 0 || !time.Now().Before(deadline) {
			return res, nil
		}
		hint, next = 0, res.next
		if more {
			continue // only filtered-out records so far and more to read
		}
		waited = true
		wake, release := m.dataWake(g, changed, seen)
		err = m.waitData(ctx, wake, timer)
		hint = release()
		if err != nil {
			return nil, err
		}
	}
}

// wakeStart is where a filtered fetch woken by the wakers registry
// starts collecting, and the stored bytes of the records it passes over
// by starting there (which count towards MaxBytes as collect would have
// counted them): hint, the first part of the transaction that woke it,
// when everything in [from, hint) is known to be rejected, else from.
// The round before the wait collected up to the journal's end and
// delivered everything before next, leaving at most an open transaction
// there; the registry judged every transaction ending after what that
// round saw, and gives a hint only when those before hint all have one
// part and none passes the filter (waiter.hint). So the records of
// [next, hint) are whole rejected transactions of one part: a collect
// from next would pass over them, deliver nothing, count their bytes
// and no non-final part, and go on at hint as this one does. It is
// taken only when nothing moved delivery meanwhile (from == next), the
// records are in the journal still, the journal's ring knows their
// bytes (journal.Journal.StoredBytes) and there are fewer than scanLimit of them (a collect from next
// could not have stopped at its budget before hint).
func (m *Manager) wakeStart(from, next, hint pgq.Offset) (pgq.Offset, int64) {
	if hint <= from || from != next || hint-from >= scanLimit || from < m.j.FirstOffset() {
		return from, 0
	}
	n, ok := m.j.StoredBytes(from, hint-1)
	if !ok {
		return from, 0
	}
	return hint, n
}

// markDelivered records what collect read from offset from up to lastRead
// as delivered, unless the group was deleted or its lease changed hands
// meanwhile, renews the lease and fills res's offsets and lease.
func (m *Manager) markDelivered(g *group, name string, req *FetchRequest, gen uint64, from, lastRead pgq.Offset, nonFinal []pgq.Offset, res *fetchBatch) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return errf(ErrNotFound, "group %q not found", name)
	}
	if g.gen != gen {
		return errf(ErrFenced, "group %q: lease of member %q ended during the fetch (reset, expiry or takeover)", name, req.Member)
	}
	if lastRead >= from {
		// max: retention may have moved a filtered group's cursor and
		// delivery over records it skips while this fetch read (skipTo).
		g.delivered = max(g.delivered, lastRead)
		g.nonFinal = append(g.nonFinal, nonFinal...)
	}
	// Any fetch renews the lease.
	g.st.LeaseExpiry = max(g.st.LeaseExpiry, m.o.Now().Add(req.LeaseTTL).UnixMicro())
	res.next = g.delivered + 1
	res.committed = g.st.Cursor
	res.last = m.j.LastOffset()
	res.leaseExpires = time.UnixMicro(g.st.LeaseExpiry).UTC()
	res.gen = g.gen
	return nil
}

// observeTailDelivery observes the commit → delivery latency of the final
// records in recs. fetchData calls it only for records appended while the
// fetch waited, so that a backlog does not count as latency.
func (m *Manager) observeTailDelivery(recs []planned) {
	now := time.Now()
	for _, r := range recs {
		if r.final {
			m.tailDelivery.Observe(now.Sub(r.commit).Seconds())
		}
	}
}

// dataWake returns the channel a long poll of g that looked at the
// journal up to seen waits on for data, and the function to call when done
// waiting, which returns the wake's hint (waiter.hint; 0: none): changed
// (the journal's Changed, taken before seen) for a group without a
// filter, which every transaction passes, else a wake of the wakers
// registry, closed only by a transaction g's filter passes (wake.go).
func (m *Manager) dataWake(g *group, changed <-chan struct{}, seen pgq.Offset) (<-chan struct{}, func() pgq.Offset) {
	g.mu.Lock()
	f := g.st.Filter
	g.mu.Unlock()
	if f.IsZero() {
		return changed, func() pgq.Offset { return 0 }
	}
	w := m.wk.register(&f, seen)
	return w.ch, func() pgq.Offset {
		m.wk.unregister(w)
		select {
		case <-w.ch: // closed after hint was set
			return w.hint
		default:
			return 0
		}
	}
}

// waitData waits for the journal to change. When the fetch's timer fires
// it is re-armed to fire at once, so that the next round returns.
func (m *Manager) waitData(ctx context.Context, changed <-chan struct{}, timer *time.Timer) error {
	select {
	case <-changed:
	case <-timer.C:
		timer.Reset(0) // fire again: the next round returns
	case <-ctx.Done():
		return ctx.Err()
	case <-m.done:
		return ErrClosed
	}
	return nil
}

// collect chooses whole transactions from offset from: it reads each
// record once, checking it (record.Peek verifies its checksum) or, for a
// filtered group, decoding it to see whether any change passes, and keeps
// only its offset, so it holds one record at a time. A record the index
// says the group's filter rejects is passed over without a read when the
// index knows whether it ends its transaction, by its header alone when
// not (verdicts). carried is the bytes of records before from that
// count towards MaxBytes (wakeStart's). It returns the records to deliver, the last offset
// consumed (delivered or filtered out; from-1 when none), the non-final
// parts among them, and whether it stopped at its scan budget (scanCost)
// with more records to read. The limits apply between transactions only:
// a transaction is delivered whole.
func (m *Manager) collect(g *group, from pgq.Offset, carried int64, req FetchRequest) (res *fetchBatch, consumed pgq.Offset, nonFinal []pgq.Offset, more bool, err error) {
	g.mu.Lock()
	filter := g.st.Filter
	g.mu.Unlock()
	res = &fetchBatch{filter: filter, g: g}
	first, last := m.bounds()
	consumed = from - 1
	if from < first {
		return nil, 0, nil, false, errf(ErrOutOfRange, "group %q: next offset %d is below the journal start %d (removed by retention); reset the group", g.name, from, first)
	}
	var (
		bytes    = carried
		cost     int
		inTx     bool      // a transaction's first part was read, not its last
		unit     []planned // the parts of that transaction that pass
		unitNF   []pgq.Offset
		unitSize int64
	)
	var verdicts []index.Verdict // verdicts[i]: the record at winFrom+i
	if !filter.IsZero() {
		buf := verdictBufs.Get().(*[maxVerdictWindow]index.Verdict)
		defer verdictBufs.Put(buf)
		verdicts = buf[:0]
	}
	winFrom := from
	for off := from; off <= last; off++ {
		if !inTx && (len(res.recs) >= req.Max || (len(res.recs) > 0 && bytes >= req.MaxBytes)) {
			break
		}
		if !inTx && cost >= scanLimit*readCost {
			more = true
			break
		}
		if !filter.IsZero() && off-winFrom >= pgq.Offset(len(verdicts)) {
			// The second window and later ones are maxVerdictWindow: a
			// fetch that stops early reads few index entries, one that
			// passes over thousands opens few iterators.
			win := verdictWindow
			if n := len(verdicts); n > 0 {
				win = maxVerdictWindow
			}
			winFrom, verdicts = off, m.verdicts(g, filter, off, last, win, verdicts)
		}
		var v index.Verdict
		if i := off - winFrom; i < pgq.Offset(len(verdicts)) {
			v = verdicts[i]
		}
		p, pass, size, c, err := m.scanRecord(g, off, &filter, v)
		if err != nil {
			return nil, 0, nil, false, err
		}
		cost += c
		unitSize += int64(size)
		if pass {
			unit = append(unit, p)
		}
		if !p.final {
			inTx = true
			unitNF = append(unitNF, off)
			continue
		}
		res.recs = append(res.recs, unit...)
		nonFinal = append(nonFinal, unitNF...)
		bytes += unitSize
		consumed = off
		inTx, unit, unitNF, unitSize = false, unit[:0], unitNF[:0], 0
	}
	return res, consumed, nonFinal, more, nil
}

// A collect's scan budget is scanLimit records read from the journal. A
// record the index lets it pass over without a read costs 1/readCost of
// one: walking an index entry is some 20 times cheaper than a journal
// read (its lock, copy and header parse), so a group filtering one table
// of a thousand moves over 65,536 records of the others per collect, not
// 4,096, while a collect's work stays about what 4,096 reads cost.
const readCost = 16

// scanRecord is collect's look at the record at off: what it keeps of
// it, whether the group's filter passes it, its stored size for MaxBytes
// and what it costs of collect's budget. v is what the index says of it.
func (m *Manager) scanRecord(g *group, off pgq.Offset, filter *Filter, v index.Verdict) (planned, bool, int, int, error) {
	switch {
	case v.Rejected && v.End != index.EndUnknown:
		// The index's Bytes is the stored size ReadInfo would report.
		return planned{off: off, final: v.End == index.EndFinal}, false, int(v.Bytes), 1, nil
	case v.Rejected:
		p, size, err := m.passOver(g, off)
		return p, false, size, readCost, err
	}
	p, pass, size, err := m.planRecord(g, off, filter)
	return p, pass, size, readCost, err
}

// verdictWindow is how many offsets ahead collect first asks the index
// about: a fetch that stops after a few records reads a few index
// entries, not its whole scan budget. Later windows are
// maxVerdictWindow: each window is one walk of the index (one Pebble
// iterator, and the entries of its first block before the window's
// start decoded for nothing). A run of the thousand readers bench with
// 4,096 (32 KiB buffers) peaked at 210 MiB RSS against 145–174 MiB
// without: 1,024 keeps the buffers at 8 KiB.
const (
	verdictWindow    = 256
	maxVerdictWindow = 1024
)

// verdictBufs recycles collect's window buffers (maxVerdictWindow
// verdicts, 8 KiB): a thousand filtered groups fetch many times a
// second.
var verdictBufs = sync.Pool{New: func() any { return new([maxVerdictWindow]index.Verdict) }}

// verdicts is, for a filtered group, what the index knows of the records
// of [from, last] (index.Selector's Verdicts; at most win of them, in
// buf's storage when it has room): collect passes over the ones
// its filter rejects instead of decoding them. A group filtering one
// table of many would else decode every record of every other table on
// each fetch: with a thousand such groups, a thousand decodes of each
// journaled record. Empty without a filter, or when the index cannot say
// (collect then asks again at the next offset: one window per record at
// most, each refused at once).
func (m *Manager) verdicts(g *group, filter Filter, from, last pgq.Offset, win int, buf []index.Verdict) []index.Verdict {
	if filter.IsZero() || last < from {
		return buf[:0]
	}
	r := buf[:0]
	if n := int(min(uint64(last-from)+1, uint64(win))); cap(r) >= n {
		r = r[:n]
	} else {
		r = make([]index.Verdict, n)
	}
	if err := m.selector(g, filter).Verdicts(from, r); err != nil {
		return r[:0] // decode them, as without the index
	}
	return r
}

// passOver reads only the header of the record at off, which the
// group's filter does not pass (rejected) but of which the index does not
// know whether it ends its transaction (a block of an older pgq): that,
// and its stored size.
func (m *Manager) passOver(g *group, off pgq.Offset) (planned, int, error) {
	ri, size, err := m.j.ReadInfo(off)
	if err != nil {
		return planned{}, 0, m.fetchReadErr(g, off, err)
	}
	return planned{off: off, final: ri.Final, commit: ri.CommitTime}, size, nil
}

// readJournaled reads the record at off as journaled (a fresh copy).
func (m *Manager) readJournaled(g *group, off pgq.Offset) ([]byte, error) {
	raw, err := m.j.ReadRaw(off)
	if err != nil {
		return nil, m.fetchReadErr(g, off, err)
	}
	return raw, nil
}

// fetchReadErr is the error of a fetch's read of off: out of range when
// retention removed it meanwhile.
func (m *Manager) fetchReadErr(g *group, off pgq.Offset, err error) error {
	if errors.Is(err, journal.ErrNotFound) && off < m.j.FirstOffset() {
		return errf(ErrOutOfRange, "group %q: offset %d was removed by retention; reset the group", g.name, off)
	}
	return m.readErr(g, off, fmt.Errorf("consumers: fetch %q: %w", g.name, err))
}

// decodeRecord checks and decodes raw, the record at off, in place.
func decodeRecord(g *group, off pgq.Offset, raw []byte) (*pgq.Transaction, error) {
	tx := &pgq.Transaction{Offset: off}
	err := record.Check(raw)
	if err == nil {
		err = record.DecodeBody(raw[record.HeaderSize:], tx)
	}
	if err != nil {
		return nil, fmt.Errorf("consumers: fetch %q: offset %d: %w", g.name, off, err)
	}
	return tx, nil
}

// planRecord reads the record at off and returns what collect keeps of
// it, whether any of its changes pass filter, and its framed size.
// Without a filter it is only checked (record.Peek), else decoded.
func (m *Manager) planRecord(g *group, off pgq.Offset, filter *Filter) (planned, bool, int, error) {
	raw, err := m.readJournaled(g, off)
	if err != nil {
		return planned{}, false, 0, err
	}
	if filter.IsZero() {
		ri, err := record.Peek(raw)
		if err != nil {
			return planned{}, false, 0, fmt.Errorf("consumers: fetch %q: offset %d: %w", g.name, off, err)
		}
		return planned{off: off, final: ri.Final, commit: ri.CommitTime}, true, len(raw), nil
	}
	tx, err := decodeRecord(g, off, raw)
	if err != nil {
		return planned{}, false, 0, err
	}
	return planned{off: off, final: tx.Final, commit: tx.CommitTime}, filter.Apply(tx) != nil, len(raw), nil
}
