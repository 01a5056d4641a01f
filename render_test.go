package pgq

import (
	"encoding/json"
	"fmt"
	"testing"
)

func BenchmarkAppendJSON(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			tx := benchTx(n)
			buf := AppendJSON(nil, tx)
			if !json.Valid(buf) {
				b.Fatalf("invalid JSON: %s", buf)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendJSON(buf[:0], tx)
			}
		})
	}
}
