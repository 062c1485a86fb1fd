package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/gateway"
)

// gateThenText calls the gate tool keyed key, then streams ten text
// chunks and ends its turn.
func gateThenText(key string) string {
	return `{"chunk_delay":"1ms","turns":[
	  {"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"` + key + `"}}]},
	  {"text":["one ","two ","three ","four ","five ","six ","seven ","eight ","nine ","ten"]}]}`
}

// A prompt sent over HTTP starts a run; its event stream carries every
// durable event with its seq as id and the deltas between them without
// one, to the run's end; state, history and event pages agree.
func TestSendAndStreamToTheEnd(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	ctx := testCtx(t)
	run := s.send(t, "stream-end", map[string]any{"prompt": "go", "model": model(t, gateThenText("stream-end")), "tools": []string{"gate"}})
	if run.RunID != "stream-end/run-1" || run.Number != 1 || run.Revision != 0 || run.BaseSeq != 0 {
		t.Fatalf("run answer %+v", run)
	}
	st := s.stream(t, ctx, "stream-end", "?after=0", nil)
	evs := st.until(t, keel.TypeToolStarted)
	// The stream is open before the deltas exist, so it gets all of them.
	shared.gates.open("stream-end")
	evs = append(evs, st.until(t, keel.TypeRunCompleted)...)

	seqs := durableSeqs(t, evs)
	contiguous(t, seqs, 1)
	var text strings.Builder
	lastDurable := 0
	for i, ev := range evs {
		if ev.id != "" {
			lastDurable = i
		}
	}
	deltasBetween := 0
	sawDurable := false
	for i, ev := range evs {
		if ev.id != "" {
			sawDurable = true
			continue
		}
		env := ev.envelope(t)
		if env.Seq != 0 || env.AfterSeq == 0 || env.Type != ev.event {
			t.Fatalf("delta envelope %+v", env)
		}
		switch ev.event {
		case keel.TypeToolCallDelta:
			// The first turn's call, when the stream was open in time.
			continue
		case keel.TypeTextDelta:
		default:
			t.Fatalf("event without id of type %q: %s", ev.event, ev.data)
		}
		var d keel.TextDelta
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatal(err)
		}
		text.WriteString(d.Text)
		if sawDurable && i < lastDurable {
			deltasBetween++
		}
	}
	if text.String() != "one two three four five six seven eight nine ten" || deltasBetween == 0 {
		t.Fatalf("deltas %q (%d between durable events)", text.String(), deltasBetween)
	}

	state := s.call(t, http.MethodGet, "/v1/sessions/stream-end", nil).must(t, http.StatusOK)
	if state.body["state"] != string(keel.StateCompleted) || state.body["last_seq"] != float64(seqs[len(seqs)-1]) {
		t.Fatalf("state %s", state.raw)
	}
	hist := s.call(t, http.MethodGet, "/v1/sessions/stream-end/history?limit=10", nil).must(t, http.StatusOK)
	if msgs, _ := hist.body["messages"].([]any); len(msgs) < 3 {
		t.Fatalf("history %s", hist.raw)
	}

	// Pages of 3 give the same events, in order, each once.
	var paged []int64
	after := int64(0)
	for range 100 {
		p := s.call(t, http.MethodGet, "/v1/sessions/stream-end/events?after="+itoa(after)+"&limit=3", nil).must(t, http.StatusOK)
		var page gateway.EventsPage
		if err := json.Unmarshal(p.raw, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 3 {
			t.Fatalf("page of %d events with limit 3", len(page.Events))
		}
		for _, ev := range page.Events {
			paged = append(paged, ev.Seq)
		}
		after = page.NextAfter
		if !page.More {
			break
		}
	}
	if len(paged) != len(seqs) {
		t.Fatalf("pages gave %v, stream %v", paged, seqs)
	}
	contiguous(t, paged, 1)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// While a run is active a prompt gets 409 run_active, unless it asks to be
// queued or to steer the active run.
func TestRunActive(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"repeat":true,"turns":[{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"active"}}]},{"text":["ok"]}]}`)
	first := s.send(t, "active", map[string]any{"prompt": "one", "model": m, "tools": []string{"gate"}})

	r := s.call(t, http.MethodPost, "/v1/sessions/active/runs", map[string]any{"prompt": "two"}).must(t, http.StatusConflict)
	if r.code() != "run_active" || r.body["keel_code"] != string(keel.CodeRunActive) || r.body["message"] == "" {
		t.Fatalf("409 body %s", r.raw)
	}
	r = s.call(t, http.MethodPost, "/v1/sessions/active/runs", map[string]any{"prompt": "two", "if_active": "sometimes"}).
		must(t, http.StatusBadRequest)
	if r.code() != "invalid_input" {
		t.Fatalf("400 body %s", r.raw)
	}
	steered := s.send(t, "active", map[string]any{"prompt": "also this", "if_active": "steer"})
	if steered.RunID != first.RunID || steered.SteeringID == "" {
		t.Fatalf("steer answer %+v", steered)
	}
	queued := s.send(t, "active", map[string]any{"prompt": "three", "model": m, "tools": []string{}, "if_active": "queue"})
	if !queued.Queued || queued.Number != 2 {
		t.Fatalf("queue answer %+v", queued)
	}
	st := s.stream(t, testCtx(t), "active", "", nil)
	shared.gates.open("active")
	// Run 1 ends, then the queued run 2 (no tools: the script's gate call
	// is unavailable to it) runs to its end.
	st.until(t, keel.TypeRunCompleted)
	for {
		ev := st.nextEvent(t)
		if ev.id != "" && ev.envelope(t).RunID == queued.RunID && ev.envelope(t).Terminal() {
			break
		}
	}
}

// Steering is accepted, retracted while staged, and reported
// already_applied once it entered the conversation.
func TestSteerAndRetract(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[
	  {"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"steer-1"}}]},
	  {"tool_calls":[{"id":"g2","name":"gate","arguments":{"key":"steer-2"}}]},
	  {"text":["done"]}]}`)
	run := s.send(t, "steer", map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})
	st := s.stream(t, testCtx(t), "steer", "?after="+itoa(run.BaseSeq), nil)
	st.until(t, keel.TypeToolStarted)

	var steer gateway.SteerResponse
	r := s.call(t, http.MethodPost, "/v1/sessions/steer/steer", map[string]any{"text": "never mind"}).must(t, http.StatusOK)
	if err := json.Unmarshal(r.raw, &steer); err != nil || steer.SteeringID == "" || steer.RunID != run.RunID {
		t.Fatalf("steer answer %s", r.raw)
	}
	retract := func(id string) string {
		r := s.call(t, http.MethodDelete, "/v1/sessions/steer/steer/"+id, nil).must(t, http.StatusOK)
		res, _ := r.body["result"].(string)
		return res
	}
	if got := retract(steer.SteeringID); got != "retracted" {
		t.Fatalf("retract = %s", got)
	}
	if got := retract(steer.SteeringID + "x"); got != "not_found" {
		t.Fatalf("retract unknown = %s", got)
	}
	r = s.call(t, http.MethodPost, "/v1/sessions/steer/steer", map[string]any{"text": "focus"}).must(t, http.StatusOK)
	kept, _ := r.body["steering_id"].(string)
	shared.gates.open("steer-1")
	st.until(t, keel.TypeSteeringApplied)
	if got := retract(kept); got != "already_applied" {
		t.Fatalf("retract applied = %s", got)
	}
	r = s.call(t, http.MethodPost, "/v1/sessions/steer/steer", map[string]any{"text": ""}).must(t, http.StatusBadRequest)
	if r.code() != "invalid_input" {
		t.Fatalf("empty steering: %s", r.raw)
	}
	shared.gates.open("steer-2")
	st.until(t, keel.TypeRunCompleted)
	r = s.call(t, http.MethodPost, "/v1/sessions/steer/steer", map[string]any{"text": "late"}).must(t, http.StatusConflict)
	if r.code() != "not_accepting" {
		t.Fatalf("steer without a run: %s", r.raw)
	}
}

