package format_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/internal/servertest"
)

// corpusDir holds Debezium's type corpus (see its README.md).
const corpusDir = "testdata/debezium-corpus"

// corpusFile is expected.json: Debezium's corpus statements with the
// values Debezium's own tests expect for them, transcribed from
// AbstractRecordsProducerTest (and two RecordsStreamProducerIT tests).
type corpusFile struct {
	Setup      []string          `json:"setup"`
	Statements []corpusStatement `json:"statements"`
}

type corpusStatement struct {
	Name  string `json:"name"`
	SQL   string `json:"sql"`
	Table string `json:"table"` // schema.table
	Op    string `json:"op"`
	// Before and After are the images Debezium's tests expect (nil: the
	// image is null), column by column as Kafka Connect's JsonConverter
	// writes them.
	Before map[string]json.RawMessage `json:"before"`
	After  map[string]json.RawMessage `json:"after"`
	// Differs are the columns pgq writes otherwise than Debezium, each
	// with pgq's value and why; pgq is held to that value too.
	Differs map[string]struct {
		PGQ    json.RawMessage `json:"pgq"`
		Reason string          `json:"reason"`
	} `json:"differs"`
	// Unasserted are columns Debezium's test leaves unchecked.
	Unasserted map[string]string `json:"unasserted"`
}

func loadCorpus(t *testing.T) corpusFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c corpusFile
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	for _, s := range c.Statements {
		for col, d := range s.Differs {
			if d.Reason == "" || len(d.PGQ) == 0 {
				t.Fatalf("%s: difference in %s needs pgq's value and a reason", s.Name, col)
			}
		}
	}
	return c
}

// debeziumDefaults are format.Options in Debezium's default value modes
// (decimal.handling.mode=precise, time.precision.mode=adaptive,
// interval.handling.mode=numeric), which expected.json is written in.
func debeziumDefaults() format.Options {
	return format.Options{Decimal: format.DecimalPrecise, Time: format.TimeAdaptive, Interval: format.IntervalNumeric, Now: fixedNow}
}

// corpusVariants are the envelopes the corpus is checked in: each
// carries the same values (an envelope with schemas carries its event
// in "payload", which debeziumPayload unwraps, and its schema, which
// checkConnect holds to the payload as Kafka Connect's JsonConverter
// does).
var corpusVariants = []struct {
	name string
	opts func() format.Options
}{
	{"schemaless", debeziumDefaults},
	{"schemas", func() format.Options {
		o := debeziumDefaults()
		o.Schemas = true
		return o
	}},
}

// corpusRun is the journal's record of one run of the corpus: the
// changes of the corpus statements in order, then those of extra.
type corpusRun struct {
	tx      []*pgq.Transaction // the transaction of each change
	changes []int              // the change's index in its transaction
}

// corpusExtra are statements run after the corpus, for the consumers'
// decoding: an update under REPLICA IDENTITY FULL (Flink's debezium-json
// needs its before image).
var corpusExtra = []string{
	"ALTER TABLE text_table REPLICA IDENTITY FULL",
	"UPDATE text_table SET x = '<foo>baz</foo>' WHERE pk = 1",
}

