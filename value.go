package pgq

import (
	"errors"

	"github.com/jackc/pgx/v5/pgtype"
)

// ErrUnchangedTOAST is returned when a caller asks for the value of an
// unchanged TOASTed column: PostgreSQL did not send it.
var ErrUnchangedTOAST = errors.New("pgq: unchanged TOAST value was not sent")

// Decode converts the value into a Go value with pgtype's codec for the
// column's type OID: int64 for int8, bool, pgtype.Numeric, time.Time, maps
// for json, and so on. NULL is nil; a type pgtype does not know (enums,
// domains of user types) comes back as its text form.
func (v Value) Decode(m *pgtype.Map, typeOID uint32) (any, error) {
	switch v.Kind {
	case ValueNull:
		return nil, nil
	case ValueUnchangedTOAST:
		return nil, ErrUnchangedTOAST
	}
	format := int16(pgtype.TextFormatCode)
	if v.Kind == ValueBinary {
		format = pgtype.BinaryFormatCode
	}
	t, ok := m.TypeForOID(typeOID)
	if !ok {
		if format == pgtype.BinaryFormatCode {
			return append([]byte(nil), v.Data...), nil
		}
		return string(v.Data), nil
	}
	return t.Codec.DecodeValue(m, typeOID, format, v.Data)
}

// Get returns the value of the named column in the new (or, with old set,
// the old) image, its column description, and whether it was present.
func (c *Change) Get(name string, old bool) (Value, Column, bool) {
	vals := c.New
	if old {
		vals = c.Old
	}
	for i, col := range c.Columns {
		if col.Name == name && i < len(vals) {
			if old && c.OldKind == OldKey && !col.Key {
				return Value{}, col, false
			}
			return vals[i], col, true
		}
	}
	return Value{}, Column{}, false
}
