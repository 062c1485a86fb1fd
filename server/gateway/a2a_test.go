package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/keelrun/keel/server/gateway"
)

// a2aClient is A2A's Go client for the agent at path ("/v1/a2a" or
// "/v1/a2a/NAME"), made from the agent's card as a client finds it.
func a2aClient(t testing.TB, ctx context.Context, s *stack, path, key string) (*a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	hc := &http.Client{Transport: bearerTransport{key: key, base: http.DefaultTransport}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, s.srv.URL+path)
	if err != nil {
		t.Fatalf("card of %s: %v", path, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("client of %s: %v", path, err)
	}
	return c, card
}

func userText(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

// Each agent has a card naming its endpoint; message/send runs the task
// as a keel run and answers the task, completed, with the answer as an
// artifact (text, and data for a typed answer); tasks/get answers the
// same; a message with the contextId continues the session as its next
// run.
func TestA2ASendAndGet(t *testing.T) {
	shared.book.Add(t, "typed", `{"turns":[{"text":["{\"n\": 42}"]},{"text":["{\"n\": 43}"]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(t)
	c, card := a2aClient(t, ctx, s, "/v1/a2a/typed", "")
	if card.Name != "typed" || card.URL != s.srv.URL+"/v1/a2a/typed" || !card.Capabilities.Streaming || card.ProtocolVersion != gateway.A2AProtocolVersion {
		t.Fatalf("card %+v", card)
	}
	res, err := c.SendMessage(ctx, userText("count"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || !strings.HasPrefix(task.ContextID, "a2a-") ||
		string(task.ID) != task.ContextID+"/run-1" {
		t.Fatalf("result %#v", res)
	}
	if n := answerN(t, task); n != 42 {
		t.Errorf("answer %v", n)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || answerN(t, got) != 42 {
		t.Fatalf("tasks/get %+v %v", got, err)
	}
	next := userText("again")
	next.Message.ContextID = task.ContextID
	res, err = c.SendMessage(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if t2 := res.(*a2a.Task); string(t2.ID) != task.ContextID+"/run-2" || answerN(t, t2) != 43 {
		t.Errorf("second task %+v", t2)
	}
	// The default agent has a card too.
	_, def := a2aClient(t, ctx, s, "/v1/a2a", "")
	if def.Name != "keel" || def.URL != s.srv.URL+"/v1/a2a" {
		t.Errorf("default card %+v", def)
	}
}

// answerN reads {"n": N} from a completed task's answer artifact.
func answerN(t testing.TB, task *a2a.Task) float64 {
	t.Helper()
	if len(task.Artifacts) != 1 {
		t.Fatalf("artifacts %+v", task.Artifacts)
	}
	for _, p := range task.Artifacts[0].Parts {
		if d, ok := p.(a2a.DataPart); ok {
			n, _ := d.Data["n"].(float64)
			return n
		}
	}
	t.Fatalf("no data part in %+v", task.Artifacts[0])
	return 0
}

// message/stream: the task, its tool activity as working status
// messages, input-required (final) at host input; the next message,
// naming the task, answers it and streams the rest: text as artifact
// chunks, the whole answer as the last chunk, completed (final).
func TestA2AStreamWithInputRequired(t *testing.T) {
	shared.book.Add(t, "asker", `{"chunk_delay":"5ms","turns":[
	  {"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["No", "ted", "."]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(t)
	c, _ := a2aClient(t, ctx, s, "/v1/a2a/asker", "")
	var task *a2a.Task
	var last *a2a.TaskStatusUpdateEvent
	var working []string
	for ev, err := range c.SendStreamingMessage(ctx, userText("pick")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			task = e
		case *a2a.TaskStatusUpdateEvent:
			last = e
			if e.Status.State == a2a.TaskStateWorking && e.Status.Message != nil {
				working = append(working, e.Status.Message.Parts[0].(a2a.TextPart).Text)
			}
		}
	}
	if task == nil || task.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("first event %+v", task)
	}
	if last == nil || !last.Final || last.Status.State != a2a.TaskStateInputRequired ||
		last.Status.Message.Parts[0].(a2a.TextPart).Text != "Which colour?" {
		t.Fatalf("last event %+v", last)
	}
	if !strings.Contains(strings.Join(working, "|"), "tool ask_user started") {
		t.Errorf("working messages %q", working)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("tasks/get while asking: %+v %v", got, err)
	}

	reply := userText("green")
	reply.Message.TaskID, reply.Message.ContextID = task.ID, task.ContextID
	var chunks strings.Builder
	var final string
	var end *a2a.TaskStatusUpdateEvent
	for ev, err := range c.SendStreamingMessage(ctx, reply) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			text := e.Artifact.Parts[0].(a2a.TextPart).Text
			if e.LastChunk {
				final = text
			} else {
				chunks.WriteString(text)
			}
		case *a2a.TaskStatusUpdateEvent:
			end = e
		}
	}
	if chunks.String() != "Noted." || final != "Noted." {
		t.Errorf("chunks %q, final %q", chunks.String(), final)
	}
	if end == nil || !end.Final || end.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("end %+v", end)
	}
	h := s.call(t, http.MethodGet, "/v1/sessions/"+task.ContextID+"/history", nil).must(t, http.StatusOK)
	if !strings.Contains(string(h.raw), "green") {
		t.Errorf("history without the answer: %s", h.raw)
	}
}

// tasks/resubscribe follows a running task from the current point;
// tasks/cancel is keel's cooperative cancel, and the resubscribed
// stream ends canceled; an ended task is not cancelable.
func TestA2AResubscribeAndCancel(t *testing.T) {
	shared.book.Add(t, "researcher", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"a2a-cancel-never"}}]},
	  {"text":["unreachable"]}]}`)
	s := startGateway(t, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(t)
	c, _ := a2aClient(t, ctx, s, "/v1/a2a/researcher", "")
	p := userText("wait")
	no := false
	p.Config = &a2a.MessageSendConfig{Blocking: &no}
	res, err := c.SendMessage(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("non-blocking send %+v", task)
	}
	// Wait until the gate's call is running, so the resubscription
	// starts mid-run.
	waitFor(t, ctx, func() bool {
		r := s.call(t, http.MethodGet, "/v1/sessions/"+task.ContextID+"/events?after=0", nil)
		return strings.Contains(string(r.raw), `"tool.started"`)
	})
	events := make(chan a2a.Event, 64)
	go func() {
		defer close(events)
		for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	first := <-events
	if snap, ok := first.(*a2a.Task); !ok || snap.Status.State != a2a.TaskStateWorking {
		t.Fatalf("resubscribe's first event %#v", first)
	}
	cancelled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("tasks/cancel %+v %v", cancelled, err)
	}
	var end *a2a.TaskStatusUpdateEvent
	for ev := range events {
		if e, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			end = e
		}
	}
	if end == nil || !end.Final || end.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("resubscribed stream ended with %+v", end)
	}
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Errorf("second cancel: %v", err)
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t testing.TB, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("timed out")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rpcReply is a raw JSON-RPC answer.
type rpcReply struct {
	status int
	ID     json.RawMessage `json:"id"`
	Error  *struct {
		Code int `json:"code"`
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"error"`
	Result json.RawMessage `json:"result"`
}

func postRPC(t testing.TB, s *stack, path, key, body string) rpcReply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r rpcReply
	r.status = resp.StatusCode
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnauthorized {
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatalf("%s: status %d, not JSON-RPC: %v", body, resp.StatusCode, err)
		}
	}
	return r
}
