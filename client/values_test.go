package client_test

import (
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
)

func tv(s string) pgq.Value { return pgq.Value{Kind: pgq.ValueText, Data: []byte(s)} }

// orderChange is an update of a row with the common types, as PostgreSQL
// sends them (text form).
func orderChange() *pgq.Change {
	return &pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "orders", OldKind: pgq.OldKey,
		Columns: []pgq.Column{
			{Name: "order_id", TypeOID: 20, Key: true}, {Name: "paid", TypeOID: 16}, {Name: "total", TypeOID: 1700},
			{Name: "created_at", TypeOID: 1184}, {Name: "tags", TypeOID: 1009}, {Name: "meta", TypeOID: 3802},
			{Name: "note", TypeOID: 25}, {Name: "big", TypeOID: 25},
		},
		New: []pgq.Value{tv("42"), tv("t"), tv("12.50"), tv("2026-12-02 19:44:19.945485+00"), tv(`{a,"b c"}`), tv(`{"items":2}`),
			{Kind: pgq.ValueNull}, {Kind: pgq.ValueUnchangedTOAST}},
		Old: []pgq.Value{tv("42"), {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}},
	}
}

func TestScanIntoStruct(t *testing.T) {
	type order struct {
		OrderID   int64
		Paid      bool
		Total     float64
		CreatedAt time.Time
		Tags      []string
		Meta      map[string]any
		Note      *string
		Big       string `pgq:"big"`
		Ignored   string `pgq:"-"`
	}
	o := order{Note: new(string), Big: "kept", Ignored: "x"}
	if err := client.Scan(orderChange(), client.NewImage, &o); err != nil {
		t.Fatal(err)
	}
	want := order{OrderID: 42, Paid: true, Total: 12.5, CreatedAt: time.Date(2026, 12, 2, 19, 44, 19, 945485000, time.UTC),
		Tags: []string{"a", "b c"}, Meta: map[string]any{"items": float64(2)}, Note: nil, Big: "kept", Ignored: "x"}
	o.CreatedAt = o.CreatedAt.UTC()
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("scanned\n%+v\nwant\n%+v", o, want)
	}
	// The key-only old image fills the key and leaves the rest.
	var k struct{ OrderID int32 }
	if err := client.Scan(orderChange(), client.OldImage, &k); err != nil || k.OrderID != 42 {
		t.Fatalf("old key: %+v %v", k, err)
	}
	// A column that cannot go into the field is one clear error.
	var bad struct{ Paid time.Time }
	if err := client.Scan(orderChange(), client.NewImage, &bad); err == nil {
		t.Fatal("scanning a bool into a time.Time succeeded")
	}
	if err := client.Scan(orderChange(), client.NewImage, o); err == nil {
		t.Fatal("Scan into a non-pointer succeeded")
	}
	// The deprecated bare bool still compiles for one release and means
	// what it meant: true the old image.
	var k2 struct {
		OrderID int32
		Paid    bool
	}
	if err := client.Scan(orderChange(), true, &k2); err != nil || k2.OrderID != 42 || k2.Paid {
		t.Fatalf("old key through the deprecated bool: %+v %v", k2, err)
	}
	if v, err := client.Values(nil, orderChange(), false); err != nil || v["paid"] != true {
		t.Fatalf("new image through the deprecated bool: %v %v", v, err)
	}
	if client.NewImage.String() != "new" || client.OldImage.String() != "old" {
		t.Fatal("Image.String")
	}
}

func TestValues(t *testing.T) {
	v, err := client.Values(nil, orderChange(), client.NewImage)
	if err != nil {
		t.Fatal(err)
	}
	if v["order_id"] != int64(42) || v["paid"] != true || v["note"] != nil {
		t.Fatalf("values %v", v)
	}
	if n, ok := v["total"].(pgtype.Numeric); !ok || n.Int.Cmp(big.NewInt(1250)) != 0 || n.Exp != -2 {
		t.Fatalf("numeric %#v", v["total"])
	}
	if _, ok := v["big"]; ok {
		t.Fatal("an unchanged TOAST column has a value")
	}
	old, err := client.Values(pgtype.NewMap(), orderChange(), client.OldImage)
	if err != nil || len(old) != 1 || old["order_id"] != int64(42) {
		t.Fatalf("old key values %v %v", old, err)
	}
}