// An ask_user question is listed, refused for a wrong ID, and answered
// once; the run goes on with the answer.
func TestRespondToAskUser(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[
	  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["noted"]}]}`)
	run := s.send(t, "respond", map[string]any{"prompt": "go", "model": m, "tools": []string{"ask_user"}})
	st := s.stream(t, testCtx(t), "respond", "?after="+itoa(run.BaseSeq), nil)
	st.until(t, keel.TypeHostInputRequested)

	r := s.call(t, http.MethodGet, "/v1/sessions/respond/requests", nil).must(t, http.StatusOK)
	var open gateway.RequestsResponse
	if err := json.Unmarshal(r.raw, &open); err != nil || len(open.Requests) != 1 || open.Requests[0].Prompt != "Which colour?" {
		t.Fatalf("requests %s", r.raw)
	}
	id := open.Requests[0].RequestID
	r = s.call(t, http.MethodPost, "/v1/sessions/respond/respond", map[string]any{"request_id": id + "x", "answer": "blue"}).
		must(t, http.StatusNotFound)
	if r.code() != "unknown_request" {
		t.Fatalf("wrong request: %s", r.raw)
	}
	r = s.call(t, http.MethodPost, "/v1/sessions/respond/respond", map[string]any{"request_id": id, "answer": 42}).
		must(t, http.StatusBadRequest)
	if r.code() != "invalid_answer" {
		t.Fatalf("wrong shape: %s", r.raw)
	}
	s.call(t, http.MethodPost, "/v1/sessions/respond/respond", map[string]any{"request_id": id, "answer": "blue"}).
		must(t, http.StatusOK)
	r = s.call(t, http.MethodPost, "/v1/sessions/respond/respond", map[string]any{"request_id": id, "answer": "red"})
	if r.status != http.StatusNotFound && r.status != http.StatusConflict {
		t.Fatalf("a second answer: %d %s", r.status, r.raw)
	}
	evs := st.until(t, keel.TypeRunCompleted)
	found := false
	for _, ev := range evs {
		if ev.event == keel.TypeToolFinished && strings.Contains(ev.data, "blue") {
			found = true
		}
	}
	if !found {
		t.Fatal("the answer did not reach the tool result")
	}
	r = s.call(t, http.MethodGet, "/v1/sessions/respond/requests", nil).must(t, http.StatusOK)
	if !strings.Contains(string(r.raw), `"requests":[]`) {
		t.Fatalf("requests after the run: %s", r.raw)
	}
}

// Cancel ends the active run with run.cancelled; a session that does not
// exist is 404.
func TestCancel(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"never"}}]}]}`)
	run := s.send(t, "cancel", map[string]any{"prompt": "go", "model": m, "tools": []string{"gate"}})
	st := s.stream(t, testCtx(t), "cancel", "?after="+itoa(run.BaseSeq), nil)
	st.until(t, keel.TypeToolStarted)
	s.call(t, http.MethodPost, "/v1/sessions/cancel/cancel", nil).must(t, http.StatusAccepted)
	st.until(t, keel.TypeRunCancelled)
	s.call(t, http.MethodPost, "/v1/sessions/cancel/cancel?run=1", nil).must(t, http.StatusAccepted)
	r := s.call(t, http.MethodPost, "/v1/sessions/no-such-session/cancel", nil).must(t, http.StatusNotFound)
	if r.code() != "not_found" {
		t.Fatalf("cancel unknown: %s", r.raw)
	}
}

