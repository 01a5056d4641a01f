package httpapi

import (
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
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
