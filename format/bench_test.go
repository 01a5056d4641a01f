package format_test

import (
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// benchEvent renders the first event of tx in format f with o, b.N
// times into one reused buffer.
func benchEvent(b *testing.B, tx *pgq.Transaction, f format.Format, o format.Options) {
	r, err := format.New(f, o)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendEvent(buf[:0], tx, 0, 0)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkRender renders the insert of Debezium's customers example in
// each format of the table (pgq's own is the reference).
func BenchmarkRender(b *testing.B) {
	tx := eventsTx()
	for _, s := range format.Formats() {
		b.Run(s.Name, func(b *testing.B) {
			benchEvent(b, tx, s.Format, format.Options{Database: "shop", Slot: "pgq"})
		})
	}
}

// BenchmarkRenderSchemas renders the same insert as Debezium's event
// without and with its Connect schema (Options.Schemas): the cached
// schema is copied, not built, per event.
func BenchmarkRenderSchemas(b *testing.B) {
	tx := eventsTx()
	for _, schemas := range []bool{false, true} {
		name := "payload"
		if schemas {
			name = "schemas"
		}
		b.Run(name, func(b *testing.B) {
			benchEvent(b, tx, format.Debezium, format.Options{Database: "shop", Schemas: schemas})
		})
	}
}
