package ingest_test

import "testing"

// TestPartOrdinals: every part of a multi-part transaction, cut in memory
// or from spilled chunks of a streamed one, names its changes by their
// ordinal within the whole transaction (0, 1, 2, ... across parts), which
// bridge message ids are made of.
func TestPartOrdinals(t *testing.T) {
	db := stSetup(t)
	r := stStart(t, db, 4<<10)
	db.Exec(t, "INSERT INTO t SELECT g, repeat('y', 100) FROM generate_series(1, 150) g") // in memory
	db.Exec(t, "BEGIN", stInsert("t", 1001, 4000), "COMMIT")                              // streamed
	txs := stWaitTxs(t, r.dir, 2)
	for i, tx := range txs {
		if len(tx.parts) < 2 {
			t.Fatalf("transaction %d has %d part(s)", i, len(tx.parts))
		}
		n := uint32(0)
		for _, p := range tx.parts {
			if p.FirstOrdinal != n {
				t.Fatalf("transaction %d part %d: first ordinal %d, want %d", i, p.Part, p.FirstOrdinal, n)
			}
			for c := range p.Changes {
				if o := p.Ordinal(c); o != n {
					t.Fatalf("transaction %d part %d change %d: ordinal %d, want %d", i, p.Part, c, o, n)
				}
				n++
			}
		}
	}
}
