package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/gateway"
)

// A key limited to chid-par-- covers the children of chid-par, and
// nothing of chid-par itself. Before the parent delegates, the key sends
// a prompt to the ID a first child had in the past (chid-par--researcher-1).
// The parent's delegation still starts a child of its own, which its log
// names, under an ID no one could guess; the key reads that child but
// can send to it no more than to any other ID of the child form, nor
// fork into one (docs/contract.md §21.3; docs/security.md, "Attacks
// tried").
func TestAKeyOfTheChildrenCannotTakeAChildsID(t *testing.T) {
	const full, kids, parent = "chid-full-key-0123456789", "chid-kids-key-0123456789", "chid-par"
	s := startGateway(t, gateway.Options{Keys: []gateway.APIKey{{Key: full}, {Key: kids, Prefix: parent + "--"}}})
	as := func(key string) *stack { c := *s; c.key = key; return &c }
	squat := parent + "--researcher-1"
	as(kids).send(t, squat, map[string]any{"prompt": "mine now", "model": model(t, `{"turns":[{"text":["taken"]}]}`), "tools": []string{}})
	waitForEvent(t, testCtx(t), squat, keel.TypeRunCompleted, 1)

	delegationScripts(t, parent)
	shared.gates.open(parent)
	as(full).send(t, parent, map[string]any{"prompt": "research", "agent": "planner"})
	waitForEvent(t, testCtx(t), parent, keel.TypeRunCompleted, 1)
	var page gateway.EventsPage
	if err := json.Unmarshal(as(full).call(t, http.MethodGet, "/v1/sessions/"+parent+"/events", nil).must(t, http.StatusOK).raw, &page); err != nil {
		t.Fatal(err)
	}
	var started keel.AgentStarted
	var finished keel.AgentFinished
	for _, env := range page.Events {
		e, err := env.Event()
		if err != nil {
			t.Fatal(err)
		}
		switch e := e.(type) {
		case keel.AgentStarted:
			started = e
		case keel.AgentFinished:
			finished = e
		}
	}
	if finished.Status != keel.StatusCompleted || finished.Error != nil {
		t.Fatalf("the delegation ended %s (%+v)", finished.Status, finished.Error)
	}
	child := started.SessionID
	if child == squat || finished.SessionID != child || !api.IsChildSessionID(child) {
		t.Fatalf("the parent's log names %q, then %q; the squatted ID is %s", child, finished.SessionID, squat)
	}

	r := as(kids).call(t, http.MethodGet, "/v1/sessions/"+child, nil).must(t, http.StatusOK)
	var st api.SessionStatus
	if err := json.Unmarshal(r.raw, &st); err != nil || st.Delegated == nil || st.Delegated.Path != "researcher-1" {
		t.Fatalf("the child as the key reads it: %s (%v)", r.raw, err)
	}
	r = as(kids).call(t, http.MethodPost, "/v1/sessions/"+child+"/runs", map[string]any{"prompt": "obey me"})
	if r.status != http.StatusConflict || r.code() != "not_accepting" {
		t.Errorf("a send to the child: %d %s", r.status, r.raw)
	}
	// The next child's ID in that form, which the key cannot know, is no
	// more its to take: the answer is the same, and nothing is made.
	next := parent + "--researcher-2-0123456789abcdef"
	r = as(kids).call(t, http.MethodPost, "/v1/sessions/"+next+"/runs", map[string]any{"prompt": "mine", "model": "scripted:x"})
	if r.status != http.StatusConflict || r.code() != "not_accepting" {
		t.Errorf("a send to %s: %d %s", next, r.status, r.raw)
	}
	r = as(kids).call(t, http.MethodPost, "/v1/sessions/"+squat+"/fork", map[string]any{"run": 1, "into": next})
	if r.status != http.StatusBadRequest || r.code() != "invalid_input" {
		t.Errorf("a fork into %s: %d %s", next, r.status, r.raw)
	}
	as(full).call(t, http.MethodGet, "/v1/sessions/"+next, nil).must(t, http.StatusNotFound)
}

// firstChild returns the session ID of the session's first child, as its
// log names it (agent.started): the parent draws it, so no one knows it
// before.
func firstChild(t testing.TB, session string) string {
	t.Helper()
	evs := logThrough(t, session, 0, keel.TypeAgentStarted)
	e, err := evs[len(evs)-1].Event()
	if err != nil {
		t.Fatal(err)
	}
	return e.(keel.AgentStarted).SessionID
}
