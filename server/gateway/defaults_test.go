package gateway_test

import (
	"net/http"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// docs/contract.md §11.6 through the HTTP API: a prompt's model applies
// to its run only, and set_default makes it the session's default. Five
// prompts, queued in order: set_default a, override b, plain (a again),
// set_default c, plain (c). A set_default naming a model the worker does
// not offer is refused with 400 invalid_input and leaves the default
// alone; so is set_default with nothing to set, or with if_active steer.
func TestRunConfigAppliesToItsRunUnlessSetDefault(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	const ok = `{"repeat":true,"turns":[{"text":["ok"]}]}`
	a := shared.book.Add(t, t.Name()+"-a", ok)
	b := shared.book.Add(t, t.Name()+"-b", ok)
	c := shared.book.Add(t, t.Name()+"-c", ok)
	const path = "/v1/sessions/defaults/runs"
	queue := func(body map[string]any) {
		body["if_active"] = "queue"
		s.send(t, "defaults", body)
	}
	queue(map[string]any{"prompt": "1", "model": a, "set_default": true})
	queue(map[string]any{"prompt": "2", "model": b})
	for _, body := range []map[string]any{
		{"prompt": "x", "model": "scripted:/etc/shadow", "set_default": true},
		{"prompt": "x", "model": "openai:invented", "set_default": true, "if_active": "queue"},
		{"prompt": "x", "set_default": true, "if_active": "queue"},
		{"prompt": "x", "model": c, "set_default": true, "if_active": "steer"},
	} {
		r := s.call(t, http.MethodPost, path, body).must(t, http.StatusBadRequest)
		if r.code() != "invalid_input" {
			t.Fatalf("%v: %s", body, r.raw)
		}
	}
	queue(map[string]any{"prompt": "3"})
	queue(map[string]any{"prompt": "4", "model": c, "set_default": true})
	queue(map[string]any{"prompt": "5"})

	st := s.stream(t, testCtx(t), "defaults", "?after=0", nil)
	var models []string
	for len(models) < 5 {
		for _, ev := range st.until(t, keel.TypeRunStarted) {
			if ev.event != keel.TypeRunStarted {
				continue
			}
			e, err := ev.envelope(t).Event()
			if err != nil {
				t.Fatal(err)
			}
			models = append(models, e.(keel.RunStarted).Model)
		}
	}
	want := []string{a, b, a, c, c}
	for i := range want {
		if models[i] != want[i] {
			t.Fatalf("runs' models %v, want %v", models, want)
		}
	}
}
