package httpapi

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the whole HTTP API (openapi.json,
// embedded): the contract that GET /v1/openapi.json serves, and that the
// tests hold the server to. openapi_routes_test.go checks that it names
// every registered route with its parameters and statuses, and
// httpapi/apitest validates the JSON responses of the integration tests
// against it. docs/http-api.md stays the prose; edit both together.
//
//go:embed openapi.json
var OpenAPI []byte