// runCorpus runs the corpus through a real PostgreSQL and pgq (ingest,
// journal) and returns the journaled changes of its statements (one
// transaction each) and of corpusExtra's update.
func runCorpus(t *testing.T, c corpusFile) corpusRun {
	t.Helper()
	e := servertest.Start(t, cluster, nil)
	for _, s := range c.Setup {
		if name, ok := strings.CutPrefix(s, "@"); ok {
			ddl, err := os.ReadFile(filepath.Join(corpusDir, name))
			if err != nil {
				t.Fatal(err)
			}
			s = string(ddl)
		}
		e.DB.Exec(t, s)
	}
	j := serverparts.Of(e.S).Journal
	from := j.LastOffset()
	for _, s := range c.Statements {
		e.DB.Exec(t, s.SQL)
	}
	e.DB.Exec(t, corpusExtra...)
	const marker = "corpus end"
	e.DB.Exec(t, "INSERT INTO t (v) VALUES ('"+marker+"')")
	var run corpusRun
	deadline := time.Now().Add(60 * time.Second)
	for off := from + 1; ; {
		if off > j.LastOffset() {
			if time.Now().After(deadline) {
				t.Fatalf("the corpus did not reach the journal (at offset %d)", j.LastOffset())
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		tx, err := j.Read(off)
		if err != nil {
			t.Fatalf("journal offset %d: %v", off, err)
		}
		off++
		for i, ch := range tx.Changes {
			switch {
			case ch.Table == "t" && ch.Op == pgq.OpInsert && len(ch.New) == 2 && string(ch.New[1].Data) == marker:
				return run
			case ch.Op == pgq.OpInsert || ch.Op == pgq.OpUpdate || ch.Op == pgq.OpDelete:
				run.tx = append(run.tx, tx)
				run.changes = append(run.changes, i)
			}
		}
	}
}

// debeziumPayload returns the event of a Debezium message: its payload
// when it has one (the JSON converter with schemas), else the message.
func debeziumPayload(msg []byte) (map[string]json.RawMessage, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(msg, &root); err != nil {
		return nil, err
	}
	if root == nil {
		return nil, fmt.Errorf("root is not an object")
	}
	if p, ok := root["payload"]; ok {
		root = nil
		if err := json.Unmarshal(p, &root); err != nil || root == nil {
			return nil, fmt.Errorf("payload is no object: %s", p)
		}
	}
	return root, nil
}

// TestDebeziumCorpus runs Debezium's type corpus (testdata/debezium-corpus:
// Debezium's DDL and INSERT statements) through a real PostgreSQL and
// pgq (ingest → journal → format) and compares every column of every
// event, in Debezium's default value modes, with the value Debezium's
// own tests expect; where pgq differs, expected.json says so, with
// pgq's value and the reason, and any other difference fails. Then
// every message of the run is decoded as Flink's debezium-json does.
func TestDebeziumCorpus(t *testing.T) {
	c := loadCorpus(t)
	run := runCorpus(t, c)
	if want := len(c.Statements) + 1; len(run.tx) != want {
		t.Fatalf("%d changes journaled, want %d (the corpus' statements and the update)", len(run.tx), want)
	}
	for _, v := range corpusVariants {
		t.Run(v.name, func(t *testing.T) {
			r, err := format.New(format.Debezium, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			// One message per event, as the bridges publish them.
			var msgs [][]byte
			for i := range run.tx {
				for k := range r.Events(run.tx[i], run.changes[i]) {
					msgs = append(msgs, r.AppendEvent(nil, run.tx[i], run.changes[i], k))
				}
			}
			t.Run("values", func(t *testing.T) {
				for i, s := range c.Statements {
					ch := &run.tx[i].Changes[run.changes[i]]
					if got := ch.Schema + "." + ch.Table; got != s.Table {
						t.Fatalf("%s: change %d is of %s, want %s", s.Name, i, got, s.Table)
					}
					checkCorpusEvent(t, s, r.AppendEvent(nil, run.tx[i], run.changes[i], 0))
				}
			})
			t.Run("flink", func(t *testing.T) {
				checkFlinkDecodes(t, msgs)
			})
			if v.opts().Schemas {
				t.Run("connect", func(t *testing.T) {
					for _, m := range msgs {
						checkConnect(t, m)
					}
				})
			}
		})
	}
}

// checkCorpusEvent compares the event of statement s with expected.json.
func checkCorpusEvent(t *testing.T, s corpusStatement, ev []byte) {
	t.Helper()
	p, err := debeziumPayload(ev)
	if err != nil {
		t.Errorf("%s: %v: %s", s.Name, err, ev)
		return
	}
	if op := string(p["op"]); op != `"`+s.Op+`"` {
		t.Errorf("%s: op %s, want %q", s.Name, op, s.Op)
	}
	checkCorpusImage(t, s, "before", s.Before, p["before"])
	checkCorpusImage(t, s, "after", s.After, p["after"])
}

// checkCorpusImage compares one image column by column: a column
// Debezium's test expects must be there with the value, byte for byte
// (compact JSON: 3.0 is not 3); one listed as differing must have pgq's
// listed value; one Debezium's test does not assert may have any; any
// other column fails.
func checkCorpusImage(t *testing.T, s corpusStatement, which string, want map[string]json.RawMessage, got json.RawMessage) {
	t.Helper()
	var cols map[string]json.RawMessage
	if err := json.Unmarshal(got, &cols); err != nil {
		t.Errorf("%s: %s %s: %v", s.Name, which, got, err)
		return
	}
	if want == nil {
		if cols != nil {
			t.Errorf("%s: %s %s, want null", s.Name, which, got)
		}
		return
	}
	if cols == nil {
		t.Errorf("%s: %s is null, want %d columns", s.Name, which, len(want))
		return
	}
	for _, col := range slices.Sorted(func(yield func(string) bool) {
		for k := range cols {
			if !yield(k) {
				return
			}
		}
	}) {
		g := compactJSON(cols[col])
		if w, ok := want[col]; ok {
			if g != compactJSON(w) {
				t.Errorf("%s: %s.%s = %s, Debezium writes %s", s.Name, which, col, g, compactJSON(w))
			}
			continue
		}
		if d, ok := s.Differs[col]; ok && which == "after" {
			if g != compactJSON(d.PGQ) {
				t.Errorf("%s: %s.%s = %s, expected.json lists pgq's as %s (%s)", s.Name, which, col, g, compactJSON(d.PGQ), d.Reason)
			}
			continue
		}
		if _, ok := s.Unasserted[col]; ok && which == "after" {
			continue
		}
		t.Errorf("%s: %s.%s = %s is not in expected.json", s.Name, which, col, g)
	}
	for col := range want {
		if _, ok := cols[col]; !ok {
			t.Errorf("%s: %s has no column %s", s.Name, which, col)
		}
	}
	if which == "after" {
		for col := range s.Differs {
			if _, ok := cols[col]; !ok {
				t.Errorf("%s: %s has no column %s (listed as differing)", s.Name, which, col)
			}
		}
	}
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "invalid JSON: " + string(b)
	}
	return buf.String()
}
