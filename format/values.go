package format

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
)

// Type OIDs pgtype does not name.
const (
	moneyOID       = 790
	bitOID         = 1560
	varbitOID      = 1562
	timetzOID      = 1266
	timetzArrayOID = 1270
)

// arrayElem returns the element type of an array type: pgtype's arrays,
// and timetz[], which pgtype does not know (Debezium renders it as an
// array of ZonedTime).
func (r *Renderer) arrayElem(typ uint32) (uint32, bool) {
	if typ == timetzArrayOID {
		return timetzOID, true
	}
	if t, ok := r.m.TypeForOID(typ); ok {
		if ac, ok := t.Codec.(*pgtype.ArrayCodec); ok {
			return ac.ElementType.OID, true
		}
	}
	return 0, false
}

// appendValue appends one column value as Debezium's JSON converter
// (schemas disabled) writes it with the connector's default settings,
// except where the package doc says otherwise. typ is the column's value
// type (a domain's base type), typmod its type modifier (-1 for none or
// unknown).
func (r *Renderer) appendValue(b []byte, typ uint32, typmod int32, v pgq.Value) []byte {
	switch v.Kind {
	case pgq.ValueNull:
		return append(b, "null"...)
	case pgq.ValueUnchangedTOAST:
		return r.appendUnavailable(b, typ)
	case pgq.ValueBinary:
		return appendBase64(b, v.Data)
	}
	return r.appendText(b, typ, typmod, string(v.Data))
}

// appendText renders PostgreSQL's text form s of a value of type typ
// with type modifier typmod.
func (r *Renderer) appendText(b []byte, typ uint32, typmod int32, s string) []byte {
	switch typ {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		if isCanonicalInt(s) {
			return append(b, s...)
		}
	case pgtype.Float4OID:
		return appendFloat(b, s, 32)
	case pgtype.Float8OID:
		return appendFloat(b, s, 64)
	case pgtype.BoolOID:
		switch s {
		case "t":
			return append(b, "true"...)
		case "f":
			return append(b, "false"...)
		}
	case pgtype.NumericOID:
		return r.appendNumeric(b, typmod, s)
	case moneyOID:
		return r.appendMoney(b, s)
	case pgtype.DateOID:
		if d, ok := parseDate(s); ok {
			return strconv.AppendInt(b, d, 10)
		}
	case pgtype.TimeOID:
		if us, rest, ok := parseClock(s); ok && rest == "" {
			return strconv.AppendInt(b, r.timeUnits(us, typmod), 10)
		}
	case timetzOID:
		if z, ok := zonedTime(s); ok {
			return appendString(b, z)
		}
	case pgtype.TimestampOID:
		if us, ok := parseTimestamp(s, false); ok {
			return strconv.AppendInt(b, r.timeUnits(us, typmod), 10)
		}
	case pgtype.TimestamptzOID:
		return appendString(b, zonedTimestamp(s))
	case pgtype.PointOID:
		if x, y, ok := parsePoint(s); ok {
			return appendPoint(b, x, y)
		}
	case pgtype.IntervalOID:
		var iv pgtype.Interval
		if err := r.m.Scan(pgtype.IntervalOID, pgtype.TextFormatCode, []byte(s), &iv); err == nil && iv.Valid {
			if r.o.Interval == IntervalString {
				return appendString(b, isoInterval(iv))
			}
			return strconv.AppendInt(b, microDuration(iv), 10)
		}
	case pgtype.ByteaOID:
		return appendBytea(b, s)
	case bitOID, varbitOID:
		return appendBits(b, s, oneBit(typ, typmod))
	default:
		if elem, ok := r.arrayElem(typ); ok {
			return r.appendArray(b, typ, elem, typmod, s)
		}
	}
	return appendString(b, s)
}

