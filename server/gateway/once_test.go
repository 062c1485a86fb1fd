package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// POST /v1/sessions/{id}/runs with a once key (docs/contract.md §11.7): a
// request repeated with the same key, after its run ended and the
// session continued as new, answers the first request's run with
// repeated and starts nothing; another key is a new run; a key over 256
// bytes is refused before any call.
func TestRunRequestOnce(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"repeat":true,"turns":[{"text":["done"]}]}`)
	body := func(once string) map[string]any {
		return map[string]any{"prompt": "report", "model": m, "tools": []string{}, "once": once}
	}
	first := s.send(t, "gw-once", body("retry-me"))
	waitForEvent(t, testCtx(t), "gw-once", keel.TypeRunCompleted, 1)
	again := s.send(t, "gw-once", body("retry-me"))
	if again.Number != first.Number || !again.Repeated || first.Repeated {
		t.Fatalf("first %+v, repeated %+v", first, again)
	}
	other := s.send(t, "gw-once", body("another"))
	if other.Number != first.Number+1 || other.Repeated {
		t.Fatalf("another key: %+v", other)
	}
	r := s.call(t, http.MethodPost, "/v1/sessions/gw-once-long/runs", body(strings.Repeat("k", 257)))
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.raw), "once") {
		t.Fatalf("a long key: %d %s", r.status, r.raw)
	}
	if st := s.call(t, http.MethodGet, "/v1/sessions/gw-once-long", nil); st.status != http.StatusNotFound {
		t.Fatalf("a refused request made its session: %d %s", st.status, st.raw)
	}
}
