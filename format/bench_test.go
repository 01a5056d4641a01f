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
