package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/schema_validation"

	"github.com/pgq-dev/pgq/api"
)

// TestOpenAPIDocument checks that openapi.json is an OpenAPI 3.1 document
// that libopenapi builds without errors and that is valid against the
// OpenAPI 3.1 schema.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := libopenapi.NewDocument(OpenAPI)
	if err != nil {
		t.Fatalf("parse openapi.json: %v", err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Errorf("openapi version %q, want 3.1.0", v)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("build the v3 model of openapi.json: %v", err)
	}
	if m.Model.Info == nil || m.Model.Info.Version != "1" {
		t.Errorf("info.version is not \"1\"")
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("openapi.json against the OpenAPI 3.1 schema: %v", e)
		}
	}
}

// TestSchemasMatchWireTypes validates the JSON of the api wire types, zero
// and fully set, against their schemas: the shapes the integration tests
// cannot reach without PostgreSQL (a backfill) or rarely see (every
// optional field at once) are held to the document too.
func TestSchemasMatchWireTypes(t *testing.T) {
	doc, err := libopenapi.NewDocument(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 1, 1, 0, 0, 1, 500000000, time.UTC)
	eta, msg, upTo := 5.9, "too many retries of one chunk", "4"
	change := json.RawMessage(`{"op":"delete","ordinal":3,"schema":"public","table":"t","new":null,"old":{"id":1}}`)
	for _, tc := range []struct {
		schema string
		v      any
	}{
		{"Backfill", api.Backfill{ID: "bf1", State: "running", Tables: []string{"public.t"}}},
		{"Backfill", api.Backfill{ID: "bf2", State: "failed", Tables: []string{"public.t"}, Where: "id > 0", ChunkSize: 10, MaxRate: 1.5,
			Table: "public.t", Rows: 5, RowsEstimate: 9, Rate: 2.5, ETA: &eta, KeyColumns: []string{"id"}, LastKey: map[string]string{"id": "5"},
			Parallelism: 2, Ranges: []api.BackfillRange{{UpTo: &upTo, LastKey: map[string]string{"id": "3"}, Rows: 3}, {After: &upTo, Done: true}},
			Error: &msg, CreatedAt: now, FinishedAt: &now}},
		{"BackfillList", []api.Backfill{}},
		{"GroupInfo", api.GroupInfo{Name: "s", From: "earliest", Tables: []string{"public.*"}, Ops: []string{"insert"}, Created: now, Updated: now,
			Member: "w1", LeaseExpires: &now, Lag: api.Lag{Records: 1, Bytes: 2, Seconds: 0.5, IndexStale: true}, Mode: "shared",
			Shared: &api.SharedInfo{AckWait: api.Duration(30 * time.Second), MaxDeliver: 5, Backoff: []api.Duration{api.Duration(time.Second), api.Duration(1500 * time.Millisecond)},
				MaxAckPending: 1000, Key: "pk"}, HoldSlot: true, HoldReleased: true}},
		{"ParkedResponse", api.ParkedResponse{Parked: []api.ParkedMessage{
			{Message: api.Message{Offset: 1, Xid: 7, CommitLSN: "0/16B3748", CommitTime: now, Change: change, Delivery: 5, AckID: "1.0.5.abc"}, Parked: now, Reason: "max_deliver"},
			{Message: api.Message{Offset: 2, Change: json.RawMessage("null"), Delivery: 1, AckID: "2.0.1"}, Parked: now, Reason: "term (record removed by retention)"},
		}}},
		{"ParkedResponse", api.ParkedResponse{Parked: []api.ParkedMessage{}}},
		{"ResetResult", api.ResetResult{Group: "g", To: "earliest", DryRun: true}},
		{"CommitResult", api.CommitResult{CommittedOffset: 3, LeaseExpires: now}},
		{"LeaseResponse", api.LeaseResponse{LeaseExpires: now}},
		{"OKResponse", api.OKResponse{OK: true}},
		{"CountResponse", api.AckResult{Count: 2}},
		{"ErrorBody", api.ErrorBody{Error: api.Error{Code: api.CodeFenced, Message: "fenced"}}},
	} {
		sp := m.Model.Components.Schemas.GetOrZero(tc.schema)
		if sp == nil {
			t.Errorf("no schema %s", tc.schema)
			continue
		}
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		sv := schema_validation.NewSchemaValidator(config.WithFormatAssertions())
		if ok, errs := sv.ValidateSchemaBytes(sp.Schema(), b); !ok {
			for _, e := range errs {
				for _, f := range e.SchemaValidationErrors {
					t.Errorf("%s %s: %s: %s", tc.schema, b, f.FieldPath, f.Reason)
				}
				if len(e.SchemaValidationErrors) == 0 {
					t.Errorf("%s %s: %v", tc.schema, b, e)
				}
			}
		}
	}
}
