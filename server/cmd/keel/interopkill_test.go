package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
)

// The waiter agent sleeps on a durable timer, then answers in three
// chunks: its task is mid-run while keel dev is killed.
const interopKillScript = `{"turns":[
  {"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":4}}]},
  {"text":["done ", "after ", "the nap"]}
]}`

// serveWaiter configures keel dev with the waiter agent alone.
func (r *devKillRig) serveWaiter() {
	r.t.Helper()
	model := writeScript(r.t, interopKillScript)
	conf := filepath.Join(r.t.TempDir(), "keel.yaml")
	yaml := "agents:\n  waiter:\n    description: Naps, then answers.\n    model: " + model + "\n    tools: [sleep]\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.flags = []string{"--config", conf}
}

// An A2A task running when keel dev is killed with SIGKILL is still there
// after the restart on the same data directory: tasks/get answers it,
// tasks/resubscribe from the last sequence the client saw resumes it,
// and its result arrives once (one completed status, one run.completed in
// the session's log).
func TestKillDevKeepsA2ATasks(t *testing.T) {
	r := newDevKillRig(t, 4*time.Minute)
	r.serveWaiter()
	p := r.start()
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},` +
		`"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"nap"}]}}}`
	var sent struct {
		Result struct {
			ID        string `json:"id"`
			ContextID string `json:"contextId"`
		} `json:"result"`
	}
	rpcPost(t, r.ctx, p.api+"/a2a/waiter", send, &sent)
	task := sent.Result.ID
	if !strings.HasSuffix(task, "/run-1") {
		t.Fatalf("message/send: %+v", sent)
	}
	// Follow it until its nap started; remember the last sequence seen.
	resub := `{"jsonrpc":"2.0","id":2,"method":"tasks/resubscribe","params":{"id":"` + task + `"}}`
	var last float64
	for ev := range rpcStream(t, r.ctx, p.api+"/a2a/waiter", resub) {
		if seq, ok := ev.Result.Metadata["keel/seq"].(float64); ok {
			last = seq
		}
		if ev.Result.Status.Message != nil && strings.Contains(ev.text(), "tool sleep started") {
			break
		}
	}
	if last == 0 {
		t.Fatal("no sequence seen before the kill")
	}
	p.kill()
	p = r.start()
	var got struct {
		Result struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	rpcPost(t, r.ctx, p.api+"/a2a/waiter", `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"`+task+`"}}`, &got)
	if s := got.Result.Status.State; s != "working" && s != "completed" {
		t.Fatalf("tasks/get after the restart: %q", s)
	}
	resume, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tasks/resubscribe",
		"params": map[string]any{"id": task, "metadata": map[string]any{"keel/after_seq": last}}})
	var completed int
	var answer string
	for ev := range rpcStream(t, r.ctx, p.api+"/a2a/waiter", string(resume)) {
		if ev.Result.Kind == "artifact-update" && ev.Result.LastChunk {
			answer = ev.artifactText()
		}
		if ev.Result.Kind == "status-update" && ev.Result.Status.State == "completed" {
			completed++
		}
		if ev.Result.Kind == "task" && ev.Result.Status.State == "completed" {
			// Already over when resubscribed: the snapshot says so.
			completed++
			answer = ev.artifactText()
		}
	}
	if completed != 1 || answer != "done after the nap" {
		t.Fatalf("after the restart: %d completions, answer %q", completed, answer)
	}
	// The session's log holds one terminal event for the run.
	if n := terminalEvents(t, p.api, sent.Result.ContextID); n != 1 {
		t.Fatalf("%d terminal events in the session's log", n)
	}
}

// terminalEvents counts the terminal events in a session's log.
func terminalEvents(t *testing.T, api, session string) int {
	t.Helper()
	resp, err := http.Get(api + "/sessions/" + session + "/events?after=0&limit=500")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Events []keel.Envelope `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range page.Events {
		if e.Terminal() {
			n++
		}
	}
	return n
}

// rpcPost posts a JSON-RPC request and decodes its answer into out.
func rpcPost(t *testing.T, ctx context.Context, url, body string, out any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw.Bytes(), out) != nil || strings.Contains(raw.String(), `"error"`) {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, raw.String())
	}
}

// a2aStreamed is one streamed JSON-RPC response as the test reads it.
type a2aStreamed struct {
	Result struct {
		Kind      string         `json:"kind"`
		LastChunk bool           `json:"lastChunk"`
		Metadata  map[string]any `json:"metadata"`
		Status    struct {
			State   string `json:"state"`
			Message *struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"status"`
		Artifact  *a2aArtifact  `json:"artifact"`
		Artifacts []a2aArtifact `json:"artifacts"`
	} `json:"result"`
}

