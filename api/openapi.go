package api

import _ "embed"

// OpenAPI is the API's OpenAPI 3.1 document (openapi.yaml): every route,
// status, field and event. The server's tests hold its handlers to it.
//
//go:embed openapi.yaml
var OpenAPI []byte
