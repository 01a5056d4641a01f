package format_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// TestDebeziumKeepsPGQValues feeds the changes of Debezium's test rows
// through the debezium format (with its lossless settings: decimals and
// intervals as strings) and checks that every value of the pgq format
// survives: PostgreSQL itself compares the value the Debezium rendering
// denotes (rebuilt in SQL from it) with the row's column, whose text is
// what the pgq format carries. Bit strings are the one loss: a
// schemaless Debezium Bits value has no length (leading zeros), so for
// them only the number is compared.
func TestDebeziumKeepsPGQValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, row := range debeziumRows() {
		if row.opts.Decimal != format.DecimalString {
			continue // precise is lossless too, but the string rows cover the values
		}
		t.Run(row.table, func(t *testing.T) {
			c := pgRow(t, row.table, row.ddl, row.insert)
			r, err := format.New(format.Debezium, format.Options{Interval: format.IntervalString})
			if err != nil {
				t.Fatal(err)
			}
			tx := testTx(c)
			var dbz struct {
				After map[string]json.RawMessage `json:"after"`
			}
			if err := json.Unmarshal(r.AppendEvent(nil, tx, 0, 0), &dbz); err != nil {
				t.Fatal(err)
			}
			var own struct {
				New map[string]json.RawMessage `json:"new"`
			}
			if err := json.Unmarshal(format.AppendChangeJSON(nil, &c), &own); err != nil {
				t.Fatal(err)
			}
			conn := rowConn(ctx, t, row.table)
			for i, col := range c.Columns {
				if !pgqCarriesText(t, own.New[col.Name], string(c.New[i].Data), col.TypeOID) {
					t.Errorf("%s: pgq format has %s for text %q", col.Name, own.New[col.Name], c.New[i].Data)
				}
				if ok, expr := denotesSame(ctx, t, conn, row.table, col, dbz.After[col.Name]); !ok {
					t.Errorf("%s: Debezium value %s (%s) is not PostgreSQL's %q", col.Name, dbz.After[col.Name], expr, c.New[i].Data)
				}
			}
		})
	}
}

// rowConn connects to the database pgRow just created for table.
func rowConn(ctx context.Context, t *testing.T, table string) *pgx.Conn {
	t.Helper()
	conn, err := cluster.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var db string
	err = conn.QueryRow(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'db\\_%' ORDER BY oid DESC LIMIT 1").Scan(&db)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err = cluster.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 1 {
		t.Fatalf("newest database has no row in %s: %v", table, err)
	}
	return conn
}

// pgqCarriesText reports whether the pgq format's JSON value is the
// column's text: a string of it, or the number, boolean or JSON it
// spells.
func pgqCarriesText(t *testing.T, v json.RawMessage, text string, typ uint32) bool {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s == text
	}
	switch typ {
	case pgtype.BoolOID:
		return (string(v) == "true") == (text == "t")
	case pgtype.JSONOID, pgtype.JSONBOID:
		return string(v) == text
	}
	return string(v) == text
}

// denotesSame asks PostgreSQL whether the Debezium value v of col,
// rebuilt as a SQL expression of the column's type, equals the column.
func denotesSame(ctx context.Context, t *testing.T, conn *pgx.Conn, table string, col pgq.Column, v json.RawMessage) (bool, string) {
	t.Helper()
	lhs, rhs, args := sqlOf(t, col.TypeOID, `"`+col.Name+`"`, v)
	if lhs == "" {
		return true, "skipped"
	}
	q := fmt.Sprintf("SELECT (%s) IS NOT DISTINCT FROM (%s) FROM %s", lhs, rhs, table)
	var ok bool
	if err := conn.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
		t.Errorf("%s: %v", q, err)
		return false, q
	}
	return ok, fmt.Sprintf("%s %v", q, args)
}

