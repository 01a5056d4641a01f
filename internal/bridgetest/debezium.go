package bridgetest

import (
	"strconv"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// AppendNonEvents journals a transaction of an update, a ddl change and
// an update, and one of a gap change alone: changes Debezium has no
// event for, between two events.
func (s *Source) AppendNonEvents() {
	s.t.Helper()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	a, b := s.nextUpdate(), s.nextUpdate()
	ddl := pgq.Change{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true,
		Content: []byte(`{"command":"ALTER TABLE","object":"public.t","schema":"public","object_type":"table","statement":"ALTER TABLE t ADD note text"}`)}
	batch := s.journal([]pgq.Change{a, ddl, b}, []pgq.Change{{Op: pgq.OpGap, FromLSN: s.lastEnd, ToLSN: s.lastEnd + 50}})
	s.IDs[bridge.MessageID(batch[0].CommitLSN, 0, "")] = keyOf(a)
	s.IDs[bridge.MessageID(batch[0].CommitLSN, 2, "")] = keyOf(b)
	s.Changes += 2
}

// AppendKeyChange journals a transaction of an update that changes the
// row's key from -1 to -2, between two updates: a delete and a create in
// Debezium's format. It returns the change's id (MessageID).
func (s *Source) AppendKeyChange() string {
	s.t.Helper()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	a, b := s.nextUpdate(), s.nextUpdate()
	rekey := s.nextUpdate()
	rekey.New[0].Data = []byte("-2")
	rekey.Old = []pgq.Value{{Kind: pgq.ValueText, Data: []byte("-1")}, {Kind: pgq.ValueNull}}
	batch := s.journal([]pgq.Change{a, rekey, b})
	s.IDs[bridge.MessageID(batch[0].CommitLSN, 0, "")] = keyOf(a)
	s.IDs[bridge.MessageID(batch[0].CommitLSN, 2, "")] = keyOf(b)
	s.Changes += 2
	return bridge.MessageID(batch[0].CommitLSN, 1, "")
}

// AppendDelete journals a transaction of a delete of row key -3 between
// two updates, and one of a truncate of public.t: a delete (followed by
// a tombstone on Kafka) and an event with a null Debezium key. It
// returns the ids (MessageID) of the delete and of the truncate.
func (s *Source) AppendDelete() (del, truncate string) {
	s.t.Helper()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	a, b := s.nextUpdate(), s.nextUpdate()
	d := s.nextUpdate()
	d.Op, d.Old, d.OldKind, d.New = pgq.OpDelete, []pgq.Value{{Kind: pgq.ValueText, Data: []byte("-3")}, {Kind: pgq.ValueNull}}, pgq.OldKey, nil
	tr := pgq.Change{Op: pgq.OpTruncate, Tables: []string{"public.t"}}
	batch := s.journal([]pgq.Change{a, d, b}, []pgq.Change{tr})
	s.IDs[bridge.MessageID(batch[0].CommitLSN, 0, "")] = keyOf(a)
	s.IDs[bridge.MessageID(batch[0].CommitLSN, 2, "")] = keyOf(b)
	s.Changes += 2
	return bridge.MessageID(batch[0].CommitLSN, 1, ""), bridge.MessageID(batch[1].CommitLSN, 0, "")
}

// nextUpdate is an update of the next key (s.Mu held).
func (s *Source) nextUpdate() pgq.Change {
	s.seq++
	k := (s.seq * 7919) % s.keys
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 20}}
	return pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: cols,
		New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(k))}, {Kind: pgq.ValueText, Data: []byte(strconv.Itoa(s.seq))}}}
}

// keyOf is the key nextUpdate gave c.
func keyOf(c pgq.Change) int {
	k, _ := strconv.Atoi(string(c.New[0].Data))
	return k
}

// journal journals a transaction of each list of changes (s.Mu held)
// and returns them.
func (s *Source) journal(txs ...[]pgq.Change) []*pgq.Transaction {
	s.t.Helper()
	var batch []*pgq.Transaction
	for _, changes := range txs {
		s.lastEnd += 100
		batch = append(batch, &pgq.Transaction{Xid: uint32(s.lastEnd), CommitLSN: s.lastEnd - 10, EndLSN: s.lastEnd,
			CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true, Changes: changes})
	}
	recs := journal.Records(batch)
	if err := s.Journal.AppendRecords(recs); err != nil {
		s.t.Fatal(err)
	}
	entries := make([]index.Entry, len(batch))
	for i, tx := range batch {
		entries[i] = index.EntryOf(tx, recs[i].Bytes, len(tx.Changes))
	}
	if err := s.Index.Add(entries); err != nil {
		s.t.Fatal(err)
	}
	return batch
}