// appendFloat renders a float4 (bits 32) or float8 (64) as Kafka
// Connect's JSON converter writes a FLOAT32 or FLOAT64: Java's
// Float.toString or Double.toString, 3.0 where PostgreSQL writes 3, so
// that a consumer that keeps the number's text (Jackson's FloatNode, a
// JDBC sink's type inference) sees a double. NaN and the infinities are
// no JSON numbers: their names.
func appendFloat(b []byte, s string, bits int) []byte {
	if !isJSONNumber(s) {
		return appendString(b, s)
	}
	if f, err := strconv.ParseFloat(s, bits); err == nil {
		return appendJavaFloat(b, f, bits)
	}
	return append(b, s...)
}

// appendBytea renders bytea's hex text as base64; other text stays a
// string.
func appendBytea(b []byte, s string) []byte {
	if h, ok := strings.CutPrefix(s, `\x`); ok {
		if raw, err := hex.DecodeString(h); err == nil {
			return appendBase64(b, raw)
		}
	}
	return appendString(b, s)
}

// appendArray renders an array as a JSON array of its elements, each
// rendered by the element type. A multi-dimensional array is flattened
// (Debezium's arrays have one dimension). The array column's type
// modifier is its elements' (numeric(10,3)[]).
func (r *Renderer) appendArray(b []byte, typ, elem uint32, typmod int32, s string) []byte {
	var elems []*string
	// An array type pgtype does not know (timetz[]) is read as text[]:
	// PostgreSQL's array literal is the same for every element type
	// whose delimiter is a comma (all but box).
	scanAs := typ
	if _, ok := r.m.TypeForOID(typ); !ok {
		scanAs = pgtype.TextArrayOID
	}
	if err := r.m.Scan(scanAs, pgtype.TextFormatCode, []byte(s), &elems); err != nil {
		return appendString(b, s)
	}
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		if e == nil {
			b = append(b, "null"...)
			continue
		}
		b = r.appendText(b, elem, typmod, *e)
	}
	return append(b, ']')
}

// appendNumeric renders a numeric of type modifier typmod as the decimal
// mode says.
func (r *Renderer) appendNumeric(b []byte, typmod int32, s string) []byte {
	if r.o.Schemas && r.o.Decimal == DecimalPrecise && (s == "NaN" || s == "Infinity" || s == "-Infinity") {
		// No Decimal holds them, and the schema says bytes (or a
		// VariableScaleDecimal struct): null, which the optional column
		// takes.
		return append(b, "null"...)
	}
	switch s {
	case "NaN":
		if r.o.Decimal == DecimalString {
			return appendString(b, "NAN")
		}
		return appendString(b, s)
	case "Infinity", "-Infinity":
		// Debezium's SpecialValueDecimal: in string mode the name of
		// its constant.
		if r.o.Decimal == DecimalString {
			if s == "Infinity" {
				return appendString(b, "POSITIVE_INFINITY")
			}
			return appendString(b, "NEGATIVE_INFINITY")
		}
		return appendString(b, s)
	}
	switch r.o.Decimal {
	case DecimalDouble:
		return appendDouble(b, s)
	case DecimalPrecise:
		unscaled, scale, ok := parseDecimal(s)
		if !ok {
			return appendString(b, s)
		}
		if declared, ok := numericScale(typmod); ok {
			// Connect's Decimal: the unscaled value at the column's scale,
			// which the schema carries.
			return appendBase64(b, twosComplement(rescale(unscaled, scale, declared)))
		}
		// VariableScaleDecimal, trailing zeros stripped as Debezium's
		// PostgresValueConverter does for a column of variable scale.
		unscaled, scale = stripTrailingZeros(unscaled, scale)
		b = append(b, `{"scale":`...)
		b = strconv.AppendInt(b, int64(scale), 10)
		b = append(b, `,"value":`...)
		b = appendBase64(b, twosComplement(unscaled))
		return append(b, '}')
	}
	return appendString(b, s)
}