// Bad requests get typed errors with the right status.
func TestTypedErrors(t *testing.T) {
	s := startGateway(t, gateway.Options{MaxBodyBytes: 1024})
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"unknown session", "GET", "/v1/sessions/nobody", nil, 404, "not_found"},
		{"unknown session's events", "GET", "/v1/sessions/nobody/events", nil, 404, "not_found"},
		{"bad session ID", "GET", "/v1/sessions/no%20spaces", nil, 400, "invalid_input"},
		{"unknown route", "GET", "/v1/nothing", nil, 404, "route_not_found"},
		{"wrong method", "PUT", "/v1/sessions/x/runs", nil, 405, "method_not_allowed"},
		{"not JSON", "POST", "/v1/sessions/x/runs", "{prompt", 400, "invalid_input"},
		{"no body", "POST", "/v1/sessions/x/runs", nil, 400, "invalid_input"},
		{"unknown field", "POST", "/v1/sessions/x/runs", map[string]any{"prompt": "hi", "promt": "hi"}, 400, "invalid_input"},
		{"empty prompt", "POST", "/v1/sessions/x/runs", map[string]any{"prompt": " "}, 400, "invalid_input"},
		{"bad approval", "POST", "/v1/sessions/x/runs", map[string]any{"prompt": "hi", "approvals": map[string]string{"*": "maybe"}}, 400, "invalid_input"},
		{"body too large", "POST", "/v1/sessions/x/runs", map[string]any{"prompt": strings.Repeat("a", 2000)}, 413, "body_too_large"},
		{"negative after", "GET", "/v1/sessions/x/events?after=-1", nil, 400, "invalid_input"},
		{"bad run", "POST", "/v1/sessions/x/cancel?run=zero", nil, 400, "invalid_input"},
		{"respond without ID", "POST", "/v1/sessions/x/respond", map[string]any{"answer": 1}, 400, "invalid_input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.call(t, c.method, c.path, c.body)
			if r.status != c.status || r.code() != c.code || r.body["message"] == "" {
				t.Fatalf("got %d %s, want %d %s", r.status, r.raw, c.status, c.code)
			}
			if r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("content type %q", r.header.Get("Content-Type"))
			}
		})
	}
	// None of the refused prompts created session x.
	s.call(t, http.MethodGet, "/v1/sessions/x", nil).must(t, http.StatusNotFound)
}

// With Temporal out of reach, calls fail within RequestTimeout with 503
// unavailable, and the body names no internal address.
func TestTemporalUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	tc, err := sdkclient.NewLazyClient(sdkclient.Options{HostPort: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	c, err := client.Dial(context.Background(), client.Options{Temporal: tc})
	if err != nil {
		t.Fatal(err)
	}
	s := serveGateway(t, c, gateway.Options{RequestTimeout: 500 * time.Millisecond,
		Logger: zap.NewNop()})
	for _, path := range []string{"/v1/sessions/down", "/v1/sessions/down/events"} {
		r := s.call(t, http.MethodGet, path, nil).must(t, http.StatusServiceUnavailable)
		if r.code() != gateway.CodeUnavailable || r.body["retryable"] != true || strings.Contains(string(r.raw), addr) ||
			r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %s", path, r.raw)
		}
	}
	r := s.call(t, http.MethodPost, "/v1/sessions/down/runs", map[string]any{"prompt": "hi"}).must(t, http.StatusServiceUnavailable)
	if r.code() != gateway.CodeUnavailable {
		t.Fatalf("send: %s", r.raw)
	}
}
