package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// A keel worker on the embedded Temporal server offers the tools of
// server-everything (stdio) and of an in-process Go SDK server (HTTP).
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	cfg := everything(t)
	reg, err := tool.Builtins(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hooks := &faultHooks{slowStarted: make(chan struct{}, 1), slowCancelled: make(chan time.Time, 1)}
	changes := make(chan []string, 10)
	connect(t, mcp.Options{Registry: reg, Sampling: true, OnToolsChanged: func(_ string, tools []string) { changes <- tools }},
		cfg, mcp.ServerConfig{Name: "fault", URL: serveFault(t, newFaultServer(hooks), "")})
	waitFor(t, changes, "mcp__everything__trigger-sampling-request", true)

	srv := keeltest.StartServer(t, devserver.Config{})
	mem := live.NewMemory()
	var book keeltest.ScriptBook
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: &book, Tools: reg, Live: mem})
	c := keeltest.Client(t, srv, mem)
	t.Run("everything", func(t *testing.T) { endToEndEverything(t, c, &book) })
	t.Run("cancel", func(t *testing.T) { endToEndCancel(t, c, &book, hooks) })
	t.Run("sampling", func(t *testing.T) { endToEndSampling(t, c, &book) })
}

// server-everything's sampling tool asks the run's model; the request's
// usage is recorded (usage.updated, attempt 0) and counted in the run's.
func endToEndSampling(t *testing.T, c *client.Client, book *keeltest.ScriptBook) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The scripted model plays the turn matching the request's assistant
	// messages: the sampling request has none, so it gets turn 1's text.
	model := book.Add(t, "mcp-sampling", `{"turns":[
	  {"text":["Sampled by keel."],"tool_calls":[{"id":"m1","name":"mcp__everything__trigger-sampling-request","arguments":{"prompt":"say hi","maxTokens":50}}],
	   "usage":{"input_tokens":120,"output_tokens":30}},
	  {"text":["done"],"usage":{"input_tokens":10,"output_tokens":5}}]}`)
	run, err := c.Session("mcp-sampling").Send(ctx, "sample", client.WithConfig(api.RunConfig{Model: model,
		Tools: []string{"mcp__everything__trigger-sampling-request"}}))
	if err != nil {
		t.Fatal(err)
	}
	events := follow(t, ctx, run, func(keel.HostInputRequested) any { return nil })
	f := toolResults(events)["m1"]
	if f.Status != keel.ToolOK || !strings.Contains(f.Output, `"text": "Sampled by keel."`) || !strings.Contains(f.Output, `"role": "assistant"`) {
		t.Errorf("tool.finished m1 = %+v, want the model's text in the server's result", f)
	}
	var sampled []keel.Usage
	var completed *keel.RunCompleted
	for _, ev := range events {
		switch e, _ := ev.Event(); e := e.(type) {
		case keel.UsageUpdated:
			if e.Attempt == 0 {
				sampled = append(sampled, e.Usage)
			}
		case keel.RunCompleted:
			completed = &e
		}
	}
	if len(sampled) != 1 || sampled[0].InputTokens != 120 || sampled[0].OutputTokens != 30 {
		t.Errorf("usage.updated of sampling = %+v, want one request of 120 in, 30 out", sampled)
	}
	if completed == nil || completed.Usage.InputTokens != 250 || completed.Usage.Requests != 3 {
		t.Errorf("run.completed = %+v, want 250 input tokens over 3 requests (two turns and the sampling)", completed)
	}
}