// appendMoney renders money as a decimal of scale 2 (Debezium's default
// money.fraction.digits). PostgreSQL writes money in its lc_monetary
// locale ("$1,234.11", "-$1,234.11"): the digits are read back, a
// fraction being the last separator followed by exactly two digits; a
// value that does not read so is written as its text.
func (r *Renderer) appendMoney(b []byte, s string) []byte {
	neg := strings.ContainsAny(s, "-(")
	var digits []byte
	frac := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
		case c == '.' || c == ',':
			frac = len(digits)
		}
	}
	if len(digits) == 0 {
		return appendString(b, s)
	}
	if frac < 0 || len(digits)-frac != 2 {
		digits = append(digits, '0', '0')
	}
	unscaled, ok := new(big.Int).SetString(string(digits), 10)
	if !ok {
		return appendString(b, s)
	}
	if neg {
		unscaled.Neg(unscaled)
	}
	switch r.o.Decimal {
	case DecimalPrecise:
		return appendBase64(b, twosComplement(unscaled))
	case DecimalDouble:
		f, _ := new(big.Rat).SetFrac(unscaled, big.NewInt(100)).Float64()
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	return appendString(b, new(big.Rat).SetFrac(unscaled, big.NewInt(100)).FloatString(2))
}

func appendDouble(b []byte, s string) []byte {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return appendString(b, s)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// parseDecimal reads PostgreSQL's numeric text ("-12.345") as an unscaled
// integer and a scale.
func parseDecimal(s string) (*big.Int, int, bool) {
	intPart, frac, _ := strings.Cut(s, ".")
	n, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok || strings.ContainsAny(s, "eE_+") {
		return nil, 0, false
	}
	return n, len(frac), true
}

// numericScale is the scale a numeric column's type modifier declares
// (PostgreSQL's NUMERIC_TYPMOD_SCALE: numeric(10,3) is ((10<<16)|3)+4),
// false for a numeric of variable scale: no modifier (or unknown: records
// journaled before pgq kept it), or a negative scale (PostgreSQL 15's
// numeric(2,-3)), which keeps the struct that states its scale.
func numericScale(typmod int32) (int, bool) {
	const varhdrsz = 4
	if typmod < varhdrsz {
		return 0, false
	}
	scale := int(((typmod-varhdrsz)&0x7ff)^1024) - 1024
	return scale, scale >= 0
}

// rescale returns n, an unscaled value of scale from, at scale to
// (PostgreSQL's text of a numeric(p,s) value has s fraction digits: the
// two differ only for values written otherwise).
func rescale(n *big.Int, from, to int) *big.Int {
	switch {
	case to > from:
		return n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(to-from)), nil))
	case to < from:
		return n.Quo(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(from-to)), nil))
	}
	return n
}

// stripTrailingZeros drops the trailing zeros of the fraction of n at
// scale (Java's BigDecimal.stripTrailingZeros, a negative scale then set
// back to 0): 22.2200 is 2222 at scale 2, 0.00 is 0 at scale 0.
func stripTrailingZeros(n *big.Int, scale int) (*big.Int, int) {
	ten := big.NewInt(10)
	q, m := new(big.Int), new(big.Int)
	for scale > 0 {
		q.QuoRem(n, ten, m)
		if m.Sign() != 0 {
			break
		}
		n, q = q, n
		scale--
	}
	return n, scale
}

// timeUnits converts microseconds of a time or timestamp of type
// modifier typmod (its precision, -1 for none: 6) to what the time
// precision mode writes: milliseconds for a precision of 0 to 3 in
// TimeAdaptive (Debezium's io.debezium.time.Time and Timestamp),
// microseconds otherwise (MicroTime, MicroTimestamp).
func (r *Renderer) timeUnits(us int64, typmod int32) int64 {
	if r.o.Time == TimeAdaptive && typmod >= 0 && typmod <= 3 {
		return floorDiv(us, 1000) // Java's Instant.toEpochMilli
	}
	return us
}

// twosComplement returns n as the shortest big-endian two's complement
// byte string (Java's BigInteger.toByteArray, which Kafka Connect's
// Decimal carries).
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		out := n.Bytes()
		if len(out) == 0 || out[0]&0x80 != 0 {
			out = append([]byte{0}, out...)
		}
		return out
	}
	m := new(big.Int).Neg(n)
	m.Sub(m, big.NewInt(1)) // -n-1 ≥ 0; its bits inverted are n's
	out := m.Bytes()
	for i := range out {
		out[i] = ^out[i]
	}
	if len(out) == 0 || out[0]&0x80 == 0 {
		out = append([]byte{0xff}, out...)
	}
	return out
}

