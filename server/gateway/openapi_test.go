package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/keelrun/keel/server/gateway"
)

// openAPIDoc is the part of the OpenAPI document the test reads.
type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

// Every route the gateway serves under /v1 is in the OpenAPI document,
// and every operation the document lists is served (the mux neither 404s
// nor 405s it).
func TestOpenAPICoversRoutes(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	r := s.call(t, http.MethodGet, "/v1/openapi.json", nil).must(t, http.StatusOK)
	var doc openAPIDoc
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "delete", "patch", "head", "options":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	var served []string
	for _, rt := range s.gw.Routes() {
		if strings.HasPrefix(rt.Path, "/v1/") {
			served = append(served, rt.Method+" "+rt.Path)
		}
	}
	slices.Sort(documented)
	slices.Sort(served)
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("route %s is not in openapi.json", op)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("openapi.json documents %s, which is not mounted", op)
		}
	}
	// Each documented operation reaches a handler: whatever it answers for
	// a session that does not exist, it is not the router's 404 or 405.
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{id}", "openapi-probe", "{steering_id}", "steer-1").Replace(path)
		var body any
		if method == http.MethodPost {
			body = map[string]any{}
		}
		r := s.call(t, method, path, body)
		if r.code() == gateway.CodeRouteNotFound || r.code() == gateway.CodeMethodNotAllowed || r.status == http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d %s", method, path, r.status, r.raw)
		}
	}
	if len(documented) < 10 {
		t.Fatalf("only %d operations documented", len(documented))
	}
}
