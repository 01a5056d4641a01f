package consumers

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// Wake-ups of long polls by filter.
//
// A long poll that found nothing waits for the journal to grow. Waiting on
// the journal's Changed channel wakes every waiter on every append: with a
// thousand filtered groups waiting, each transaction would make a thousand
// fetches read and decode it, only for all but the few whose filter it
// passes to wait again (a thundering herd, CPU that grows with waiters ×
// transactions). So the long polls of filtered groups wait in a wakers
// registry instead. The registry takes in each appended record once,
// gathers the subjects of a transaction over its parts (index.Subject:
// op and table, a truncate's tables, a DDL's object) and, when the final
// part comes, wakes exactly the waiters whose filter one of the subjects
// passes (Filter.subjectPasses, the rule of lag and retention). Where the
// subjects come from:
//
//   - with ManagerOptions.WakeFromAppends, from Manager.Appended, which
//     the journal's writer calls with every durable batch and the index
//     entries it made of it (the server does, from the committer's
//     after-append hook): the subject sets the index stores, computed once
//     per record, so a wake costs no record read;
//   - without, one goroutine of the registry reads and decodes each
//     appended record (journal.Read, index.SubjectsOf) while anyone waits.
//
// A waiter never misses a transaction it passes:
//
//   - it registers with seen, the journal's last offset when its fetch
//     last looked; a transaction whose final part is at or before seen was
//     read by that fetch, one after it is either evaluated against the
//     waiter when the registry takes it in, or was taken in before the
//     waiter registered and is in recent (the subjects of the last
//     recentMax transactions), which registration checks;
//   - what the registry cannot judge wakes everyone it concerns: a
//     transaction with more subjects than maxWakeSubjects or with
//     unknown subjects, a record it cannot read, a transaction whose
//     first parts it did not take in (it keeps nothing while nobody
//     waits), registration past what recent covers;
//   - a gap passes every filter (Filter.Match).
//
// Waking is closing the waiter's channel; the fetch then reads the journal
// itself as before, so a spurious wake costs one read and is never wrong.
// A waiter woken by a transaction the registry judged (not an unknown
// one) gets a hint, the transaction's first part, when no transaction of
// more than one part ended since the waiter's seen: every transaction
// between seen and the hint was then judged against the waiter, rejected,
// and is one record. The fetch starts collecting at the hint instead of
// walking those records' index entries again (fetch.go, wakeStart): a
// group filtering one table of a thousand is woken about once a second
// and would walk a thousand entries each time.
// Groups without a filter keep waiting on Changed: every transaction
// passes them. Waiters with only literal table patterns (public.orders,
// the usual filter) are found through a map by table; the others (globs,
// ops only) are matched one by one per transaction.
//
// Cost per transaction while any filtered long poll waits: a map lookup
// per subject plus one match per non-literal waiter, and, without
// WakeFromAppends, one journal read and decode per record; while none
// waits, nothing (with WakeFromAppends an offset is noted per record).

// recentMax is how many transactions the registry remembers for waiters
// that register after it read them.
const recentMax = 256

// maxWakeSubjects bounds the subjects gathered for one transaction; a
// transaction with more wakes every waiter.
const maxWakeSubjects = 64

// waiter is one filtered long poll waiting in the registry.
type waiter struct {
	f    *Filter
	seen pgq.Offset
	ch   chan struct{} // closed on wake
	keys []string      // literal tables it is filed under in byTable; nil: in others
	woke bool
	// hint, when not zero (set before ch is closed), is the first part of
	// the transaction that woke the waiter, of which the registry knows
	// that every transaction ending in (seen, hint) has one part only and
	// does not pass f: the fetch may start collecting there (fetchData).
	hint pgq.Offset
}

// recentTx is a transaction the registry read: its final part and
// subjects (unknown: wake everyone).
type recentTx struct {
	final   pgq.Offset
	subj    []index.Subject
	unknown bool
}

// wakers is the registry of filtered long polls (see above). Records are
// taken in (processed moved) by its goroutine (run), or, when fed, by
// the callers of feed only.
type wakers struct {
	j    *journal.Journal
	fed  bool          // subjects come from feed; run reads no record
	kick chan struct{} // buffered(1): a waiter registered
	done <-chan struct{}

	// Wakes counts waiters woken (tests and the wake profile read it).
	Wakes atomic.Uint64

	mu      sync.Mutex
	n       int // registered waiters
	byTable map[string]map[*waiter]struct{}
	others  map[*waiter]struct{}
	// processed is the last record read; recent covers every transaction
	// whose final part is in [recentFrom, processed].
	processed  pgq.Offset
	recentFrom pgq.Offset
	recent     []recentTx // ring, oldest first once full
	acc        []index.Subject
	accUnknown bool // acc misses parts of the open transaction
	// accFirst is the first part of the open transaction (valid when
	// !accUnknown); lastMulti the final part of the newest transaction
	// of more than one part or of unknown parts: a hint is given only to
	// a waiter that had seen it (waiter.hint).
	accFirst  pgq.Offset
	lastMulti pgq.Offset
	// decoded caches the subjects of the sets seen (a few per table), so
	// that a set is decoded once, not per record.
	decoded map[index.SubjectSet][]index.Subject
}

