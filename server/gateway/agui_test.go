package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// aguiEvent is one AG-UI event as the gateway sent it.
type aguiEvent map[string]any

func (e aguiEvent) str(k string) string { s, _ := e[k].(string); return s }

// seq is the durable sequence of the keel event the AG-UI event came from
// (metadata.keel.seq), 0 when none.
func (e aguiEvent) seq() int64 {
	meta, _ := e["metadata"].(map[string]any)
	k, _ := meta["keel"].(map[string]any)
	n, _ := k["seq"].(float64)
	return int64(n)
}

// outcome is a RUN_FINISHED's outcome type.
func (e aguiEvent) outcome() map[string]any { o, _ := e["outcome"].(map[string]any); return o }

// summary is the event in one line, for comparing sequences.
func (e aguiEvent) summary() string {
	switch t := e.str("type"); t {
	case "STEP_STARTED", "STEP_FINISHED":
		return t + " " + e.str("stepName")
	case "TEXT_MESSAGE_CONTENT":
		return t + " " + e.str("delta")
	case "TOOL_CALL_START":
		return t + " " + e.str("toolCallId") + " " + e.str("toolCallName")
	case "TOOL_CALL_ARGS":
		return t + " " + e.str("toolCallId") + " " + e.str("delta")
	case "TOOL_CALL_END":
		return t + " " + e.str("toolCallId")
	case "TOOL_CALL_RESULT":
		return t + " " + e.str("toolCallId") + " " + e.str("content")
	case "CUSTOM":
		return t + " " + e.str("name")
	case "RUN_FINISHED":
		return t + " " + fmt.Sprint(e.outcome()["type"])
	case "RUN_ERROR":
		return t + " " + e.str("code")
	default:
		return t
	}
}

func summaries(evs []aguiEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.summary())
	}
	return out
}

// aguiStream is an open POST /v1/ag-ui response.
type aguiStream struct{ st *sseStream }

