package record

import (
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestCRCCombine: the combined and derived checksums equal the ones
// summed over the bytes, for splits at every kind of length.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sum := func(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
	for _, n := range []int{0, 1, 7, 8, 100, 4096, 1<<20 + 3, len(data)} {
		for _, at := range []int{0, min(1, n), n / 3, n} {
			a, b := data[:at], data[at:n]
			if got, want := crcCombine(sum(a), sum(b), len(b)), sum(data[:n]); got != want {
				t.Fatalf("combine of %d+%d bytes: %08x, want %08x", len(a), len(b), got, want)
			}
			if got, want := crcSuffix(sum(data[:n]), sum(a), len(b)), sum(b); got != want {
				t.Fatalf("suffix of %d+%d bytes: %08x, want %08x", len(a), len(b), got, want)
			}
		}
	}
}

// TestChecksumCarriesCorruption: restamping or compacting a record
// carries its stored checksum over instead of summing its changes again,
// so a change damaged before the restamp still fails the check after it.
func TestChecksumCarriesCorruption(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 25}}
	chunk := &pgq.Transaction{Final: true, Backfill: "bf", Changes: []pgq.Change{
		{Op: pgq.OpRead, Schema: "s", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueText, Data: []byte("one")}}},
	}}
	buf := AppendRestampable(nil, chunk)
	buf[len(buf)-5] ^= 0x20 // inside the change's value or the backfill id
	out, _, err := RestampInPlace(buf, &pgq.Transaction{Xid: 5, CommitLSN: 0x10, EndLSN: 0x20, Final: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(out); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Check of a restamped damaged record = %v, want ErrChecksum", err)
	}
	intern := func([]byte) (uint64, error) { return 1, nil }
	if _, _, err := CompactInPlace(out, nil, intern); !errors.Is(err, ErrChecksum) {
		t.Fatalf("CompactInPlace of a damaged record = %v, want ErrChecksum", err)
	}
}