// appendBits renders bit and bit varying: a value of a column of length
// 1 (boolean: oneBit) as a boolean, as Debezium does, else Debezium's
// Bits, the value's bits as an unsigned integer in little-endian bytes
// (no bytes for zero), base64 (a one-bit value of a longer bit varying
// too: Debezium types the column, not the value).
func appendBits(b []byte, s string, boolean bool) []byte {
	if boolean {
		switch s {
		case "0":
			return append(b, "false"...)
		case "1":
			return append(b, "true"...)
		}
	}
	n, ok := new(big.Int).SetString(s, 2)
	if !ok || s == "" {
		return appendString(b, s)
	}
	be := n.Bytes()
	le := make([]byte, len(be))
	for i, c := range be {
		le[len(be)-1-i] = c
	}
	return appendBase64(b, le)
}

// Timestamps of ±infinity: the values of PostgreSQL's JDBC driver
// (PGStatement.DATE_POSITIVE_INFINITY, DATE_NEGATIVE_INFINITY), which
// Debezium writes for them.
const (
	posInfinityMicros int64 = 9223372036825200000
	negInfinityMicros int64 = -9223372036832400000
	microsPerDay            = 86_400_000_000
)

// parseDate reads "YYYY-MM-DD" (years beyond 9999 and " BC" too) as days
// since 1970-01-01. ±infinity read as the days of the JDBC driver's
// infinity timestamps.
func parseDate(s string) (int64, bool) {
	switch s {
	case "infinity":
		return floorDiv(posInfinityMicros, microsPerDay), true
	case "-infinity":
		return floorDiv(negInfinityMicros, microsPerDay), true
	}
	s, bc := strings.CutSuffix(s, " BC")
	ys, rest, ok := strings.Cut(s, "-")
	if !ok || len(rest) != 5 || rest[2] != '-' {
		return 0, false
	}
	y, err1 := strconv.ParseInt(ys, 10, 64)
	m, err2 := strconv.Atoi(rest[:2])
	d, err3 := strconv.Atoi(rest[3:])
	if err1 != nil || err2 != nil || err3 != nil || y < 1 {
		return 0, false
	}
	if bc {
		y = 1 - y // 1 BC is year 0 of the proleptic Gregorian calendar
	}
	return daysFromCivil(y, m, d), true
}

// parseClock reads "HH:MM:SS[.ffffff]" as microseconds since midnight
// ("24:00:00" is a day's) and returns the rest (a time zone offset).
func parseClock(s string) (us int64, rest string, ok bool) {
	if len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return 0, "", false
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:5])
	sec, err3 := strconv.Atoi(s[6:8])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, "", false
	}
	us = (int64(h)*3600 + int64(m)*60 + int64(sec)) * 1_000_000
	rest = s[8:]
	if strings.HasPrefix(rest, ".") {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		frac := rest[1:j]
		if len(frac) == 0 || len(frac) > 6 {
			return 0, "", false
		}
		f, _ := strconv.Atoi(frac + strings.Repeat("0", 6-len(frac)))
		us += int64(f)
		rest = rest[j:]
	}
	return us, rest, true
}

// parseOffset reads a time zone offset "+HH", "+HH:MM" or "+HH:MM:SS" as
// seconds east of UTC.
func parseOffset(s string) (int64, bool) {
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return 0, false
	}
	var secs int64
	mult := int64(3600)
	for i, part := range strings.Split(s[1:], ":") {
		n, err := strconv.Atoi(part)
		if err != nil || len(part) != 2 || i > 2 {
			return 0, false
		}
		secs += int64(n) * mult
		mult /= 60
	}
	if s[0] == '-' {
		secs = -secs
	}
	return secs, true
}

