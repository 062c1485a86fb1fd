package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
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

// GET .../forks lists a session's forks; a key limited to a prefix sees
// only those under it, though an unlimited key forked the source into
// another prefix too, and neither the list nor truncated tells it of them.
// The prefix holds '_', a wildcard of SQL's LIKE: a fork whose ID matches
// it only as a wildcard ("fkxa-") stays hidden as well (docs/contract.md
// §19.1).
func TestForksRoute(t *testing.T) {
	const full, team, reader = "forks-full-key-0123456789", "forks-team-key-0123456789", "forks-read-key-0123456789"
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full},
		{Key: team, Prefix: "fk_a-"}, {Key: reader, Prefix: "fk_a-", Scope: gateway.ScopeRead}}})
	m := model(t, `{"repeat":true,"turns":[{"text":["answer"]}]}`)
	s.send(t, "fk_a-src", map[string]any{"prompt": "prompt", "model": m, "tools": []string{}})
	waitForEvent(t, testCtx(t), "fk_a-src", keel.TypeRunCompleted, 1)
	s.send(t, "fk_b-src", map[string]any{"prompt": "prompt", "model": m, "tools": []string{}})
	waitForEvent(t, testCtx(t), "fk_b-src", keel.TypeRunCompleted, 1)

	as := func(key string) *stack { c := *s; c.key = key; return &c }
	forks := func(s *stack, path string) gateway.ForksResponse {
		t.Helper()
		var out gateway.ForksResponse
		if err := json.Unmarshal(s.call(t, http.MethodGet, path, nil).must(t, http.StatusOK).raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	ids := func(l gateway.ForksResponse) []string {
		out := []string{}
		for _, f := range l.Forks {
			out = append(out, f.SessionID)
		}
		return out
	}
	// The team's own fork, and the unlimited key's into other prefixes.
	as(team).call(t, http.MethodPost, "/v1/sessions/fk_a-src/fork", map[string]any{"run": 1, "into": "fk_a-mine"}).must(t, http.StatusCreated)
	for _, into := range []string{"fk_b-theirs", "fkxa-wild", "fk_a-also"} {
		s.call(t, http.MethodPost, "/v1/sessions/fk_a-src/fork", map[string]any{"run": 1, "into": into}).must(t, http.StatusCreated)
	}
	// A fork of the other team's session into the team's prefix: not a
	// fork of fk_a-src.
	s.call(t, http.MethodPost, "/v1/sessions/fk_b-src/fork", map[string]any{"run": 1, "into": "fk_a-other"}).must(t, http.StatusCreated)

	// Visibility learns of the forks a little after their start: the
	// unlimited key asks until it lists all four.
	want := []string{"fk_a-also", "fk_a-mine", "fk_b-theirs", "fkxa-wild"}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for ; ; <-tick.C {
		l := forks(s, "/v1/sessions/fk_a-src/forks")
		if slices.Equal(ids(l), want) && !l.Truncated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forks of fk_a-src: %+v, want %v", l, want)
		}
	}
	// Now that visibility has them all, the team's keys see their own.
	for _, key := range []string{team, reader} {
		if l := forks(as(key), "/v1/sessions/fk_a-src/forks"); !slices.Equal(ids(l), []string{"fk_a-also", "fk_a-mine"}) || l.Truncated {
			t.Errorf("a key limited to fk_a- lists %+v", l)
		}
		// Exactly its two: not truncated, as the others are not counted.
		if l := forks(as(key), "/v1/sessions/fk_a-src/forks?limit=2"); len(l.Forks) != 2 || l.Truncated {
			t.Errorf("a key limited to fk_a-, limit 2: %+v", l)
		}
		if l := forks(as(key), "/v1/sessions/fk_a-src/forks?limit=1"); len(l.Forks) != 1 || !l.Truncated || !strings.HasPrefix(l.Forks[0].SessionID, "fk_a-") {
			t.Errorf("a key limited to fk_a-, limit 1: %+v", l)
		}
		// Another team's session answers as if it did not exist.
		if r := as(key).call(t, http.MethodGet, "/v1/sessions/fk_b-src/forks", nil).must(t, http.StatusNotFound); strings.Contains(string(r.raw), "fk_a-other") {
			t.Errorf("forks of fk_b-src to a key limited to fk_a-: %s", r.raw)
		}
	}
	// The bound: the first of them and truncated.
	if l := forks(s, "/v1/sessions/fk_a-src/forks?limit=3"); len(l.Forks) != 3 || !l.Truncated {
		t.Errorf("limit 3 of 4: %+v", l)
	}
	s.call(t, http.MethodGet, "/v1/sessions/fk_a-src/forks?limit=0", nil).must(t, http.StatusBadRequest)
	// A session without forks, and one that does not exist: none.
	for _, id := range []string{"fk_a-mine", "fk_a-nothing"} {
		if l := forks(s, "/v1/sessions/"+id+"/forks"); len(l.Forks) != 0 || l.Truncated {
			t.Errorf("forks of %s: %+v", id, l)
		}
	}
}
