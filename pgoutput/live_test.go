package pgoutput

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/pgq-dev/pgq"
)

// TestLive streams the workload from a live server with both protocol
// versions and checks decoded values, not just their rendering.
func TestLive(t *testing.T) {
	c := pgtestShared(t)
	for _, proto := range []int{1, 2} {
		t.Run(fmt.Sprintf("proto%d", proto), func(t *testing.T) {
			db := c.NewDB(t)
			db.Exec(t, schemaSQL...)
			slot := fmt.Sprintf("pgq_live_%d", proto)
			setupSlot(t, db, slot)
			runWorkload(t, db)
			msgs := stream(t, db, slot, proto)
			checkLive(t, proto, msgs)
		})
	}
}

func checkLive(t *testing.T, proto int, msgs [][]byte) {
	d := NewDecoder()
	var (
		rows           []*Row
		inTx           bool
		sawType        bool
		sawOrigin      bool
		streamStarts   int
		streamCommits  int
		subAborts      int
		topAborts      int
		streamedRowXid = map[uint32]bool{}
	)
	for i, raw := range msgs {
		m, err := d.Decode(raw)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		switch m := m.(type) {
		case *Begin:
			if inTx || d.InStream() {
				t.Fatalf("message %d: nested begin", i)
			}
			inTx = true
			if m.Xid == 0 || m.FinalLSN == 0 {
				t.Errorf("begin: %+v", m)
			}
		case *Commit:
			if !inTx {
				t.Fatalf("message %d: commit outside a transaction", i)
			}
			inTx = false
			if m.EndLSN <= m.CommitLSN {
				t.Errorf("commit: end %s <= commit %s", m.EndLSN, m.CommitLSN)
			}
		case *TypeMsg:
			if m.Name == "mood" && m.Namespace == "public" {
				sawType = true
			}
		case *Origin:
			sawOrigin = m.Name == "pgq_test_origin"
		case *StreamStart:
			streamStarts++
			if !d.InStream() {
				t.Error("InStream false after StreamStart")
			}
		case *StreamStop:
			if d.InStream() {
				t.Error("InStream true after StreamStop")
			}
		case *StreamCommit:
			streamCommits++
		case *StreamAbort:
			if m.Xid == m.SubXid {
				topAborts++
			} else {
				subAborts++
			}
		case *Row:
			if d.InStream() {
				if m.Xid == 0 {
					t.Errorf("message %d: row inside a stream without xid", i)
				}
				streamedRowXid[m.Xid] = true
			} else if m.Xid != 0 {
				t.Errorf("message %d: row outside a stream with xid %d", i, m.Xid)
			}
			rows = append(rows, m)
		}
	}
	if !sawType {
		t.Error("no Type message for the enum")
	}
	if !sawOrigin {
		t.Error("no Origin message")
	}
	if proto == 2 {
		if streamStarts < 2 || streamCommits != 1 || subAborts != 1 || topAborts != 1 {
			t.Errorf("streams: %d starts, %d commits, %d subxact aborts, %d aborts; want >=2, 1, 1, 1",
				streamStarts, streamCommits, subAborts, topAborts)
		}
	} else if streamStarts != 0 {
		t.Errorf("protocol 1 streamed %d blocks", streamStarts)
	}

	find := func(op pgq.Op, table string, n int) *pgq.Change {
		t.Helper()
		for _, r := range rows {
			if r.Change.Op == op && r.Change.Table == table {
				if n == 0 {
					return &r.Change
				}
				n--
			}
		}
		t.Fatalf("no %s #%d on %s", op, n, table)
		return nil
	}
	val := func(c *pgq.Change, col string, old bool) pgq.Value {
		t.Helper()
		v, _, ok := c.Get(col, old)
		if !ok {
			t.Fatalf("%s %s: no column %q (old=%t)", c.Op, c.Table, col, old)
		}
		return v
	}
	text := func(c *pgq.Change, col string, old bool, want string) {
		t.Helper()
		v := val(c, col, old)
		if v.Kind != pgq.ValueText || string(v.Data) != want {
			t.Errorf("%s %s.%s (old=%t) = %c %q, want text %q", c.Op, c.Table, col, old, v.Kind, v.Data, want)
		}
	}

	ins := find(pgq.OpInsert, "t_all", 0)
	if ins.Schema != "public" || len(ins.New) != 15 || ins.Old != nil || ins.OldKind != pgq.OldNone {
		t.Errorf("insert t_all: %+v", ins)
	}
	text(ins, "id", false, "1")
	text(ins, "n", false, "12345.67890")
	text(ins, "b", false, "t")
	text(ins, "by", false, `\xdeadbeef`)
	text(ins, "jb", false, `{"b": {"c": true}}`)
	text(ins, "ts", false, "2024-02-29 12:34:56.789012+00")
	text(ins, "u", false, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	text(ins, "arr", false, "{1,2,NULL,4}")
	text(ins, "m", false, "happy")
	text(ins, "txt", false, "hello \"world\"\nünï")
	if v := val(ins, "nul", false); v.Kind != pgq.ValueNull || v.Data != nil {
		t.Errorf("nul = %+v, want NULL", v)
	}
	tm := pgtype.NewMap()
	_, col, _ := ins.Get("n", false)
	if got, err := val(ins, "n", false).Decode(tm, col.TypeOID); err != nil {
		t.Error(err)
	} else if num, ok := got.(pgtype.Numeric); !ok || num.Int.Int64() != 1234567890 || num.Exp != -5 {
		t.Errorf("numeric decodes to %#v", got)
	}
	nulls := find(pgq.OpInsert, "t_all", 1)
	for i, v := range nulls.New {
		if i > 0 && v.Kind != pgq.ValueNull {
			t.Errorf("all-NULL row column %s: kind %c", nulls.Columns[i].Name, v.Kind)
		}
	}

	// REPLICA IDENTITY DEFAULT: no old image unless the key changes, then
	// the key only.
	up := find(pgq.OpUpdate, "t_all", 0)
	if up.Old != nil || up.OldKind != pgq.OldNone {
		t.Errorf("update without key change has old %c %v", up.OldKind, up.Old)
	}
	text(up, "b", false, "f")
	text(up, "n", false, "-0.00001")
	keyUp := find(pgq.OpUpdate, "t_all", 1)
	if keyUp.OldKind != pgq.OldKey {
		t.Errorf("key update old kind %c, want K", keyUp.OldKind)
	}
	text(keyUp, "id", true, "2")
	text(keyUp, "id", false, "100")
	if _, _, ok := keyUp.Get("txt", true); ok {
		t.Error("OldKey image exposes a non-key column")
	}
	del := find(pgq.OpDelete, "t_all", 0)
	if del.New != nil || del.OldKind != pgq.OldKey {
		t.Errorf("delete: new %v kind %c", del.New, del.OldKind)
	}
	text(del, "id", true, "100")

	// REPLICA IDENTITY FULL: the whole old row.
	fu := find(pgq.OpUpdate, "t_full", 0)
	if fu.OldKind != pgq.OldFull {
		t.Errorf("full update old kind %c, want O", fu.OldKind)
	}
	text(fu, "v", true, "one")
	text(fu, "v", false, "uno")
	fd := find(pgq.OpDelete, "t_full", 0)
	if fd.OldKind != pgq.OldFull || val(fd, "v", true).Kind != pgq.ValueNull {
		t.Errorf("full delete: %c %+v", fd.OldKind, fd.Old)
	}

	// Unchanged TOAST.
	ti := find(pgq.OpInsert, "t_toast", 0)
	if v := val(ti, "big", false); v.Kind != pgq.ValueText || len(v.Data) != 6400 {
		t.Errorf("toast insert: kind %c len %d", v.Kind, len(v.Data))
	}
	tu := find(pgq.OpUpdate, "t_toast", 0)
	if v := val(tu, "big", false); v.Kind != pgq.ValueUnchangedTOAST || v.Data != nil {
		t.Errorf("toast update big kind %c, want u", v.Kind)
	}
	text(tu, "small", false, "2")

	// Replica identity index: key change sends K with the index column.
	ku := find(pgq.OpUpdate, "t_keyidx", 0)
	if ku.OldKind != pgq.OldKey {
		t.Errorf("keyidx update old kind %c", ku.OldKind)
	}
	text(ku, "k", true, "10")

	// Truncates.
	tr := find(pgq.OpTruncate, "", 0)
	if !tr.Cascade || tr.RestartIdentity || fmt.Sprint(tr.Tables) != "[public.parent public.child]" {
		t.Errorf("truncate cascade: %+v", tr)
	}
	tr = find(pgq.OpTruncate, "", 1)
	if tr.Cascade || !tr.RestartIdentity {
		t.Errorf("truncate restart identity: %+v", tr)
	}

	// Messages.
	var msgsSeen []string
	for _, r := range rows {
		if c := r.Change; c.Op == pgq.OpMessage {
			if r.MessageLSN == 0 {
				t.Errorf("message %q without LSN", c.Prefix)
			}
			msgsSeen = append(msgsSeen, fmt.Sprintf("%s:%t:%x", c.Prefix, c.Transactional, c.Content))
		}
	}
	want := "[pgq:true:68656c6c6f pgq-bin:false:00ff10 pgq-empty:true: pgq:true:696e206120626967206f6e65 pgq-capture-end:false:656e64]"
	if got := fmt.Sprint(msgsSeen); got != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}

	// Savepoint rollback and the big transactions: rows 3 (rolled back
	// subtransaction) and 3000.. (aborted) are only ever seen streamed.
	ids := map[string]bool{}
	for _, r := range rows {
		if r.Change.Table == "t_big" && r.Change.Op == pgq.OpInsert {
			ids[string(r.Change.New[0].Data)] = true
		}
	}
	for _, id := range []string{"1", "2", "4", "5", "1000", "1399"} {
		if !ids[id] {
			t.Errorf("t_big insert %s missing", id)
		}
	}
	if ids["3"] {
		t.Error("rolled back savepoint row 3 was sent")
	}
	if proto == 1 && (ids["2000"] || ids["3000"]) {
		t.Error("protocol 1 sent rows of an aborted (sub)transaction")
	}
	if proto == 2 && (!ids["2000"] || !ids["3000"]) {
		t.Error("protocol 2 did not stream the aborted (sub)transaction rows")
	}
}