type a2aArtifact struct {
	Parts []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"parts"`
}

func (e a2aStreamed) text() string {
	if e.Result.Status.Message == nil || len(e.Result.Status.Message.Parts) == 0 {
		return ""
	}
	return e.Result.Status.Message.Parts[0].Text
}

func (e a2aStreamed) artifactText() string {
	a := e.Result.Artifact
	if a == nil && len(e.Result.Artifacts) > 0 {
		a = &e.Result.Artifacts[0]
	}
	if a == nil || len(a.Parts) == 0 {
		return ""
	}
	return a.Parts[0].Text
}

// rpcStream posts a streaming JSON-RPC request and yields its events
// until the stream ends (or the caller stops).
func rpcStream(t *testing.T, ctx context.Context, url, body string) func(func(a2aStreamed) bool) {
	return func(yield func(a2aStreamed) bool) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev a2aStreamed
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("stream event %s: %v", data, err)
			}
			if !yield(ev) {
				return
			}
		}
	}
}

// An MCP call running when keel dev is killed with SIGKILL goes on after
// the restart: the client's GET with the last event ID it saw and its MCP
// session resumes the call's stream, whose result arrives once, and the
// session's log holds one terminal event.
func TestKillDevKeepsMCPCalls(t *testing.T) {
	r := newDevKillRig(t, 4*time.Minute)
	r.serveWaiter()
	p := r.start()
	init := mcpRequest(t, r.ctx, http.MethodPost, p.api+"/mcp", "", "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	init.Body.Close()
	if session == "" {
		t.Fatal("initialize gave no Mcp-Session-Id")
	}
	call := mcpRequest(t, r.ctx, http.MethodPost, p.api+"/mcp", session, "",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent__waiter","arguments":{"task":"nap"},"_meta":{"progressToken":"p"}}}`)
	var last, run string
	for id, msg := range mcpEvents(t, call) {
		last = id
		if m, ok := strings.CutPrefix(msg.Params.Message, "run "); ok {
			run = strings.TrimSuffix(m, " started")
		}
		if msg.Params.Message == "tool sleep started" {
			break
		}
	}
	call.Body.Close()
	if last == "" || run == "" {
		t.Fatalf("before the kill: last event %q, run %q", last, run)
	}
	p.kill()
	p = r.start()
	resumed := mcpRequest(t, r.ctx, http.MethodGet, p.api+"/mcp", session, last, "")
	var results []string
	for _, msg := range mcpEvents(t, resumed) {
		if msg.ID == "2" {
			if msg.Result == nil || msg.Result.IsError || len(msg.Result.Content) != 1 {
				t.Fatalf("result %+v", msg)
			}
			results = append(results, msg.Result.Content[0].Text)
		}
	}
	resumed.Body.Close()
	if len(results) != 1 || results[0] != "done after the nap" {
		t.Fatalf("after the restart: results %q", results)
	}
	sessionID, _, _ := strings.Cut(run, "/")
	if n := terminalEvents(t, p.api, sessionID); n != 1 {
		t.Fatalf("%d terminal events in the session's log", n)
	}
}

// mcpRequest sends one request to an MCP endpoint: a body is POSTed, no
// body is a GET resuming from lastEventID.
func mcpRequest(t *testing.T, ctx context.Context, method, url, session, lastEventID, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp
}

// mcpMessage is a message of an MCP call's stream as the test reads it.
type mcpMessage struct {
	ID     string          `json:"-"`
	RawID  json.RawMessage `json:"id"`
	Params struct {
		Message string `json:"message"`
	} `json:"params"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// mcpEvents yields an MCP stream's messages with their event IDs.
func mcpEvents(t *testing.T, resp *http.Response) func(func(string, mcpMessage) bool) {
	return func(yield func(string, mcpMessage) bool) {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var id string
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				id = v
			}
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "" {
				continue
			}
			var msg mcpMessage
			if err := json.Unmarshal([]byte(data), &msg); err != nil {
				t.Fatalf("stream message %s: %v", data, err)
			}
			msg.ID = string(msg.RawID)
			if !yield(id, msg) {
				return
			}
		}
	}
}
