package format_test

import (
	"testing"

	"github.com/pgq-dev/pgq/format"
)

// BenchmarkRender renders the insert of Debezium's customers example in
// each format of the table (pgq's own is the reference).
func BenchmarkRender(b *testing.B) {
	tx := eventsTx()
	for _, s := range format.Formats() {
		b.Run(s.Name, func(b *testing.B) {
			r, err := format.New(s.Format, format.Options{Database: "shop", Slot: "pgq"})
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = r.AppendEvent(buf[:0], tx, 0, 0)
			}
			b.SetBytes(int64(len(buf)))
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
			r, err := format.New(format.Debezium, format.Options{Database: "shop", Schemas: schemas})
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = r.AppendEvent(buf[:0], tx, 0, 0)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