// aguiOpen posts a RunAgentInput and checks the answer is an event stream.
func (s *stack) aguiOpen(t testing.TB, ctx context.Context, input map[string]any) *aguiStream {
	t.Helper()
	body, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/v1/ag-ui", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if s.key != "" {
		req.Header.Set("Authorization", bearer(s.key))
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST /v1/ag-ui: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("POST /v1/ag-ui: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	t.Cleanup(st.close)
	return &aguiStream{st: st}
}

// next reads the next AG-UI event; ok is false once the stream ended.
func (a *aguiStream) next(t testing.TB) (ev aguiEvent, ok bool) {
	t.Helper()
	for {
		raw, err := a.st.next()
		if errors.Is(err, io.EOF) {
			return nil, false
		}
		if err != nil {
			t.Fatalf("AG-UI stream: %v", err)
		}
		if raw.data == "" {
			continue // a comment
		}
		if raw.event != "" || raw.id != "" {
			t.Fatalf("AG-UI events carry data only, got event %q id %q", raw.event, raw.id)
		}
		if err := json.Unmarshal([]byte(raw.data), &ev); err != nil {
			t.Fatalf("AG-UI event is not a JSON object: %v: %s", err, raw.data)
		}
		return ev, true
	}
}

// rest reads events until the stream ends.
func (a *aguiStream) rest(t testing.TB) []aguiEvent {
	t.Helper()
	var out []aguiEvent
	for {
		ev, ok := a.next(t)
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// until reads events up to one whose summary is want.
func (a *aguiStream) until(t testing.TB, want string) []aguiEvent {
	t.Helper()
	var out []aguiEvent
	for {
		ev, ok := a.next(t)
		if !ok {
			t.Fatalf("AG-UI stream ended before %q: %v", want, summaries(out))
		}
		out = append(out, ev)
		if ev.summary() == want {
			return out
		}
	}
}

// aguiInput is a RunAgentInput with one user message.
func aguiInput(thread, runID, prompt string, keelProps map[string]any) map[string]any {
	return map[string]any{
		"threadId": thread, "runId": runID,
		"messages":       []any{map[string]any{"id": "u1", "role": "user", "content": prompt}},
		"tools":          []any{},
		"context":        []any{},
		"state":          map[string]any{},
		"forwardedProps": map[string]any{"keel": keelProps, "somethingElse": true},
	}
}

// durableContiguous checks that the keel events behind the AG-UI events
// are the sequences from, from+1, … with none skipped or repeated (an
// event can map to several AG-UI events, all with its sequence).
func durableContiguous(t testing.TB, evs []aguiEvent, from int64) int64 {
	t.Helper()
	last := from - 1
	for _, e := range evs {
		n := e.seq()
		switch {
		case n == 0 || n == last:
		case n == last+1:
			last = n
		default:
			t.Fatalf("durable events skipped or repeated: %d after %d in %v", n, last, summaries(evs))
		}
	}
	return last
}

// A scripted run with text and a tool call streams as exactly this AG-UI
// sequence: a step each model turn, the text as one message closed with
// its response, the tool call whole, its result, and RUN_FINISHED with
// the run's text.
func TestAGUIRunEvents(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	shared.gates.open("agui-events")
	m := model(t, `{"turns":[
	  {"text":["Let me ","check."],"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"agui-events"}}],"usage":{"input_tokens":10,"output_tokens":5}},
	  {"text":["Done."],"usage":{"input_tokens":20,"output_tokens":2}}]}`)
	evs := s.aguiOpen(t, testCtx(t), aguiInput("agui-events", "run-a", "go", map[string]any{"model": m, "tools": []string{"gate"}})).rest(t)

	want := []string{
		"RUN_STARTED",
		"CUSTOM run.started",
		"STEP_STARTED step 1",
		"TEXT_MESSAGE_START",
		"TEXT_MESSAGE_CONTENT Let me ",
		"TEXT_MESSAGE_CONTENT check.",
		"CUSTOM usage.updated",
		"TEXT_MESSAGE_END",
		"CUSTOM model_call.completed",
		"TOOL_CALL_START g1 gate",
		`TOOL_CALL_ARGS g1 {"key":"agui-events"}`,
		"TOOL_CALL_END g1",
		"CUSTOM tool.started",
		"TOOL_CALL_RESULT g1 gate agui-events opened",
		"STEP_FINISHED step 1",
		"STEP_STARTED step 2",
		"TEXT_MESSAGE_START",
		"TEXT_MESSAGE_CONTENT Done.",
		"CUSTOM usage.updated",
		"TEXT_MESSAGE_END",
		"CUSTOM model_call.completed",
		"STEP_FINISHED step 2",
		"RUN_FINISHED success",
	}
	if diff := cmp.Diff(want, summaries(evs)); diff != "" {
		t.Fatalf("AG-UI events (-want +got):\n%s", diff)
	}
	start, last := evs[0], evs[len(evs)-1]
	if start.str("threadId") != "agui-events" || start.str("runId") != "run-a" ||
		last.str("threadId") != "agui-events" || last.str("runId") != "run-a" {
		t.Fatalf("RUN_STARTED %v / RUN_FINISHED %v: want the input's threadId and runId", start, last)
	}
	if last["result"] != "Done." {
		t.Fatalf("RUN_FINISHED result %v, want the run's text", last["result"])
	}
	if u, _ := last["usage"].([]any); len(u) != 1 || u[0].(map[string]any)["inputTokens"] != float64(30) {
		t.Fatalf("RUN_FINISHED usage %v", last["usage"])
	}
	// The tool call belongs to the assistant message of its step's text.
	if msg, call := evs[3].str("messageId"), evs[9].str("parentMessageId"); msg == "" || msg != call {
		t.Fatalf("message %q, tool call parent %q", msg, call)
	}
	if evs[3].str("messageId") == evs[16].str("messageId") || evs[3]["role"] != "assistant" {
		t.Fatalf("each step's text is its own assistant message: %v, %v", evs[3], evs[16])
	}
	if durableContiguous(t, evs, 1) != last.seq() {
		t.Fatal("the last AG-UI event is not the run's last durable event")
	}
}

// ask_user ends the AG-UI run with an interrupt carrying the request; the
// next request's resume entry answers it with respond, and the same keel
// run streams on from the request, nothing repeated or skipped, to its
// end.
func TestAGUIInterruptAndResume(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[
	  {"text":["Asking."],"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["Blue it is."]}]}`)
	props := map[string]any{"model": m, "tools": []string{"ask_user"}}
	first := s.aguiOpen(t, testCtx(t), aguiInput("agui-ask", "run-1", "pick", props)).rest(t)
	fin := first[len(first)-1]
	if fin.summary() != "RUN_FINISHED interrupt" || fin.str("runId") != "run-1" {
		t.Fatalf("first AG-UI run: %v", summaries(first))
	}
	ins, _ := fin.outcome()["interrupts"].([]any)
	if len(ins) != 1 {
		t.Fatalf("interrupts %v", fin.outcome())
	}
	in := ins[0].(map[string]any)
	id, _ := in["id"].(string)
	if id == "" || in["reason"] != gateway.InterruptReasonHostInput || in["message"] != "Which colour?" || in["toolCallId"] != "q1" ||
		!cmp.Equal(in["responseSchema"], map[string]any{"type": "string"}) {
		t.Fatalf("interrupt %v", in)
	}
	// The keel request is the one the interrupt names, and still open.
	r := s.call(t, http.MethodGet, "/v1/sessions/agui-ask/requests", nil).must(t, http.StatusOK)
	if !strings.Contains(string(r.raw), `"request_id":"`+id+`"`) {
		t.Fatalf("open requests %s, want %s", r.raw, id)
	}
	last := durableContiguous(t, first, 1)

	// A wrong answer is refused before anything streams; the run still waits.
	bad := aguiInput("agui-ask", "run-2", "pick", props)
	bad["resume"] = []any{map[string]any{"interruptId": id, "status": "resolved", "payload": 42}}
	s.call(t, http.MethodPost, "/v1/ag-ui", bad).must(t, http.StatusBadRequest)
	bad["resume"] = []any{map[string]any{"interruptId": "nope/ask_user", "status": "resolved", "payload": "x"}}
	s.call(t, http.MethodPost, "/v1/ag-ui", bad).must(t, http.StatusNotFound)
	// A new prompt while the run waits is refused too.
	s.call(t, http.MethodPost, "/v1/ag-ui", aguiInput("agui-ask", "run-x", "other", props)).must(t, http.StatusConflict)

	resume := aguiInput("agui-ask", "run-2", "pick", props)
	resume["resume"] = []any{map[string]any{"interruptId": id, "status": "resolved", "payload": "blue"}}
	second := s.aguiOpen(t, testCtx(t), resume).rest(t)
	want := []string{
		"RUN_STARTED",
		"STEP_STARTED step 1", // the step the question was asked in goes on
		"CUSTOM host_input.resolved",
		"TOOL_CALL_RESULT q1 blue",
		"STEP_FINISHED step 1",
		"STEP_STARTED step 2",
		"TEXT_MESSAGE_START",
		"TEXT_MESSAGE_CONTENT Blue it is.",
		"CUSTOM usage.updated",
		"TEXT_MESSAGE_END",
		"CUSTOM model_call.completed",
		"STEP_FINISHED step 2",
		"RUN_FINISHED success",
	}
	if diff := cmp.Diff(want, summaries(second)); diff != "" {
		t.Fatalf("resumed AG-UI run (-want +got):\n%s", diff)
	}
	if second[0].str("runId") != "run-2" || second[len(second)-1]["result"] != "Blue it is." {
		t.Fatalf("resumed run: %v ... %v", second[0], second[len(second)-1])
	}
	durableContiguous(t, second, last+1)
	if r := s.call(t, http.MethodGet, "/v1/sessions/agui-ask/requests", nil).must(t, http.StatusOK); strings.Contains(string(r.raw), id) {
		t.Fatalf("request %s still open after the answer: %s", id, r.raw)
	}
}

// A cancelled keel run ends its AG-UI run with the cancelled outcome,
// whether it is cancelled through the API or by a resume entry that
// cancels the interrupt.
func TestAGUICancelled(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[{"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"agui-never"}}]}]}`)
	st := s.aguiOpen(t, testCtx(t), aguiInput("agui-cancel", "run-1", "wait", map[string]any{"model": m, "tools": []string{"gate"}}))
	st.until(t, "CUSTOM tool.started")
	s.call(t, http.MethodPost, "/v1/sessions/agui-cancel/cancel", nil).must(t, http.StatusAccepted)
	rest := st.rest(t)
	got := summaries(rest)
	if n := len(rest); n < 3 || rest[n-3].str("type") != "TOOL_CALL_RESULT" || rest[n-3].str("toolCallId") != "g1" ||
		!cmp.Equal([]string{"STEP_FINISHED step 1", "RUN_FINISHED cancelled"}, got[n-2:]) {
		t.Fatalf("after cancel: %v, want the call's result, the step's end and RUN_FINISHED cancelled", got)
	}
	if status := rest[len(rest)-3]["metadata"].(map[string]any)["keel"].(map[string]any)["status"]; status != string(keel.ToolInterrupted) {
		t.Fatalf("interrupted call's result has status %v", status)
	}

	m = model(t, `{"turns":[{"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Go on?"}}]}]}`)
	props := map[string]any{"model": m, "tools": []string{"ask_user"}}
	first := s.aguiOpen(t, testCtx(t), aguiInput("agui-decline", "run-1", "ask", props)).rest(t)
	ins := first[len(first)-1].outcome()["interrupts"].([]any)
	resume := aguiInput("agui-decline", "run-2", "ask", props)
	resume["resume"] = []any{map[string]any{"interruptId": ins[0].(map[string]any)["id"], "status": "cancelled"}}
	second := s.aguiOpen(t, testCtx(t), resume).rest(t)
	if got := summaries(second); got[len(got)-1] != "RUN_FINISHED cancelled" {
		t.Fatalf("a cancelled interrupt: %v", got)
	}
}

// A retried provider request drops the abandoned attempt's text: its
// message is closed, the reset names it, and the retry streams the whole
// text into a new message.
func TestAGUIRetryDropsAbandonedText(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[{"failures":[{"kind":"stream_cut","after_chunks":1}],"text":["Lost ","words."]}]}`)
	evs := s.aguiOpen(t, testCtx(t), aguiInput("agui-retry", "run-1", "go", map[string]any{"model": m})).rest(t)
	var msgs []string
	text := map[string]string{}
	abandoned := ""
	for i, e := range evs {
		switch e.str("type") {
		case "TEXT_MESSAGE_START":
			msgs = append(msgs, e.str("messageId"))
		case "TEXT_MESSAGE_CONTENT":
			text[e.str("messageId")] += e.str("delta")
		case "CUSTOM":
			if e.str("name") != keel.TypeProviderStreamReset {
				break
			}
			abandoned, _ = e["metadata"].(map[string]any)["keel"].(map[string]any)["abandoned_message_id"].(string)
			if len(msgs) != 1 || abandoned != msgs[0] || evs[i-1].summary() != "TEXT_MESSAGE_END" || evs[i-1].str("messageId") != abandoned {
				t.Fatalf("reset %v after %v: want the first attempt's message closed just before it", e, summaries(evs[:i]))
			}
		}
	}
	if len(msgs) != 2 || abandoned == "" || text[msgs[0]] != "Lost " || text[msgs[1]] != "Lost words." {
		t.Fatalf("messages %v with text %v (abandoned %q): %v", msgs, text, abandoned, summaries(evs))
	}
	if fin := evs[len(evs)-1]; fin.summary() != "RUN_FINISHED success" || fin["result"] != "Lost words." {
		t.Fatalf("end %v", fin)
	}
}

// Requests that are not a runnable RunAgentInput get typed errors, not
// streams.
func TestAGUIBadInput(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	for _, c := range []struct {
		name  string
		body  any
		code  string
		state int
	}{
		{"not JSON", "{", "invalid_input", http.StatusBadRequest},
		{"no runId", map[string]any{"threadId": "t1", "messages": []any{}}, "invalid_input", http.StatusBadRequest},
		{"bad threadId", aguiInput("bad thread", "r", "hi", nil), "invalid_input", http.StatusBadRequest},
		{"no user message", map[string]any{"threadId": "t1", "runId": "r", "messages": []any{map[string]any{"id": "a", "role": "assistant", "content": "hi"}}}, "invalid_input", http.StatusBadRequest},
		{"unknown keel option", aguiInput("t1", "r", "hi", map[string]any{"modle": "x"}), "invalid_input", http.StatusBadRequest},
		{"resume without a run", map[string]any{"threadId": "agui-none", "runId": "r", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": "x", "status": "resolved", "payload": 1}}}, "not_found", http.StatusNotFound},
	} {
		r := s.call(t, http.MethodPost, "/v1/ag-ui", c.body)
		if r.status != c.state || r.code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.raw, c.state, c.code)
		}
	}
}
