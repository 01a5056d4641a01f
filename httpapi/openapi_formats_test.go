package httpapi

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq/format"
)

// TestOpenAPIFormats holds the document's enum of the fetch's "format"
// to package format's table: a format added there and not documented
// (or documented and gone) fails here.
func TestOpenAPIFormats(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	s, ok := doc.Components.Schemas["FetchRequest"]
	if !ok {
		t.Fatal("openapi.json has no FetchRequest schema")
	}
	got := s.Properties["format"].Enum
	if want := format.Names(); !slices.Equal(got, want) {
		t.Errorf("FetchRequest.format's enum is %q, want the table's %q", got, want)
	}
}
