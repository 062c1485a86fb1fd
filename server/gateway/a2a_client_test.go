package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/server/gateway"
)

// a2aClientDir holds the npm project that drives the gateway with the
// published @a2a-js/sdk client (pinned in package-lock.json).
const a2aClientDir = "testdata/a2a-client"

// a2aSeen is one stream event as run.mjs summarises it.
type a2aSeen struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	State     string `json:"state"`
	Text      string `json:"text"`
	Append    bool   `json:"append"`
	LastChunk bool   `json:"lastChunk"`
}

// The published A2A JavaScript client against the gateway: a streamed
// task stops at input-required, the next message answers it and streams
// the answer as artifact chunks to completed; a typed task's answer is
// its artifact's data; a resubscribed task is cancelled and its stream
// ends canceled; cancelling it again is refused.
func TestA2APublishedClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, dir := nodeProject(t, ctx, a2aClientDir, "@a2a-js/sdk")
	shared.book.Add(t, "asker", `{"chunk_delay":"5ms","turns":[
	  {"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["No", "ted", "."]}]}`)
	shared.book.Add(t, "typed", `{"turns":[{"text":["{\"n\": 9}"]}]}`)
	shared.book.Add(t, "researcher", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"a2a-js-never"}}]},
	  {"text":["unreachable"]}]}`)
	const key = "a2a-client-key-0123456789abcdef"
	s := startGateway(t, gateway.Options{Agents: interopAgents(), Keys: []gateway.APIKey{{Key: key, Prefix: "js-"}}})
	cmd := exec.CommandContext(ctx, node, "run.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "A2A_URL="+s.srv.URL, "A2A_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node run.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var res struct {
		Asking, Answering, Resubscribed []a2aSeen
		Got, Started, Cancelled         string
		CancelAgain                     string
		Typed                           struct {
			State string         `json:"state"`
			Data  map[string]any `json:"data"`
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("run.mjs output: %v\n%s", err, stdout.String())
	}
	if len(res.Asking) < 2 || res.Asking[0].Kind != "task" || !strings.HasPrefix(res.Asking[0].ContextID, "js-a2a-") {
		t.Fatalf("asking %+v", res.Asking)
	}
	if last := res.Asking[len(res.Asking)-1]; last.State != "TASK_STATE_INPUT_REQUIRED" || last.Text != "Which colour?" {
		t.Errorf("asking ended with %+v", last)
	}
	var chunks, final string
	for _, e := range res.Answering {
		if e.Kind == "artifact" && !e.LastChunk {
			chunks += e.Text
		}
		if e.Kind == "artifact" && e.LastChunk {
			final = e.Text
		}
	}
	if chunks != "Noted." || final != "Noted." {
		t.Errorf("answering %+v", res.Answering)
	}
	if last := res.Answering[len(res.Answering)-1]; last.State != "TASK_STATE_COMPLETED" || res.Got != "TASK_STATE_COMPLETED" {
		t.Errorf("answering ended with %+v, tasks/get %s", last, res.Got)
	}
	if res.Typed.State != "TASK_STATE_COMPLETED" || res.Typed.Data["n"] != 9.0 {
		t.Errorf("typed %+v", res.Typed)
	}
	if res.Started != "TASK_STATE_WORKING" || res.Cancelled != "TASK_STATE_CANCELED" {
		t.Errorf("started %s, cancelled %s", res.Started, res.Cancelled)
	}
	if n := len(res.Resubscribed); n < 2 || res.Resubscribed[0].Kind != "task" || res.Resubscribed[n-1].State != "TASK_STATE_CANCELED" {
		t.Errorf("resubscribed %+v", res.Resubscribed)
	}
	if !strings.Contains(strings.ToLower(res.CancelAgain), "cancel") {
		t.Errorf("cancelling again: %q", res.CancelAgain)
	}
}
