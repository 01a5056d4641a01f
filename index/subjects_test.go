package index

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

var (
	orders = Subject{Op: pgq.OpInsert, Schema: "public", Table: "orders"}
	other  = Subject{Op: pgq.OpInsert, Schema: "public", Table: "other"}
)

// subjectEntries are entries(from, n) with subjects by offset mod 5:
// orders; other; an update of orders and an insert of other; unknown; a
// truncate of other.
func subjectEntries(from pgq.Offset, n int) []Entry {
	es := entries(from, n)
	for i := range es {
		switch es[i].Offset % 5 {
		case 0:
			es[i].Subjects = NewSubjectSet([]Subject{orders})
		case 1:
			es[i].Subjects = NewSubjectSet([]Subject{other})
		case 2:
			es[i].Subjects = NewSubjectSet([]Subject{other, {Op: pgq.OpUpdate, Schema: "public", Table: "orders"}})
		case 3: // unknown
		case 4:
			es[i].Subjects = NewSubjectSet([]Subject{{Op: pgq.OpTruncate, Table: "public.other"}})
		}
	}
	return es
}

// ordersPred passes any change of public.orders; calls counts its calls.
func ordersPred(calls *int) func([]Subject) bool {
	return func(ss []Subject) bool {
		*calls++
		for _, s := range ss {
			if s.Schema == "public" && s.Table == "orders" {
				return true
			}
		}
		return false
	}
}

// bruteCount is the model: records whose offset mod 5 is 0, 2 or 3.
func bruteCount(es []Entry, from, to pgq.Offset) Count {
	var c Count
	for _, e := range es {
		if e.Offset < from || e.Offset > to {
			continue
		}
		if m := e.Offset % 5; m == 0 || m == 2 || m == 3 {
			c.Records++
			c.Bytes += int64(e.Bytes)
			if c.First == 0 {
				c.First, c.FirstTime = e.Offset, e.CommitTime.UTC()
			}
		}
	}
	return c
}

func wantCount(t *testing.T, s *Selector, es []Entry, from, to pgq.Offset) {
	t.Helper()
	got, err := s.Count(from, to)
	if err != nil {
		t.Fatalf("Count(%d, %d): %v", from, to, err)
	}
	want := bruteCount(es, from, to)
	if got.Records != want.Records || got.Bytes != want.Bytes || got.First != want.First || !got.FirstTime.Equal(want.FirstTime) {
		t.Fatalf("Count(%d, %d) = %+v, want %+v", from, to, got, want)
	}
}

// TestSelectorCounts: a Selector counts exactly the records whose subjects
// pass (and those of unknown subjects) over any range, from the memo or
// afresh, evaluating each subject set once; the counts survive a reopen
// (sets and the stored tail reloaded) and a truncation, and a Reset voids
// the memo.
func TestSelectorCounts(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	es := subjectEntries(1, 700)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < len(es); {
		n := min(1+rng.IntN(90), len(es)-i)
		mustAdd(t, ix, es[i:i+n])
		i += n
	}
	calls := 0
	s := ix.NewSelector(ordersPred(&calls))
	// A cursor and an end moving forward: the memo path.
	for from, to := pgq.Offset(1), pgq.Offset(50); to <= 700; from, to = from+pgq.Offset(rng.IntN(60)), to+pgq.Offset(rng.IntN(80)) {
		from = min(from, to+1)
		wantCount(t, s, es, from, to)
	}
	// A longer backlog moving forward.
	s2 := ix.NewSelector(ordersPred(&calls))
	for from, to := pgq.Offset(1), pgq.Offset(300); to <= 700; from, to = from+pgq.Offset(1+rng.IntN(40)), to+pgq.Offset(rng.IntN(40)) {
		wantCount(t, s2, es, from, to)
	}
	calls -= 4 // s2 evaluated the four sets once more
	// Backwards and arbitrary ranges: afresh.
	for range 50 {
		a, b := pgq.Offset(1+rng.IntN(700)), pgq.Offset(1+rng.IntN(700))
		wantCount(t, s, es, min(a, b), max(a, b))
	}
	if calls != 4 { // four known sets; unknown needs no call
		t.Fatalf("predicate called %d times, want once per set (4)", calls)
	}
	if got, err := ix.EntryAt(5); err != nil || got.Subjects != es[4].Subjects || !slices.Equal(got.Subjects.Subjects(), []Subject{orders}) {
		t.Fatalf("EntryAt(5).Subjects = %q, %v; want %q", got.Subjects, err, es[4].Subjects)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	ix = open(t, dir)
	defer ix.Close()
	s = ix.NewSelector(ordersPred(&calls))
	wantCount(t, s, es, 1, 700)
	mustAdd(t, ix, subjectEntries(701, 100))
	es = append(es, subjectEntries(701, 100)...)
	wantCount(t, s, es, 3, 800)
	if err := ix.TruncateFront(300); err != nil {
		t.Fatal(err)
	}
	wantCount(t, s, es, 300, 800)
	if _, err := s.Count(299, 800); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Count below the floor = %v, want ErrNotFound", err)
	}
	wantCount(t, s, es, 301, 800)

	// After a Reset the same offsets name other records.
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	es = subjectEntries(301, 500)
	for i := range es {
		es[i].Subjects = NewSubjectSet([]Subject{other}) // nothing passes
	}
	mustAdd(t, ix, es)
	if c, err := s.Count(301, 800); err != nil || c.Records != 0 || c.First != 0 {
		t.Fatalf("Count after Reset = %+v, %v; want nothing", c, err)
	}
}