// sqlOf returns the two sides of the comparison of a Debezium value with
// the column expression colExpr, and the query's arguments.
func sqlOf(t *testing.T, typ uint32, colExpr string, v json.RawMessage) (string, string, []any) {
	t.Helper()
	if string(v) == "null" {
		return "NULL", colExpr, nil
	}
	var s string
	isStr := json.Unmarshal(v, &s) == nil
	num := string(v)
	switch typ {
	case pgtype.DateOID:
		return "date '1970-01-01' + $1::int", colExpr, []any{num}
	case pgtype.TimestampOID:
		switch num {
		case "9223372036825200000":
			return "timestamp 'infinity'", colExpr, nil
		case "-9223372036832400000":
			return "timestamp '-infinity'", colExpr, nil
		}
		d, us := splitMicros(t, num)
		return "timestamp '1970-01-01' + make_interval(days => $1::int, secs => $2::float8)", colExpr, []any{d, us}
	case pgtype.TimeOID:
		return "make_interval(secs => $1::numeric / 1000000)", colExpr + " - time '00:00'", []any{num}
	case pgtype.TimestamptzOID:
		return "$1::timestamptz", colExpr, []any{pgTimestamptz(s)}
	case 1266: // timetz
		return "$1::timetz", colExpr + " AT TIME ZONE 'UTC'", []any{strings.TrimSuffix(s, "Z") + "+00"}
	case pgtype.IntervalOID, pgtype.JSONBOID, pgtype.UUIDOID:
		return "$1::" + typeName(typ), colExpr, []any{s}
	case pgtype.NumericOID:
		if s == "NAN" {
			s = "NaN"
		}
		return "$1::numeric", colExpr, []any{s}
	case 790: // money
		return "$1::numeric::money", colExpr, []any{s}
	case pgtype.ByteaOID:
		return "decode($1, 'base64')", colExpr, []any{s}
	case 1560, 1562: // bit, varbit: the number only (see the test's doc)
		return "$1::text", "ltrim(" + colExpr + "::text, '0')", []any{bitsNumber(t, v)}
	case pgtype.BoolOID:
		return "$1::boolean", colExpr, []any{num}
	case pgtype.Float4OID, pgtype.Float8OID:
		// Java's form (3.0, 1.0E10) or the name of NaN or an infinity:
		// PostgreSQL reads either as the same float.
		if isStr {
			num = s
		}
		if typ == pgtype.Float4OID {
			return "$1::float4", colExpr, []any{num}
		}
		return "$1::float8", colExpr, []any{num}
	}
	if t2, ok := pgtype.NewMap().TypeForOID(typ); ok {
		if ac, ok := t2.Codec.(*pgtype.ArrayCodec); ok {
			return arrayExprs(t, ac.ElementType.OID, colExpr, v)
		}
	}
	// format's %s is the type's output function: the text pgoutput sends
	// (a cast to text trims char(n) and adds inet's mask).
	if isStr {
		return "$1::text", "format('%s', " + colExpr + ")", []any{s}
	}
	return "$1::text", "format('%s', " + colExpr + ")", []any{num}
}

// arrayExprs compares an array element by element (Debezium's arrays are
// JSON arrays of the element type's values).
func arrayExprs(t *testing.T, elem uint32, colExpr string, v json.RawMessage) (string, string, []any) {
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		t.Fatalf("array %s: %v", v, err)
	}
	conds := []string{fmt.Sprintf("cardinality(%s) = %d", colExpr, len(elems))}
	var args []any
	for i, e := range elems {
		l, r, a := sqlOf(t, elem, fmt.Sprintf("(%s)[%d]", colExpr, i+1), e)
		for j := len(a); j >= 1; j-- { // renumber the placeholders after the earlier elements'
			l = strings.ReplaceAll(l, "$"+strconv.Itoa(j), "$"+strconv.Itoa(len(args)+j))
		}
		args = append(args, a...)
		conds = append(conds, "("+l+") IS NOT DISTINCT FROM ("+r+")")
	}
	return strings.Join(conds, " AND "), "true", args
}

func typeName(typ uint32) string {
	t, _ := pgtype.NewMap().TypeForOID(typ)
	return t.Name
}

func splitMicros(t *testing.T, num string) (string, string) {
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		t.Fatalf("micros %q: %v", num, err)
	}
	d := n / 86_400_000_000
	r := n % 86_400_000_000
	if r < 0 {
		d--
		r += 86_400_000_000
	}
	return strconv.FormatInt(d, 10), fmt.Sprintf("%d.%06d", r/1_000_000, r%1_000_000)
}

// pgTimestamptz turns Debezium's ISO 8601 UTC timestamp into PostgreSQL
// input: no '+' before a long year, a negative (astronomical) year as
// BC.
func pgTimestamptz(s string) string {
	if s == "infinity" || s == "-infinity" {
		return s
	}
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		y, tail, _ := strings.Cut(rest, "-")
		n, _ := strconv.Atoi(y)
		return fmt.Sprintf("%04d-%s BC", n+1, strings.Replace(tail, "Z", "+00", 1))
	}
	return s
}

// bitsNumber reads Debezium's Bits (base64 of little-endian bytes) or a
// one-bit boolean as the binary digits of its number ("" for zero).
func bitsNumber(t *testing.T, v json.RawMessage) string {
	switch string(v) {
	case "true":
		return "1"
	case "false":
		return ""
	}
	var s string
	_ = json.Unmarshal(v, &s)
	le, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("bits %s: %v", v, err)
	}
	be := make([]byte, len(le))
	for i, c := range le {
		be[len(le)-1-i] = c
	}
	n := new(big.Int).SetBytes(be)
	if n.Sign() == 0 {
		return ""
	}
	return n.Text(2)
}
