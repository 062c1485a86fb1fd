package gateway_test

import (
	"net/http"
	"testing"

	"github.com/keelrun/keel/server/gateway"
)

// The attack of keel issue 21 through the HTTP API: a prompt whose model
// names a file, a device or a model the worker does not offer gets 400
// invalid_input with one message, whatever the name (no oracle: it never
// says whether the file exists), and no run; a model the worker offers
// runs.
func TestRunsRefuseModelsTheWorkerDoesNotOffer(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	var first string
	for _, spec := range []string{"scripted:/etc/shadow", "scripted:/etc/passwd", "scripted:/no/such/file.json",
		"scripted:/dev/zero", "scripted:../x", "openai:invented", "mistral:large", "nobody"} {
		r := s.call(t, http.MethodPost, "/v1/sessions/p2/runs", map[string]any{"prompt": "x", "model": spec}).
			must(t, http.StatusBadRequest)
		msg, _ := r.body["message"].(string)
		if r.code() != "invalid_input" || msg == "" {
			t.Fatalf("model %q: body %s", spec, r.raw)
		}
		if first == "" {
			first = msg
		} else if msg != first {
			t.Fatalf("model %q: message %q, another model's %q: the answer depends on the name", spec, msg, first)
		}
	}
	r := s.call(t, http.MethodGet, "/v1/sessions/p2", nil)
	if r.status == http.StatusOK {
		if runs, _ := r.body["runs"].(float64); runs != 0 {
			t.Fatalf("a refused prompt started a run: %s", r.raw)
		}
	}
	s.send(t, "p2", map[string]any{"prompt": "x", "model": model(t, `{"turns":[{"text":["ok"]}]}`)})
}