// TestVersion2BlocksCountForEveryone: blocks written before the subject
// sets (version 2) still read, and their records have unknown subjects:
// every Selector counts them.
func TestVersion2BlocksCountForEveryone(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	es := subjectEntries(1, 200)
	mustAdd(t, ix, es)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	// Rewrite block 1 in version 2.
	rewriteBlock1(t, dir, encodeBlockV2)

	ix = open(t, dir)
	defer ix.Close()
	calls := 0
	c, err := ix.NewSelector(ordersPred(&calls)).Count(1, 200)
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(128) + bruteCount(es, 129, 200).Records
	if c.Records != want {
		t.Fatalf("Count = %d records, want %d (block 1 unknown: all of it)", c.Records, want)
	}
	if e, err := ix.EntryAt(7); err != nil || e.Subjects.Known() || e.CommitLSN != es[6].CommitLSN {
		t.Fatalf("EntryAt(7) of a version 2 block = %+v, %v", e, err)
	}
}

// encodeBlockV2 is encodeBlock as it was before the subject sets.
func encodeBlockV2(es []stored) []byte { return encodeBlockOld(es, blockVersionNoSets) }

// encodeBlockOld is encodeBlock as it was in version 2 (no set ids) or 3
// (set ids, no end flag).
func encodeBlockOld(es []stored, version byte) []byte {
	cur := encodeBlock(es)
	br, err := newBlockReader(es[0].Offset, cur)
	if err != nil {
		panic(err)
	}
	v := []byte{version}
	v = append(v, cur[1:len(cur)-len(br.r.b)]...) // the header
	var lsn pgq.LSN
	var us int64
	for i := range es {
		e := &es[i]
		ts := e.CommitTime.UnixMicro()
		v = appendVarint(v, int64(e.CommitLSN-lsn))
		v = appendVarint(v, int64(e.EndLSN-e.CommitLSN))
		v = appendVarint(v, ts-us)
		v = appendUvarint(v, uint64(e.Bytes))
		v = appendUvarint(v, uint64(e.Changes))
		if version == blockVersionNoEnd {
			v = appendUvarint(v, uint64(e.set))
		}
		lsn, us = e.CommitLSN, ts
	}
	return v
}

// rewriteBlock1 rewrites the stored block 1 of the closed index in dir
// with enc.
func rewriteBlock1(t *testing.T, dir string, enc func([]stored) []byte) []stored {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleQuiet{}})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(blockKey(1))
	if err != nil {
		t.Fatal(err)
	}
	old, err := decodeBlock(1, v)
	closer.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(blockKey(1), enc(old), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return old
}

