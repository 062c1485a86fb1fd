package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// delegationScripts are the scripts of the shared worker's agents: the
// planner hands one task to the researcher, which waits for the gate
// named key (so a reader can subscribe first), then streams its answer.
func delegationScripts(t *testing.T, key string) {
	t.Helper()
	shared.book.Add(t, "planner", `{"turns":[
	  {"tool_calls":[{"id":"d1","name":"agent__researcher","arguments":{"task":"find the facts"}}]},
	  {"text":["The researcher says hello."]}]}`)
	shared.book.Add(t, "researcher", `{"chunk_delay":"20ms","turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"`+key+`"}}]},
	  {"text":["Hello ", "from ", "the child."]}]}`)
}

// docs/contract.md §21.2–21.4 over HTTP: a run names an agent in its
// body; the parent's event stream carries agent.started and
// agent.finished and the child's deltas with its path; a body that names
// an agent and sets its model too is refused before any call.
func TestGatewayRunsAnAgent(t *testing.T) {
	delegationScripts(t, "gw-agent")
	s := startGateway(t, gateway.Options{})
	ctx := testCtx(t)
	s.send(t, "gw-agent", map[string]any{"prompt": "research", "agent": "planner"})
	st := s.stream(t, ctx, "gw-agent", "?after=0", nil)
	evs := st.until(t, keel.TypeAgentStarted)
	shared.gates.open("gw-agent")
	evs = append(evs, st.until(t, keel.TypeRunCompleted)...)
	var relayed strings.Builder
	var started, finished bool
	var child string
	for _, ev := range evs {
		env := ev.envelope(t)
		switch env.Type {
		case keel.TypeAgentStarted:
			started = true
			var e keel.AgentStarted
			if err := json.Unmarshal(env.Data, &e); err != nil || !strings.HasPrefix(e.SessionID, "gw-agent--researcher-1-") {
				t.Errorf("agent.started %s", ev.data)
			}
			child = e.SessionID
		case keel.TypeAgentFinished:
			finished = true
		case keel.TypeTextDelta:
			if env.Path == "researcher-1" {
				e, err := env.Event()
				if err != nil {
					t.Fatal(err)
				}
				relayed.WriteString(e.(keel.TextDelta).Text)
			}
		}
	}
	if !started || !finished {
		t.Fatalf("agent.started %v, agent.finished %v", started, finished)
	}
	if relayed.String() != "Hello from the child." {
		t.Errorf("relayed text %q", relayed.String())
	}
	// The child's own log is whole, and its state says whose child it is.
	r := s.call(t, http.MethodGet, "/v1/sessions/"+child, nil).must(t, http.StatusOK)
	var state struct {
		State     string          `json:"state"`
		Delegated json.RawMessage `json:"delegated"`
	}
	if err := json.Unmarshal(r.raw, &state); err != nil || state.State != "completed" || !strings.Contains(string(state.Delegated), `"parent":"gw-agent"`) {
		t.Errorf("child state %s (%v)", r.raw, err)
	}
	page := s.call(t, http.MethodGet, "/v1/sessions/"+child+"/events", nil).must(t, http.StatusOK)
	if !strings.Contains(string(page.raw), `"run.completed"`) || !strings.Contains(string(page.raw), "Hello from the child.") {
		t.Errorf("child log %s", page.raw)
	}

	bad := s.call(t, http.MethodPost, "/v1/sessions/gw-agent-bad/runs", map[string]any{"prompt": "x", "agent": "planner", "model": "scripted:demo"})
	if bad.status != http.StatusBadRequest || !strings.Contains(string(bad.raw), "defines its model") {
		t.Errorf("agent with a model: %d %s", bad.status, bad.raw)
	}
	if ghost := s.call(t, http.MethodPost, "/v1/sessions/gw-agent-ghost/runs", map[string]any{"prompt": "x", "agent": "ghost"}); ghost.status != http.StatusBadRequest {
		t.Errorf("unknown agent: %d %s", ghost.status, ghost.raw)
	}
}

// The page shows a child as a card nested in its delegating call's card,
// its relayed text streaming into it, and its end (docs/contract.md
// §21.4).
func TestWebPageShowsNestedAgentCard(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	delegationScripts(t, "web-agent")
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	s.send(t, "web-agent", map[string]any{"prompt": "research", "agent": "planner"})
	b.open("web-agent")
	b.do("the child's card", chromedp.WaitVisible(chromedp.CSS(`.agent-card[data-path="researcher-1"]`)))
	shared.gates.open("web-agent")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	card := `document.querySelector('.tool-card[data-call="d1"] .agent-card[data-path="researcher-1"]')`
	text := poll[string](b, "the child's text in its card", `(() => { const c = `+card+`; return c && c.querySelector(".agent-text").textContent; })()`)
	if text != "Hello from the child." {
		t.Fatalf("the card shows %q", text)
	}
	if status := eval[string](b, card+`.dataset.status`); status != "completed" {
		t.Fatalf("card status %q", status)
	}
	if link := eval[string](b, card+`.querySelector(".session-link").textContent`); link != firstChild(t, "web-agent") {
		t.Fatalf("card links %q", link)
	}
	b.screenshot("nested-agent")
}

// AG-UI runs an agent named in forwardedProps.keel, and its child's text
// comes as assistant messages of their own, naming the child's path, its
// session and the delegating call (docs/contract.md §21.4).
func TestAGUIRunsAnAgentWithNestedMessages(t *testing.T) {
	delegationScripts(t, "agui-agent")
	shared.gates.open("agui-agent")
	s := startGateway(t, gateway.Options{})
	ctx := testCtx(t)
	a := s.aguiOpen(t, ctx, aguiInput("agui-agent", "r1", "research", map[string]any{"agent": "planner"}))
	evs := a.rest(t)
	var nested strings.Builder
	for _, ev := range evs {
		if ev.str("type") != "TEXT_MESSAGE_CONTENT" || !strings.Contains(ev.str("messageId"), "/agent/researcher-1/") {
			continue
		}
		nested.WriteString(ev.str("delta"))
	}
	if nested.String() != "Hello from the child." {
		t.Fatalf("nested text %q in %v", nested.String(), summaries(evs))
	}
	var meta map[string]any
	for _, ev := range evs {
		if ev.str("type") == "TEXT_MESSAGE_START" && strings.Contains(ev.str("messageId"), "/agent/") {
			m, _ := ev["metadata"].(map[string]any)
			meta, _ = m["keel"].(map[string]any)
			break
		}
	}
	if meta["path"] != "researcher-1" || meta["session_id"] != firstChild(t, "agui-agent") || meta["tool_call_id"] != "d1" {
		t.Fatalf("nested message metadata %v", meta)
	}
	if last := evs[len(evs)-1]; last.str("type") != "RUN_FINISHED" {
		t.Fatalf("last event %v", last)
	}
	bad := s.call(t, http.MethodPost, "/v1/ag-ui", aguiInput("agui-agent-bad", "r1", "x", map[string]any{"agent": "planner", "model": "scripted:demo"}))
	if bad.status != http.StatusBadRequest {
		t.Fatalf("agent with a model over AG-UI: %d %s", bad.status, bad.raw)
	}
}