// A scripted model calls server-everything's echo, get-sum (under an "ask"
// approval policy, as for a built-in) and the long-running operation (its
// progress on the live channel) in one run, and the elicitation tool in a
// second run, whose question the host answers through Respond (what `keel
// respond` sends).
func endToEndEverything(t *testing.T, c *client.Client, book *keeltest.ScriptBook) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tools := []string{"mcp__everything__echo", "mcp__everything__get-sum",
		"mcp__everything__trigger-long-running-operation", "mcp__everything__trigger-elicitation-request"}
	model := book.Add(t, "mcp-e2e", `{"turns":[
	  {"tool_calls":[
	    {"id":"e1","name":"mcp__everything__echo","arguments":{"message":"hello from keel"}},
	    {"id":"s1","name":"mcp__everything__get-sum","arguments":{"a":19,"b":23}},
	    {"id":"l1","name":"mcp__everything__trigger-long-running-operation","arguments":{"duration":0.3,"steps":3}}]},
	  {"text":["Echoed, summed and waited."]},
	  {"tool_calls":[{"id":"q1","name":"mcp__everything__trigger-elicitation-request","arguments":{}}]},
	  {"text":["Thanks, Ada."]}]}`)
	sess := c.Session("mcp-e2e")
	run, err := sess.Send(ctx, "use the MCP tools", client.WithConfig(api.RunConfig{Model: model, Tools: tools,
		Approvals: map[string]api.Approval{"mcp__everything__get-sum": api.ApprovalAsk}}))
	if err != nil {
		t.Fatal(err)
	}
	events := follow(t, ctx, run, func(req keel.HostInputRequested) any {
		if req.RequestID != "s1/approval" {
			t.Errorf("host input %s, want the approval of s1", req.RequestID)
		}
		return map[string]any{"approved": true}
	})
	finished := toolResults(events)
	for id, want := range map[string]string{"e1": "Echo: hello from keel", "s1": "The sum of 19 and 23 is 42.",
		"l1": "Long running operation completed. Duration: 0.3 seconds, Steps: 3."} {
		if f := finished[id]; f.Status != keel.ToolOK || f.Output != want {
			t.Errorf("tool.finished %s = %+v, want ok %q", id, f, want)
		}
	}
	var progress []string
	for _, ev := range events {
		if e, _ := ev.Event(); e != nil {
			if p, ok := e.(keel.ToolProgress); ok && p.ToolCallID == "l1" {
				progress = append(progress, p.Message)
			}
		}
	}
	if strings.Join(progress, ",") != "1/3,2/3,3/3" {
		t.Errorf("tool.progress of l1 = %v, want 1/3, 2/3, 3/3", progress)
	}

	// The elicitation: the session waits for the host; a bad answer is
	// refused against the requested schema; a good one reaches the server.
	run2, err := sess.Send(ctx, "ask me", client.WithConfig(api.RunConfig{Model: model, Tools: tools}))
	if err != nil {
		t.Fatal(err)
	}
	events = follow(t, ctx, run2, func(req keel.HostInputRequested) any {
		st, err := sess.State(ctx)
		if err != nil || st.State != keel.StateWaitingForHostInput {
			t.Errorf("state while asking = %v, %v; want %s", st.State, err, keel.StateWaitingForHostInput)
		}
		if err := run2.Respond(ctx, req.RequestID, map[string]any{"check": true}); !errors.Is(err, keel.ErrInvalidAnswer) {
			t.Errorf("answer without the required name: %v, want ErrInvalidAnswer", err)
		}
		return map[string]any{"name": "Ada Lovelace", "check": true, "email": "ada@example.com"}
	})
	f := toolResults(events)["q1"]
	if f.Status != keel.ToolOK || !strings.Contains(f.Output, "- Name: Ada Lovelace") || !strings.Contains(f.Output, "- Email: ada@example.com") {
		t.Errorf("tool.finished q1 = %+v, want the server's echo of the answer", f)
	}
}

// Cancelling a run cancels its MCP call on the server: the time from the
// cancel request to the server's handler seeing its context end is the
// latency reported.
func endToEndCancel(t *testing.T, c *client.Client, book *keeltest.ScriptBook, hooks *faultHooks) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := book.Add(t, "mcp-cancel", `{"turns":[
	  {"tool_calls":[{"id":"w1","name":"mcp__fault__slow","arguments":{"seconds":600}}]},
	  {"text":["never"]}]}`)
	run, err := c.Session("mcp-cancel").Send(ctx, "wait", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"mcp__fault__slow"}}))
	if err != nil {
		t.Fatal(err)
	}
	<-hooks.slowStarted
	start := time.Now()
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case seen := <-hooks.slowCancelled:
		t.Logf("run cancelled: the MCP server's handler saw the cancellation %v after the cancel request", seen.Sub(start))
	case <-time.After(30 * time.Second):
		t.Fatal("the MCP server never saw the cancellation")
	}
	out, err := run.Outcome(ctx)
	if !errors.Is(err, keel.ErrCancelled) {
		t.Errorf("outcome %+v, %v; want keel.ErrCancelled", out, err)
	}
	t.Logf("outcome of the cancelled run: %v (%v after the cancel request)", err, time.Since(start))
}

// follow reads the run's events to its end, answering each host-input
// request with answer's value, and logs them (durable ones with their
// sequence).
func follow(t *testing.T, ctx context.Context, run *client.Run, answer func(keel.HostInputRequested) any) []keel.Envelope {
	t.Helper()
	var out []keel.Envelope
	for ev, err := range run.Events(ctx) {
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		out = append(out, ev)
		e, _ := ev.Event()
		if ev.Type != keel.TypeTextDelta {
			b, _ := json.Marshal(e)
			t.Logf("%3d %-22s %s", ev.Seq, ev.Type, truncate(string(b), 160))
		}
		if req, ok := e.(keel.HostInputRequested); ok {
			if err := run.Respond(ctx, req.RequestID, answer(req)); err != nil {
				t.Fatalf("respond %s: %v", req.RequestID, err)
			}
		}
	}
	return out
}

func toolResults(events []keel.Envelope) map[string]keel.ToolFinished {
	out := map[string]keel.ToolFinished{}
	for _, ev := range events {
		if e, _ := ev.Event(); e != nil {
			if f, ok := e.(keel.ToolFinished); ok {
				out[f.ToolCallID] = f
			}
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}