// parseTimestamp reads timestamp text as microseconds since the epoch
// (UTC for a timestamp without time zone; withZone reads and applies the
// offset of a timestamptz). ±infinity read as the JDBC driver's values.
func parseTimestamp(s string, withZone bool) (int64, bool) {
	switch s {
	case "infinity":
		return posInfinityMicros, true
	case "-infinity":
		return negInfinityMicros, true
	}
	s, bc := strings.CutSuffix(s, " BC")
	date, clock, ok := strings.Cut(s, " ")
	if !ok {
		return 0, false
	}
	if bc {
		date += " BC"
	}
	days, ok := parseDate(date)
	if !ok {
		return 0, false
	}
	us, rest, ok := parseClock(clock)
	if !ok {
		return 0, false
	}
	var off int64
	if withZone {
		if off, ok = parseOffset(rest); !ok {
			return 0, false
		}
	} else if rest != "" {
		return 0, false
	}
	return days*microsPerDay + us - off*1_000_000, true
}

// zonedTimestamp renders a timestamptz as Debezium's ZonedTimestamp: ISO
// 8601 in UTC with six fraction digits (a timestamptz's default
// precision, whatever the column's declared one), years beyond
// 9999 with '+' and years before 1 as negative astronomical years;
// ±infinity as "infinity" and "-infinity". A value that does not read
// stays its text.
func zonedTimestamp(s string) string {
	if s == "infinity" || s == "-infinity" {
		return s
	}
	us, ok := parseTimestamp(s, true)
	if !ok {
		return s
	}
	days, tod := floorDiv(us, microsPerDay), us-floorDiv(us, microsPerDay)*microsPerDay
	y, m, d := civilFromDays(days)
	var sb strings.Builder
	switch {
	case y > 9999:
		sb.WriteByte('+')
		sb.WriteString(strconv.FormatInt(y, 10))
	case y < 0:
		sb.WriteByte('-')
		sb.WriteString(pad(-y, 4))
	default:
		sb.WriteString(pad(y, 4))
	}
	sb.WriteString("-" + pad(int64(m), 2) + "-" + pad(int64(d), 2) + "T")
	sb.WriteString(clockString(tod, true))
	sb.WriteByte('Z')
	return sb.String()
}

// zonedTime renders a timetz as Debezium's ZonedTime: the time in UTC,
// ISO 8601 ("11:51:30.123789Z", the fraction without trailing zeros).
func zonedTime(s string) (string, bool) {
	us, rest, ok := parseClock(s)
	if !ok {
		return "", false
	}
	off, ok := parseOffset(rest)
	if !ok {
		return "", false
	}
	us -= off * 1_000_000
	us = us - floorDiv(us, microsPerDay)*microsPerDay
	return clockString(us, false) + "Z", true
}

// clockString writes microseconds of a day as HH:MM:SS and the fraction:
// six digits with fixed, else only the digits needed (none for zero).
func clockString(us int64, fixed bool) string {
	sec := us / 1_000_000
	frac := us % 1_000_000
	s := pad(sec/3600, 2) + ":" + pad(sec/60%60, 2) + ":" + pad(sec%60, 2)
	if fixed {
		return s + "." + pad(frac, 6)
	}
	if frac == 0 {
		return s
	}
	return s + "." + strings.TrimRight(pad(frac, 6), "0")
}

func pad(n int64, w int) string {
	s := strconv.FormatInt(n, 10)
	for len(s) < w {
		s = "0" + s
	}
	return s
}

// daysPerMonthAvg is Debezium's MicroDuration month: 365.25/12 days.
const daysPerMonthAvg = 365.25 / 12.0