// TestVersion3BlocksEndUnknown: blocks written before the end flag
// (version 3) still read, with their subject sets, and every entry's End
// unknown: Verdicts rejects what version 4 rejects, with the same sizes,
// and leaves the end to be read; the version 4 block after it knows it.
func TestVersion3BlocksEndUnknown(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	es := subjectEntries(1, 200)
	for i := range es {
		es[i].End = EndPart
		if i%3 != 0 {
			es[i].End = EndFinal
		}
	}
	mustAdd(t, ix, es)
	calls := 0
	want := make([]Verdict, 200)
	if err := ix.NewSelector(ordersPred(&calls)).Verdicts(1, want); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteBlock1(t, dir, func(s []stored) []byte { return encodeBlockOld(s, blockVersionNoEnd) })

	ix = open(t, dir)
	defer ix.Close()
	got := make([]Verdict, 200)
	if err := ix.NewSelector(ordersPred(&calls)).Verdicts(1, got); err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for i := range got {
		w := want[i]
		if w.End != es[i].End || int(w.Bytes) != es[i].Bytes {
			t.Fatalf("version 4: offset %d: %+v, want End %d Bytes %d", i+1, w, es[i].End, es[i].Bytes)
		}
		if i < blockLen {
			w.End = EndUnknown
		}
		if got[i] != w {
			t.Fatalf("offset %d after rewriting block 1 in version 3: %+v, want %+v", i+1, got[i], w)
		}
		if got[i].Rejected {
			rejected++
		}
	}
	if rejected == 0 || rejected == len(got) {
		t.Fatalf("test setup: %d of %d rejected", rejected, len(got))
	}
	if e, err := ix.EntryAt(7); err != nil || !e.Subjects.Known() || e.End != EndUnknown {
		t.Fatalf("EntryAt(7) of a version 3 block = %+v, %v", e, err)
	}
}

type pebbleQuiet struct{}

func (pebbleQuiet) Infof(string, ...any)  {}
func (pebbleQuiet) Errorf(string, ...any) {}
func (pebbleQuiet) Fatalf(string, ...any) {}

// TestStoredSubjects: the subjects read from an encoded record, in the
// record form and in the journal's compact form, are those of its changes.
func TestStoredSubjects(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	row := func(op pgq.Op, table string) pgq.Change {
		return pgq.Change{Op: op, Schema: "public", Table: table, Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}
	}
	tx := &pgq.Transaction{Xid: 7, CommitLSN: 100, EndLSN: 200, Final: true, Changes: []pgq.Change{
		row(pgq.OpInsert, "orders"), row(pgq.OpInsert, "orders"), row(pgq.OpUpdate, "other"), row(pgq.OpInsert, "orders"),
		{Op: pgq.OpTruncate, Tables: []string{"public.a", "public.b"}},
		{Op: pgq.OpDDL, Prefix: "pgq.ddl", Content: []byte(`{"object":"public.\"MyT\""}`), Transactional: true},
		{Op: pgq.OpMessage, Prefix: "p", Content: []byte("x"), Transactional: true},
	}}
	want := subjectsOf(tx.Changes)
	if n := len(want.Subjects()); n != 6 {
		t.Fatalf("subjectsOf: %d subjects %q, want 6", n, want.Subjects())
	}
	v1 := record.Append(nil, tx)
	got, end, err := storedSubjects(v1, nil)
	if err != nil || NewSubjectSet(got) != want || end != EndFinal {
		t.Fatalf("record form: %q, %v; want %q", got, err, want.Subjects())
	}
	var rels [][]byte
	compact, err := record.Compact(nil, v1, func(rel []byte) (uint64, error) {
		rels = append(rels, append([]byte(nil), rel...))
		return uint64(len(rels)), nil
	})
	if err != nil || compact[0] != record.VersionCompact {
		t.Fatalf("Compact: %v", err)
	}
	rel := func(id uint64) ([]byte, error) {
		if id == 0 || id > uint64(len(rels)) {
			return nil, errors.New("no such relation")
		}
		return rels[id-1], nil
	}
	e := EntryOfStored(tx, compact, len(compact), len(tx.Changes), rel)
	if e.Subjects != want || e.End != EndFinal {
		t.Fatalf("compact form: %q end %d, want %q final", e.Subjects.Subjects(), e.End, want.Subjects())
	}
	tx.Final = false // EntryOfStored reads the end from the bytes, not tx
	if e := EntryOfStored(tx, compact, len(compact), len(tx.Changes), rel); e.End != EndFinal {
		t.Fatalf("compact form with tx.Final false: end %d, want final", e.End)
	}
	part := *tx
	part.Part, part.Final = 1, false
	if _, end, err := storedSubjects(record.Append(nil, &part), nil); err != nil || end != EndPart {
		t.Fatalf("a non-final part: end %d, %v; want EndPart", end, err)
	}
	// A record that does not parse is indexed with unknown subjects.
	if e := EntryOfStored(tx, compact[:20], 20, 7, nil); e.Subjects.Known() {
		t.Fatalf("truncated record: subjects %q, want unknown", e.Subjects.Subjects())
	}
}

