package httpapi

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// TestOpenAPIRoutes walks the route table both ways: every registered route
// (Routes, with a token set so that 401 counts) is in openapi.json with its
// path, method, path parameters and exactly its statuses, and every
// operation of the document is a registered route.
func TestOpenAPIRoutes(t *testing.T) {
	doc, err := libopenapi.NewDocument(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	ops := documentedOperations(&m.Model)

	routes := map[string]bool{}
	for _, rt := range Routes(true) {
		key := rt.Method + " " + rt.Pattern
		routes[key] = true
		op, ok := ops[key]
		if !ok {
			t.Errorf("%s: registered, not in openapi.json", key)
			continue
		}
		if want := pathParams(rt.Pattern); !slices.Equal(op.params, want) {
			t.Errorf("%s: openapi.json declares path parameters %v, the pattern has %v", key, op.params, want)
		}
		want := slices.Clone(rt.Statuses)
		slices.Sort(want)
		want = slices.Compact(want)
		if missing := diff(want, op.statuses); len(missing) > 0 {
			t.Errorf("%s: answers %v, not documented in openapi.json", key, missing)
		}
		if extra := diff(op.statuses, want); len(extra) > 0 {
			t.Errorf("%s: openapi.json documents %v, the route table does not list them", key, extra)
		}
	}
	for key := range ops {
		if !routes[key] {
			t.Errorf("%s: in openapi.json, not a registered route", key)
		}
	}
	if len(routes) == 0 {
		t.Fatal("Routes is empty")
	}

	// Without a token nothing answers 401, and GET /healthz never does.
	for _, rt := range Routes(false) {
		if slices.Contains(rt.Statuses, 401) {
			t.Errorf("%s %s: 401 without a token", rt.Method, rt.Pattern)
		}
	}
	if op, ok := ops["GET /healthz"]; ok && slices.Contains(op.statuses, 401) {
		t.Errorf("GET /healthz: documented with 401; it never needs a token")
	}
}

// operation is what the route walk compares of a documented operation.
type operation struct {
	params   []string // path parameters, sorted
	statuses []int    // sorted
}

// documentedOperations returns the operations of the document by
// "METHOD /path".
func documentedOperations(d *v3.Document) map[string]operation {
	out := map[string]operation{}
	for path, item := range d.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			var params []string
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.In == "path" {
					params = append(params, p.Name)
				}
			}
			slices.Sort(params)
			var statuses []int
			if op.Responses != nil {
				for code := range op.Responses.Codes.KeysFromOldest() {
					n, err := strconv.Atoi(code)
					if err != nil {
						panic(fmt.Sprintf("%s %s: response %q: list statuses one by one", method, path, code))
					}
					statuses = append(statuses, n)
				}
			}
			slices.Sort(statuses)
			out[strings.ToUpper(method)+" "+path] = operation{params: params, statuses: statuses}
		}
	}
	return out
}

var paramRE = regexp.MustCompile(`\{([^}/]+)\}`)

// pathParams returns the sorted {parameter} names of a mux pattern
// ("{name...}" counts as name).
func pathParams(pattern string) []string {
	var out []string
	for _, m := range paramRE.FindAllStringSubmatch(pattern, -1) {
		out = append(out, strings.TrimSuffix(m[1], "..."))
	}
	slices.Sort(out)
	return out
}

// diff returns the elements of a (sorted) that are not in b (sorted).
func diff(a, b []int) []int {
	var out []int
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}