// microDuration is Debezium's MicroDuration of an interval: its months as
// 365.25/12 days each, computed in float64 in the order Debezium computes
// it (so that the rounding is the same), truncated to microseconds.
func microDuration(iv pgtype.Interval) int64 {
	hours := iv.Microseconds / 3_600_000_000
	minutes := iv.Microseconds / 60_000_000 % 60
	seconds := float64(iv.Microseconds%60_000_000) / 1e6
	// Explicit float64 conversions keep the compiler from fusing a
	// multiply and an add (Java rounds each step).
	days := float64(float64(iv.Months)*daysPerMonthAvg) + float64(iv.Days)
	secs := float64(float64(float64(float64(float64(days*24)+float64(hours))*60)+float64(minutes))*60) + seconds
	return javaLong(float64(secs * 1e6))
}

// javaLong converts f to int64 as Java's (long) cast does: truncated,
// saturated at the int64 range (Go's conversion of an out-of-range float
// is implementation-defined), NaN as 0.
func javaLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// isoInterval is Debezium's Interval string of an interval:
// "P<years>Y<months>M<days>DT<hours>H<minutes>M<seconds>S", each part
// signed as PostgreSQL's fields are, the seconds without trailing zeros.
func isoInterval(iv pgtype.Interval) string {
	us := iv.Microseconds
	sec := us % 60_000_000
	secs := strconv.FormatInt(sec/1_000_000, 10)
	if f := sec % 1_000_000; f != 0 {
		if f < 0 {
			f = -f
			if sec > -1_000_000 {
				secs = "-0"
			}
		}
		secs += "." + strings.TrimRight(pad(f, 6), "0")
	}
	return "P" + strconv.Itoa(int(iv.Months/12)) + "Y" + strconv.Itoa(int(iv.Months%12)) + "M" +
		strconv.Itoa(int(iv.Days)) + "DT" + strconv.FormatInt(us/3_600_000_000, 10) + "H" +
		strconv.FormatInt(us/60_000_000%60, 10) + "M" + secs + "S"
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (Howard Hinnant's algorithm).
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is daysFromCivil's inverse.
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// isCanonicalInt reports whether s is an integer as PostgreSQL writes
// one (and JSON allows): no sign but a minus, no leading zeros, within 64
// bits. Anything else ("+5", "007") would make the line invalid JSON or
// change in the msgpack conversion; it renders as a string.
func isCanonicalInt[T string | []byte](s T) bool {
	var tmp [24]byte
	if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		return string(strconv.AppendInt(tmp[:0], n, 10)) == string(s)
	}
	if n, err := strconv.ParseUint(string(s), 10, 64); err == nil {
		return string(strconv.AppendUint(tmp[:0], n, 10)) == string(s)
	}
	return false
}

// isJSONNumber reports whether s is a JSON number.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

func appendBase64(b, data []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// appendUnavailable renders an unchanged TOAST value PostgreSQL did not
// send as Debezium's placeholder in the column's type
// (UnchangedToastedPlaceholder): bytea as the placeholder's bytes; an
// array as an array of the element's type, a single placeholder string
// for elements rendered as strings (a uuid element: the name-based UUID
// of the placeholder's bytes), one element per placeholder byte for
// numbers and booleans, the bytes for bytea elements; anything else the
// placeholder string.
func (r *Renderer) appendUnavailable(b []byte, typ uint32) []byte {
	if typ == pgtype.ByteaOID {
		return appendBase64(b, []byte(unavailable))
	}
	elem, ok := r.arrayElem(typ)
	if !ok {
		return appendString(b, unavailable)
	}
	b = append(b, '[')
	switch kind := r.elemKind(elem); kind {
	case elemString:
		b = appendString(b, unavailable)
	case elemUUID:
		b = appendString(b, nameUUID([]byte(unavailable)))
	case elemBytes:
		b = appendBase64(b, []byte(unavailable))
	default:
		for i := 0; i < len(unavailable); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPlaceholderByte(b, kind, int8(unavailable[i]))
		}
	}
	return append(b, ']')
}

// The Connect schema types of array elements that tell how Debezium
// writes the placeholder of an unchanged TOASTed array.
const (
	elemString = iota
	elemUUID
	elemBytes
	elemInt
	elemFloat
	elemBool
	elemVariableDecimal
)

// elemKind is the kind of the values this renderer writes for elements
// of type elem.
func (r *Renderer) elemKind(elem uint32) int {
	switch elem {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID, pgtype.DateOID, pgtype.TimeOID, pgtype.TimestampOID:
		return elemInt
	case pgtype.IntervalOID:
		if r.o.Interval == IntervalString {
			return elemString
		}
		return elemInt
	case pgtype.Float4OID, pgtype.Float8OID:
		return elemFloat
	case pgtype.BoolOID:
		return elemBool
	case pgtype.ByteaOID:
		return elemBytes
	case pgtype.UUIDOID:
		return elemUUID
	case pgtype.NumericOID:
		switch r.o.Decimal {
		case DecimalDouble:
			return elemFloat
		case DecimalPrecise:
			return elemVariableDecimal
		}
	}
	return elemString
}

// appendPlaceholderByte appends one byte of the placeholder as an
// element of the kind: Java's byte is signed.
func appendPlaceholderByte(b []byte, kind int, c int8) []byte {
	switch kind {
	case elemFloat:
		return appendJavaDouble(b, float64(c))
	case elemBool:
		return strconv.AppendBool(b, c != 0)
	case elemVariableDecimal:
		b = append(b, `{"scale":0,"value":`...)
		b = appendBase64(b, twosComplement(big.NewInt(int64(c))))
		return append(b, '}')
	}
	return strconv.AppendInt(b, int64(c), 10)
}

// nameUUID is Java's UUID.nameUUIDFromBytes: an MD5, version 3 UUID.
func nameUUID(data []byte) string {
	h := md5.Sum(data)
	h[6] = h[6]&0x0f | 0x30
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// parsePoint reads a point's text "(x,y)".
func parsePoint(s string) (x, y float64, ok bool) {
	in, found := strings.CutPrefix(s, "(")
	if !found {
		return 0, 0, false
	}
	in, found = strings.CutSuffix(in, ")")
	xs, ys, comma := strings.Cut(in, ",")
	if !found || !comma {
		return 0, 0, false
	}
	x, err1 := strconv.ParseFloat(xs, 64)
	y, err2 := strconv.ParseFloat(ys, 64)
	return x, y, err1 == nil && err2 == nil
}

// appendPoint renders a point as Debezium's io.debezium.data.geometry.Point
// struct: x, y, its OGC WKB (little-endian 2D point) and no SRID.
func appendPoint(b []byte, x, y float64) []byte {
	wkb := make([]byte, 21)
	wkb[0] = 1 // little endian
	binary.LittleEndian.PutUint32(wkb[1:], 1)
	binary.LittleEndian.PutUint64(wkb[5:], math.Float64bits(x))
	binary.LittleEndian.PutUint64(wkb[13:], math.Float64bits(y))
	b = append(b, `{"x":`...)
	b = appendJavaDouble(b, x)
	b = append(b, `,"y":`...)
	b = appendJavaDouble(b, y)
	b = append(b, `,"wkb":`...)
	b = appendBase64(b, wkb)
	return append(b, `,"srid":null}`...)
}

// appendJavaDouble writes f as Java's Double.toString does (which Kafka
// Connect's JSON converter writes): a fraction digit always ("1.0"),
// scientific notation outside [1e-3, 1e7) ("1.0E7"); NaN and the
// infinities, no JSON numbers, as strings of their names.
func appendJavaDouble(b []byte, f float64) []byte { return appendJavaFloat(b, f, 64) }

// appendJavaFloat writes f, a float of bits 32 or 64, as Java's
// Float.toString or Double.toString does (appendJavaDouble): the
// shortest digits that read back as the same float32 or float64.
func appendJavaFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return appendString(b, "NaN")
	case math.IsInf(f, 1):
		return appendString(b, "Infinity")
	case math.IsInf(f, -1):
		return appendString(b, "-Infinity")
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-3 && a < 1e7) {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return append(b, s...)
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, bits), "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(exp, "+-0")
	if neg {
		exp = "-" + exp
	}
	return append(append(append(b, mant...), 'E'), exp...)
}