// maxDecoded bounds wakers.decoded; it is emptied when full.
const maxDecoded = 4096

func newWakers(j *journal.Journal, fed bool, done <-chan struct{}) *wakers {
	return &wakers{j: j, fed: fed, done: done, kick: make(chan struct{}, 1),
		byTable: map[string]map[*waiter]struct{}{}, others: map[*waiter]struct{}{},
		decoded: map[index.SubjectSet][]index.Subject{}}
}

// tableKey keys byTable.
func tableKey(schema, table string) string { return schema + "\x00" + table }

// literalKeys returns the tables f names when every pattern is literal
// and f has some; nil otherwise.
func literalKeys(f *Filter) []string {
	if len(f.Tables) == 0 {
		return nil
	}
	pats := f.pats
	if len(pats) != len(f.Tables) {
		pats = compilePatterns(f.Tables)
	}
	keys := make([]string, 0, len(pats))
	for i := range pats {
		s, t, ok := pats[i].literal()
		if !ok {
			return nil
		}
		keys = append(keys, tableKey(s, t))
	}
	return keys
}

// register files a waiter for filter f (not zero) whose fetch looked at
// the journal up to seen; its channel is closed when a transaction after
// seen passes f. Call unregister when done waiting.
func (wk *wakers) register(f *Filter, seen pgq.Offset) *waiter {
	w := &waiter{f: f, seen: seen, ch: make(chan struct{})}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	switch {
	case wk.n == 0 && wk.processed <= seen:
		// Nobody waited, so the registry kept nothing: start after
		// seen. Whether a transaction is open there is unknown until
		// the next record shows its part number.
		wk.processed, wk.recentFrom, wk.recent = seen, seen+1, wk.recent[:0]
		wk.acc, wk.accUnknown = wk.acc[:0], true
	case wk.processed > seen && wk.passedSince(w):
		wk.wakeLocked(w)
		return w
	}
	w.keys = literalKeys(f)
	if w.keys == nil {
		wk.others[w] = struct{}{}
	}
	for _, k := range w.keys {
		m := wk.byTable[k]
		if m == nil {
			m = map[*waiter]struct{}{}
			wk.byTable[k] = m
		}
		m[w] = struct{}{}
	}
	wk.n++
	if wk.n == 1 {
		select {
		case wk.kick <- struct{}{}:
		default:
		}
	}
	return w
}

// passedSince reports whether a transaction the registry read after
// w.seen passes w's filter, or may (not covered by recent).
func (wk *wakers) passedSince(w *waiter) bool {
	if w.seen+1 < wk.recentFrom {
		return true
	}
	for i := range wk.recent {
		r := &wk.recent[i]
		if r.final > w.seen && (r.unknown || passesAny(w.f, r.subj)) {
			return true
		}
	}
	return false
}

func passesAny(f *Filter, subj []index.Subject) bool {
	for _, s := range subj {
		if f.subjectPasses(s) {
			return true
		}
	}
	return false
}

// unregister removes w (woken or not).
func (wk *wakers) unregister(w *waiter) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if !w.woke {
		wk.removeLocked(w)
	}
}

func (wk *wakers) removeLocked(w *waiter) {
	if w.keys == nil {
		delete(wk.others, w)
	}
	for _, k := range w.keys {
		m := wk.byTable[k]
		delete(m, w)
		if len(m) == 0 {
			delete(wk.byTable, k)
		}
	}
	wk.n--
}

// wakeLocked closes w's channel, once.
func (wk *wakers) wakeLocked(w *waiter) {
	if w.woke {
		return
	}
	w.woke = true
	close(w.ch)
	wk.Wakes.Add(1)
}

// run reads what is appended while anyone waits and wakes the waiters
// (see above), until done is closed. While nobody waits it waits only for
// a registration, so an idle registry costs ingest nothing. A fed
// registry's run reads nothing: it only wakes everyone at the end.
func (wk *wakers) run() {
	if wk.fed {
		<-wk.done
		wk.wakeAll()
		return
	}
	for {
		changed := wk.j.Changed() // before LastOffset: a later append closes it
		wk.mu.Lock()
		active, from := wk.n > 0, wk.processed+1
		wk.mu.Unlock()
		if !active {
			changed = nil
		}
		for off, last := from, wk.j.LastOffset(); active && off <= last; off++ {
			wk.readOne(off)
		}
		select {
		case <-changed:
		case <-wk.kick:
		case <-wk.done:
			wk.wakeAll()
			return
		}
	}
}

// readOne takes in the record at off, read from the journal.
func (wk *wakers) readOne(off pgq.Offset) {
	tx, err := wk.j.Read(off)
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if off != wk.processed+1 {
		return // a registration moved the start meanwhile
	}
	if err != nil {
		// Unreadable (removed by retention, corrupt): let the fetches
		// find out.
		wk.processed = off
		wk.finishLocked(off, true)
		return
	}
	wk.takeLocked(off, tx.Part, tx.Final, index.SubjectsOf(tx.Changes))
}