func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// TestSelectorConcurrentWithAdd: counts taken while Add extends the index
// (and while the dictionary grows) are those of the offsets they cover: a
// record is never visible before its set is.
func TestSelectorConcurrentWithAdd(t *testing.T) {
	ix := openTemp(t)
	all := subjectEntries(1, 3000)
	for i := range all {
		if all[i].Offset%97 == 0 { // new sets keep appearing
			all[i].Subjects = NewSubjectSet([]Subject{{Op: pgq.OpDelete, Schema: "s", Table: string(rune('a' + i%26))}})
		}
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < len(all); i += 37 {
			if err := ix.Add(all[i:min(i+37, len(all))]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	calls := 0
	s := ix.NewSelector(ordersPred(&calls))
	from := pgq.Offset(1)
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		to := ix.LastOffset()
		if to == 0 {
			continue
		}
		from = min(from+3, to)
		got, err := s.Count(from, to)
		if err != nil {
			t.Fatalf("Count(%d, %d): %v", from, to, err)
		}
		want := uint64(0)
		for _, e := range all[from-1 : to] {
			// A set the dictionary did not know yet would count (unknown).
			if m := e.Offset % 5; e.Offset%97 != 0 && (m == 0 || m == 2 || m == 3) {
				want++
			}
		}
		if got.Records != want {
			t.Fatalf("Count(%d, %d) = %d records, want %d", from, to, got.Records, want)
		}
	}
}

// TestEntryOfReads: the entry of a backfill chunk's record taken from
// its producer's word (EntryOfReads) equals the one read from its bytes
// (EntryOfStored), in the record form and the journal's compact form.
func TestEntryOfReads(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "note", TypeOID: 25}}
	enc := record.NewReadsEncoder(nil, "public", "orders", cols)
	for i := range 50 {
		enc.Add([]pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(i))}, {Kind: pgq.ValueText, Data: []byte("row")}})
	}
	hdr := &pgq.Transaction{Xid: 9, CommitLSN: 300, EndLSN: 400, Final: true}
	v1, n, err := record.RestampInPlace(enc.Finish("b1"), hdr)
	if err != nil || n != 50 {
		t.Fatalf("RestampInPlace: %d changes, %v", n, err)
	}
	var rels [][]byte
	compact, err := record.Compact(nil, v1, func(rel []byte) (uint64, error) {
		rels = append(rels, append([]byte(nil), rel...))
		return uint64(len(rels)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rel := func(id uint64) ([]byte, error) { return rels[id-1], nil }
	got := EntryOfReads(hdr, len(compact), n, "public", "orders")
	for name, b := range map[string][]byte{"record form": v1, "compact form": compact} {
		want := EntryOfStored(hdr, b, len(compact), n, rel)
		if !want.Subjects.Known() || got != want {
			t.Fatalf("%s: EntryOfReads %+v (subjects %q), EntryOfStored %+v (subjects %q)", name, got, got.Subjects.Subjects(), want, want.Subjects.Subjects())
		}
	}
}
