package pgoutput

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

var update = flag.Bool("update", false, "re-capture testdata/pgoutput from a live server and rewrite the golden files")

const testdataDir = "../testdata/pgoutput"

// captures names the committed captures: protocol version per file.
var captures = []struct {
	name  string
	proto int
}{
	{"proto1", 1},
	{"proto2-streaming", 2},
}

func capturePath(name string) string { return filepath.Join(testdataDir, name+".bin") }
func goldenPath(name string) string  { return filepath.Join(testdataDir, name+".golden") }

// TestCapture records the workload from a live server into testdata. It
// only runs with -update:
//
//	go test ./pgoutput -run 'TestCapture|TestGolden' -update
func TestCapture(t *testing.T) {
	if !*update {
		t.Skip("re-capture with -update")
	}
	c := pgtestShared(t)
	for _, cp := range captures {
		t.Run(cp.name, func(t *testing.T) {
			db := c.NewDB(t)
			db.Exec(t, schemaSQL...)
			slot := fmt.Sprintf("pgq_capture_%d", cp.proto)
			setupSlot(t, db, slot)
			runWorkload(t, db)
			msgs := stream(t, db, slot, cp.proto)
			if err := os.MkdirAll(testdataDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := writeCapture(capturePath(cp.name), msgs); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d messages", cp.name, len(msgs))
		})
	}
}

// TestGolden decodes the committed captures and compares the rendering
// with the golden files (rewritten with -update).
func TestGolden(t *testing.T) {
	for _, cp := range captures {
		t.Run(cp.name, func(t *testing.T) {
			msgs, err := readCapture(capturePath(cp.name))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			d := NewDecoder()
			for i, raw := range msgs {
				m, err := d.Decode(raw)
				if err != nil {
					t.Fatalf("message %d (%q): %v", i, raw[0], err)
				}
				got = appendRender(got, m)
				got = append(got, '\n')
			}
			if d.InStream() {
				t.Error("capture ends inside a stream")
			}
			if *update {
				if err := os.WriteFile(goldenPath(cp.name), got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath(cp.name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
				for i := 0; i < len(gl) || i < len(wl); i++ {
					var g, w []byte
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if !bytes.Equal(g, w) {
						t.Fatalf("%s line %d:\n got %s\nwant %s", goldenPath(cp.name), i+1, g, w)
					}
				}
			}
		})
	}
}

// appendRender renders a message on one stable line.
func appendRender(b []byte, m Message) []byte {
	ts := format.CommitTime
	switch m := m.(type) {
	case *Begin:
		return fmt.Appendf(b, "begin final_lsn=%s xid=%d time=%s", m.FinalLSN, m.Xid, ts(m.CommitTime))
	case *Commit:
		return fmt.Appendf(b, "commit flags=%d commit_lsn=%s end_lsn=%s time=%s", m.Flags, m.CommitLSN, m.EndLSN, ts(m.CommitTime))
	case *Origin:
		return fmt.Appendf(b, "origin commit_lsn=%s name=%q", m.CommitLSN, m.Name)
	case *Relation:
		b = fmt.Appendf(b, "relation xid=%d id=%d %s.%s identity=%c cols=[", m.Xid, m.ID, m.Namespace, m.Name, m.ReplicaIdentity)
		for i, c := range m.Columns {
			if i > 0 {
				b = append(b, ' ')
			}
			b = fmt.Appendf(b, "%s:%d", c.Name, c.TypeOID)
			if c.Key {
				b = append(b, ":key"...)
			}
		}
		return append(b, ']')
	case *TypeMsg:
		return fmt.Appendf(b, "type xid=%d id=%d %s.%s", m.Xid, m.ID, m.Namespace, m.Name)
	case *StreamStart:
		return fmt.Appendf(b, "stream_start xid=%d first=%t", m.Xid, m.First)
	case *StreamStop:
		return append(b, "stream_stop"...)
	case *StreamCommit:
		return fmt.Appendf(b, "stream_commit xid=%d flags=%d commit_lsn=%s end_lsn=%s time=%s", m.Xid, m.Flags, m.CommitLSN, m.EndLSN, ts(m.CommitTime))
	case *StreamAbort:
		b = fmt.Appendf(b, "stream_abort xid=%d subxid=%d", m.Xid, m.SubXid)
		if m.AbortLSN != 0 {
			b = fmt.Appendf(b, " abort_lsn=%s time=%s", m.AbortLSN, ts(m.AbortTime))
		}
		return b
	case *Row:
		b = append(b, "row xid="...)
		b = strconv.AppendUint(b, uint64(m.Xid), 10)
		if m.Change.Op == pgq.OpMessage {
			b = append(b, " message_lsn="...)
			b = append(b, m.MessageLSN.String()...)
		}
		b = append(b, ' ')
		return format.AppendChangeJSON(b, &m.Change)
	}
	return fmt.Appendf(b, "unknown %T", m)
}
