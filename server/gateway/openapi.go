package gateway

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the gateway's OpenAPI 3.1 document, served at
// /v1/openapi.json. Its paths are written by hand; its
// components.schemas are generated from the Go types the gateway
// encodes, with the clients' types (server/internal/wiregen).
//
//go:generate go run ../internal/wiregen/cmd/wiregen
//go:embed openapi.json
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
