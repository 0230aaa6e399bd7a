package server

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI describes every REST route (OpenAPI 3.1); the e2e tests validate
// every REST answer they see against it.
//
//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns openapi.yaml, the description of the REST routes.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// handleOpenAPI serves openapi.yaml, so a client generator or a person can
// fetch the reference from the running service.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("Content-Length", strconv.Itoa(len(openAPI)))
		_, _ = w.Write(openAPI)
	})
}
