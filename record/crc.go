package record

import (
	"encoding/binary"
	"hash/crc32"
)

// The CRC32C of a record's body is the CRC of its head (header fields,
// relations) combined with the CRC of its changes, which Restamp and
// Compact leave as they are: they derive the changes' CRC from the
// stored one and the old head's, and combine it with the new head's, so
// a megabyte record is not summed again for a header of a few bytes
// (zlib's crc32_combine, for the Castagnoli polynomial). A record whose
// stored CRC did not match its bytes keeps not matching them.

// castagnoliReversed is the Castagnoli polynomial, bit-reversed.
const castagnoliReversed = 0x82f63b78

// multModP multiplies a and b modulo the polynomial (reflected bits).
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// x2nTable[k] is x^(2^k) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// shiftFor is x^(8n) modulo the polynomial: the factor that moves a CRC
// past n more bytes.
func shiftFor(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
	}
	return p
}

// crcCombine is the CRC32C of a followed by b, from a's CRC, b's and
// b's length.
func crcCombine(crcA, crcB uint32, lenB int) uint32 {
	return multModP(shiftFor(lenB), crcA) ^ crcB
}

// crcSuffix is the CRC32C of a body's bytes after its first head bytes,
// from the body's CRC, the head's CRC and the suffix's length.
func crcSuffix(crcBody, crcHead uint32, lenSuffix int) uint32 {
	return crcBody ^ multModP(shiftFor(lenSuffix), crcHead)
}

// resealHead writes into rec's header the checksum of its body when the
// body's bytes from at on are those of a body old whose bytes from oldAt
// on they were: rec[HeaderSize:at] is a new head, old's stored checksum
// carries the rest. old and rec may share storage, old's header read
// before rec's is written.
func resealHead(rec []byte, at int, oldCRC, oldHeadCRC uint32) {
	n := len(rec) - at
	sum := crcCombine(crc32.Checksum(rec[HeaderSize:at], castagnoli), crcSuffix(oldCRC, oldHeadCRC, n), n)
	binary.LittleEndian.PutUint32(rec[1:], sum)
}