// feed takes in the records of a durable batch (Manager.Appended): each
// one's offset, part and final flag from batch, its subjects from the
// index entry made of it. It reads no record.
func (wk *wakers) feed(batch []*journal.Record, entries []index.Entry) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	for i, r := range batch {
		off := r.Tx.Offset
		switch {
		case off <= wk.processed:
			continue // a registration started after it
		case wk.n == 0:
			// Nobody waits: keep nothing. A waiter whose fetch looked
			// before off is woken at registration (recent does not
			// cover off), one that looked after starts there.
			wk.processed, wk.recentFrom, wk.recent = off, off+1, wk.recent[:0]
			wk.acc, wk.accUnknown = wk.acc[:0], true
			continue
		case off != wk.processed+1:
			// Records went by untaken (not with a dense feed): what
			// they held is unknown.
			wk.processed = off - 1
			wk.finishLocked(off-1, true)
			wk.accUnknown = true
		}
		var set index.SubjectSet // unknown unless the entry is off's
		if i < len(entries) && entries[i].Offset == off {
			set = entries[i].Subjects
		}
		wk.takeLocked(off, r.Tx.Part, r.Tx.Final, set)
	}
}

// takeLocked takes in the record at off, processed+1, part part of its
// transaction (final or not), of subject set set ("" unknown): it
// gathers its subjects and, on a final part, wakes the waiters the
// transaction passes.
func (wk *wakers) takeLocked(off pgq.Offset, part uint32, final bool, set index.SubjectSet) {
	wk.processed = off
	if part == 0 {
		wk.acc, wk.accUnknown, wk.accFirst = wk.acc[:0], false, off
	}
	if !wk.accUnknown {
		subj, known := wk.subjects(set)
		wk.accUnknown = !known // beyond the index's bounds
		for _, s := range subj {
			if !slices.Contains(wk.acc, s) {
				wk.acc = append(wk.acc, s)
			}
		}
		wk.accUnknown = wk.accUnknown || len(wk.acc) > maxWakeSubjects
	}
	if final {
		wk.finishLocked(off, wk.accUnknown)
	}
}

// subjects returns the subjects of set, decoded once per distinct set;
// false when the set is unknown.
func (wk *wakers) subjects(set index.SubjectSet) ([]index.Subject, bool) {
	if !set.Known() {
		return nil, false
	}
	if s, ok := wk.decoded[set]; ok {
		return s, true
	}
	s := set.Subjects()
	if len(wk.decoded) >= maxDecoded {
		clear(wk.decoded)
	}
	wk.decoded[set] = s
	return s, true
}

// finishLocked ends the transaction whose final part is at off: it wakes
// the waiters it passes and remembers it in recent.
func (wk *wakers) finishLocked(off pgq.Offset, unknown bool) {
	subj := append([]index.Subject(nil), wk.acc...)
	wk.acc, wk.accUnknown = wk.acc[:0], false
	first, multiBefore := wk.accFirst, wk.lastMulti
	if unknown || first != off {
		wk.lastMulti = off
	}
	if len(wk.recent) == recentMax {
		wk.recentFrom = wk.recent[0].final + 1
		copy(wk.recent, wk.recent[1:])
		wk.recent = wk.recent[:recentMax-1]
	}
	wk.recent = append(wk.recent, recentTx{final: off, subj: subj, unknown: unknown})
	wake := func(w *waiter) {
		if w.seen < off {
			if multiBefore <= w.seen {
				w.hint = first
			}
			wk.removeLocked(w)
			wk.wakeLocked(w)
		}
	}
	if unknown {
		wk.wakeAllLocked(off)
		return
	}
	for _, s := range subj {
		if s.Op == pgq.OpTruncate || s.Op == pgq.OpDDL || s.Op == pgq.OpGap {
			// Not filed by table: match every literal waiter too.
			for _, m := range wk.byTable {
				for w := range m {
					if w.f.subjectPasses(s) {
						wake(w)
					}
				}
			}
			continue
		}
		for w := range wk.byTable[tableKey(s.Schema, s.Table)] {
			if w.f.subjectPasses(s) {
				wake(w)
			}
		}
	}
	for w := range wk.others {
		if passesAny(w.f, subj) {
			wake(w)
		}
	}
}

// wakeAllLocked wakes every waiter that had not seen off.
func (wk *wakers) wakeAllLocked(off pgq.Offset) {
	for _, m := range wk.byTable {
		for w := range m {
			if w.seen < off {
				wk.removeLocked(w)
				wk.wakeLocked(w)
			}
		}
	}
	for w := range wk.others {
		if w.seen < off {
			wk.removeLocked(w)
			wk.wakeLocked(w)
		}
	}
}

// wakeAll wakes every waiter (the Manager closes).
func (wk *wakers) wakeAll() {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.wakeAllLocked(^pgq.Offset(0))
}
