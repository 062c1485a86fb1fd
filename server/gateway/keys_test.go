package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// Keys can be narrowed, and what a key may do is checked on every route,
// AG-UI included: a read-only key reads but gets 403 forbidden on every
// POST and DELETE, changing nothing; a key with a session prefix gets 404
// not_found for every other session, the same whether it exists or not,
// lists only its own sessions, and is refused routes that name no
// session unless they check sessions themselves.
func TestKeyScopes(t *testing.T) {
	const (
		full       = "scope-full-0123456789"
		read       = "scope-read-0123456789"
		teamA      = "scope-team-a-0123456789"
		teamARead  = "scope-team-a-read-0123456789"
		teamPrefix = "scopes-a-"
	)
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{
		{Key: full}, {Key: read, Scope: gateway.ScopeRead},
		{Key: teamA, Prefix: teamPrefix}, {Key: teamARead, Scope: gateway.ScopeRead, Prefix: teamPrefix},
	}})
	s.gw.Handle(http.MethodGet, "/v1/hello", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello"))
	}))
	as := func(key string) *stack { c := *s; c.key = key; return &c }
	m := model(t, `{"turns":[{"text":["hi"]}]}`)
	as(full).send(t, "scopes-other", map[string]any{"prompt": "hi", "model": m})
	waitForEvent(t, testCtx(t), "scopes-other", keel.TypeRunCompleted, 1)

	// Read-only: every write is 403, before anything happens.
	ro := as(read)
	ro.call(t, http.MethodGet, "/v1/sessions/scopes-other", nil).must(t, http.StatusOK)
	ro.call(t, http.MethodGet, "/v1/sessions/scopes-other/events", nil).must(t, http.StatusOK)
	ro.call(t, http.MethodGet, "/v1/sessions/scopes-other/requests", nil).must(t, http.StatusOK)
	ro.call(t, http.MethodGet, "/v1/sessions", nil).must(t, http.StatusOK)
	ro.stream(t, testCtx(t), "scopes-other", "", nil).until(t, keel.TypeRunCompleted)
	writes := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/sessions/scopes-ro/runs", map[string]any{"prompt": "hi", "model": m}},
		{http.MethodPost, "/v1/sessions/scopes-other/runs", map[string]any{"prompt": "hi", "model": m}},
		{http.MethodPost, "/v1/sessions/scopes-other/steer", map[string]any{"text": "x"}},
		{http.MethodDelete, "/v1/sessions/scopes-other/steer/steer-1", nil},
		{http.MethodPost, "/v1/sessions/scopes-other/respond", map[string]any{"request_id": "x", "answer": 1}},
		{http.MethodPost, "/v1/sessions/scopes-other/cancel", nil},
		{http.MethodPost, "/v1/ag-ui", aguiInput("scopes-ro-agui", "r1", "hi", map[string]any{"model": m})},
	}
	for _, w := range writes {
		r := ro.call(t, w.method, w.path, w.body).must(t, http.StatusForbidden)
		if r.code() != gateway.CodeForbidden || strings.Contains(string(r.raw), read) {
			t.Fatalf("read-only %s %s: %s", w.method, w.path, r.raw)
		}
	}
	for _, id := range []string{"scopes-ro", "scopes-ro-agui"} {
		as(full).call(t, http.MethodGet, "/v1/sessions/"+id, nil).must(t, http.StatusNotFound)
	}
	state := as(full).call(t, http.MethodGet, "/v1/sessions/scopes-other", nil).must(t, http.StatusOK)
	if state.body["runs"] != float64(1) {
		t.Fatalf("a read-only key's refused prompt ran: %s", state.raw)
	}

	// Prefixed: other sessions answer as missing ones do, on every route.
	team := as(teamA)
	team.send(t, teamPrefix+"1", map[string]any{"prompt": "hi", "model": shared.book.Add(t, t.Name()+"-team", `{"turns":[{"text":["hi"]}]}`)})
	waitForEvent(t, testCtx(t), teamPrefix+"1", keel.TypeRunCompleted, 1)
	team.call(t, http.MethodGet, "/v1/sessions/"+teamPrefix+"1", nil).must(t, http.StatusOK)
	routes := []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "", nil},
		{http.MethodGet, "/history", nil},
		{http.MethodGet, "/events", nil},
		{http.MethodGet, "/requests", nil},
		{http.MethodPost, "/runs", map[string]any{"prompt": "hi", "model": m}},
		{http.MethodPost, "/steer", map[string]any{"text": "x"}},
		{http.MethodDelete, "/steer/steer-1", nil},
		{http.MethodPost, "/respond", map[string]any{"request_id": "x", "answer": 1}},
		{http.MethodPost, "/cancel", nil},
	}
	for _, rt := range routes {
		// scopes-other exists, scopes-nobody does not: the same answer.
		var bodies []map[string]any
		for _, id := range []string{"scopes-other", "scopes-nobody"} {
			r := team.call(t, rt.method, "/v1/sessions/"+id+rt.path, rt.body).must(t, http.StatusNotFound)
			r.body["message"] = strings.ReplaceAll(r.body["message"].(string), id, "ID")
			bodies = append(bodies, r.body)
		}
		a, _ := json.Marshal(bodies[0])
		b, _ := json.Marshal(bodies[1])
		if string(a) != string(b) || bodies[0]["code"] != "not_found" {
			t.Fatalf("%s %s: an existing session answers %s, a missing one %s", rt.method, rt.path, a, b)
		}
	}
	r := team.callWith(t, http.MethodGet, "/v1/sessions/scopes-other/events", nil,
		map[string]string{"Accept": "text/event-stream", "Authorization": bearer(teamA)}).must(t, http.StatusNotFound)
	if r.code() != "not_found" {
		t.Fatalf("stream of another team's session: %s", r.raw)
	}
	r = team.call(t, http.MethodPost, "/v1/ag-ui", aguiInput("scopes-other", "r1", "hi", map[string]any{"model": m})).must(t, http.StatusNotFound)
	if r.code() != "not_found" {
		t.Fatalf("AG-UI on another team's session: %s", r.raw)
	}
	if st := as(full).call(t, http.MethodGet, "/v1/sessions/scopes-other", nil).must(t, http.StatusOK); st.body["runs"] != float64(1) {
		t.Fatalf("a prefixed key's refused prompt ran: %s", st.raw)
	}
	// A route that names no session and does not check one is refused.
	team.call(t, http.MethodGet, "/v1/hello", nil).must(t, http.StatusForbidden)
	as(full).call(t, http.MethodGet, "/v1/hello", nil).must(t, http.StatusOK)

	// The list shows the prefix's sessions only (visibility is eventually
	// consistent and has nothing to wait on: ask again until the team's
	// session shows).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ctx := testCtx(t); ; <-tick.C {
		var list gateway.SessionsResponse
		raw := team.call(t, http.MethodGet, "/v1/sessions?limit=200", nil).must(t, http.StatusOK).raw
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ss := range list.Sessions {
			if !strings.HasPrefix(ss.ID, teamPrefix) {
				t.Fatalf("a %s key lists %s", teamPrefix, ss.ID)
			}
			ids = append(ids, ss.ID)
		}
		if slices.Contains(ids, teamPrefix+"1") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the team's session never showed: %s", raw)
		}
	}

	// Read-only and prefixed: both apply.
	tr := as(teamARead)
	tr.call(t, http.MethodGet, "/v1/sessions/"+teamPrefix+"1", nil).must(t, http.StatusOK)
	tr.call(t, http.MethodPost, "/v1/sessions/"+teamPrefix+"1/cancel", nil).must(t, http.StatusForbidden)
	tr.call(t, http.MethodGet, "/v1/sessions/scopes-other", nil).must(t, http.StatusNotFound)

	// The prefixed key drives its own sessions through AG-UI.
	a := team.aguiOpen(t, testCtx(t), aguiInput(teamPrefix+"agui", "r1", "hi",
		map[string]any{"model": shared.book.Add(t, t.Name()+"-agui", `{"turns":[{"text":["hi"]}]}`)}))
	a.until(t, "RUN_FINISHED success")
}
