package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/gateway"
)

// POST .../fork makes a session from another's conversation at a run, once
// per ID; POST .../rewind makes a session go on from an earlier run; both
// refuse a point inside the active run (409) and a run the session does
// not have (404), and a key limited to a prefix forks only under it
// (docs/contract.md §19).
func TestForkAndRewindRoutes(t *testing.T) {
	const team = "fork-team-key-0123456789"
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: "fork-full-key-0123456789"}, {Key: team, Prefix: "forkt-"}}})
	m := model(t, `{"repeat":true,"turns":[{"text":["answer"]}]}`)
	for i := 1; i <= 2; i++ {
		s.send(t, "forkt-src", map[string]any{"prompt": "prompt", "model": m, "tools": []string{}})
		waitForEvent(t, testCtx(t), "forkt-src", keel.TypeRunCompleted, i)
	}
	history := func(id string) api.HistoryPage {
		t.Helper()
		var page api.HistoryPage
		if err := json.Unmarshal(s.call(t, http.MethodGet, "/v1/sessions/"+id+"/history", nil).must(t, http.StatusOK).raw, &page); err != nil {
			t.Fatal(err)
		}
		return page
	}
	src := history("forkt-src")
	if len(src.Messages) != 4 {
		t.Fatalf("source history: %+v", src)
	}

	fork := func(body map[string]any, status int) gateway.ForkResponse {
		t.Helper()
		var out gateway.ForkResponse
		r := s.call(t, http.MethodPost, "/v1/sessions/forkt-src/fork", body).must(t, status)
		if status == http.StatusCreated {
			if err := json.Unmarshal(r.raw, &out); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	f := fork(map[string]any{"run": 1, "into": "forkt-f1"}, http.StatusCreated)
	if f.SessionID != "forkt-f1" || f.Parent.Source != "forkt-src" || f.Parent.Run != 1 || f.Parent.Revision != 1 {
		t.Fatalf("fork answer %+v", f)
	}
	if again := fork(map[string]any{"run": 1, "into": "forkt-f1"}, http.StatusCreated); again != f {
		t.Fatalf("the same fork again: %+v, want %+v", again, f)
	}
	fork(map[string]any{"run": 2, "into": "forkt-f1"}, http.StatusBadRequest)
	fork(map[string]any{"run": 3}, http.StatusNotFound)
	fork(map[string]any{}, http.StatusBadRequest)
	fork(map[string]any{"run": 1, "into": "forkt-x/../y"}, http.StatusBadRequest)
	if got := history("forkt-f1").Messages; len(got) != 2 || got[0].Content != "prompt" {
		t.Fatalf("the fork's history: %+v", got)
	}
	var st api.SessionStatus
	if err := json.Unmarshal(s.call(t, http.MethodGet, "/v1/sessions/forkt-f1", nil).must(t, http.StatusOK).raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Parent == nil || *st.Parent != f.Parent {
		t.Fatalf("the fork's parent %+v, want %+v", st.Parent, f.Parent)
	}

	// A key limited to a prefix: a generated ID is under it, another
	// prefix is refused.
	as := *s
	as.key = team
	r := as.call(t, http.MethodPost, "/v1/sessions/forkt-src/fork", map[string]any{"run": 2}).must(t, http.StatusCreated)
	var gen gateway.ForkResponse
	if err := json.Unmarshal(r.raw, &gen); err != nil || !strings.HasPrefix(gen.SessionID, "forkt-") {
		t.Fatalf("generated fork %s (%v)", r.raw, err)
	}
	as.call(t, http.MethodPost, "/v1/sessions/forkt-src/fork", map[string]any{"run": 2, "into": "elsewhere"}).must(t, http.StatusForbidden)

	var rw api.RewindResult
	if err := json.Unmarshal(s.call(t, http.MethodPost, "/v1/sessions/forkt-src/rewind", map[string]any{"run": 1}).must(t, http.StatusOK).raw, &rw); err != nil {
		t.Fatal(err)
	}
	if rw.FromRun != 2 || rw.Revision != 3 || rw.Messages != 2 {
		t.Fatalf("rewind answer %+v", rw)
	}
	if got := history("forkt-src"); len(got.Messages) != 2 || got.Revision != 3 {
		t.Fatalf("history after the rewind: %+v", got)
	}
	s.call(t, http.MethodPost, "/v1/sessions/forkt-src/rewind", map[string]any{"run": 2}).must(t, http.StatusNotFound)

	// While a run is active: both are 409.
	gate := model(t, `{"turns":[{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"fork-active"}}]},{"text":["ok"]}]}`)
	s.send(t, "forkt-busy", map[string]any{"prompt": "wait", "model": gate, "tools": []string{"gate"}})
	waitForEvent(t, testCtx(t), "forkt-busy", keel.TypeToolStarted, 1)
	if r := s.call(t, http.MethodPost, "/v1/sessions/forkt-busy/rewind", map[string]any{"run": 0}).must(t, http.StatusConflict); r.code() != "run_active" {
		t.Fatalf("rewind while active: %s", r.raw)
	}
	if r := s.call(t, http.MethodPost, "/v1/sessions/forkt-busy/fork", map[string]any{"run": 1}).must(t, http.StatusConflict); r.code() != "run_active" {
		t.Fatalf("fork inside the active run: %s", r.raw)
	}
	shared.gates.open("fork-active")
	waitForEvent(t, testCtx(t), "forkt-busy", keel.TypeRunCompleted, 1)
}
