package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/provider/providertest"
	"github.com/keelrun/keel/server/worker"
)

// sseText and sseToolCall are OpenAI Chat Completions streams.
func sseText(text string) []string {
	return []string{
		fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":%q},"finish_reason":null}]}`+"\n\n", text),
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}` + "\n\n",
		"data: [DONE]\n\n",
	}
}

func sseToolCall(id, name, args string) []string {
	return []string{
		fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]},"finish_reason":null}]}`+"\n\n", id, name, args),
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n",
		"data: [DONE]\n\n",
	}
}

// A worker configured from keel.yaml runs real runs on the embedded
// server: a named model served by an OpenAI-compatible SSE server, with
// the key read from the variable the file names, the worker's approval
// policy (a pattern) asking the host before a tool runs, the token cap
// sent to the server, "default" resolving to default_model, and the
// worker's step cap ending a run that wants more steps, and the tool of
// an MCP server the file names, behind the worker's approval.
func TestWorkerFromFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	const key = "sk-test-config-0123456789"
	t.Setenv("KEEL_TEST_OPENAI_KEY", key)
	llm := providertest.NewServer(t,
		providertest.SSEEvents(sseToolCall("call_ls", "list_files", `{}`)...),
		providertest.SSEEvents(sseText("The workspace holds notes.txt.")...),
		providertest.SSEEvents(sseToolCall("call_r1", "read_file", `{"path":"missing.txt"}`)...),
		providertest.SSEEvents(sseToolCall("call_r2", "read_file", `{"path":"missing.txt"}`)...),
		providertest.SSEEvents(sseToolCall("call_add", "mcp__calc__add", `{"a":2,"b":3}`)...),
		providertest.SSEEvents(sseText("2 + 3 = 5.")...),
	)
	const mcpToken = "mcp-token-0123456789"
	t.Setenv("KEEL_TEST_MCP_TOKEN", mcpToken)
	calc := startCalcServer(t, "Bearer "+mcpToken)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ws", "notes.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "keel.yaml")
	yaml := fmt.Sprintf(`models:
  local:
    provider: openai
    base_url: %s/v1
    model: gpt-test
    api_key_env: KEEL_TEST_OPENAI_KEY
default_model: local
workspace: ws
tools: [list_files, read_file]
approvals:
  "list_*": ask
  read_file: deny
  "mcp__*": ask
limits:
  max_steps: 2
  max_tokens: 77
  concurrency:
    openai: 1
mcp_servers:
  calc:
    url: %s/mcp
    headers:
      Authorization: "Bearer ${KEEL_TEST_MCP_TOKEN}"
    timeout: 30s
`, llm.URL, calc.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}

	srv := keeltest.StartServer(t, devserver.Config{})
	opts := worker.Options{Codec: keeltest.Codec(t, srv), StopTimeout: time.Second}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(keeltest.Dial(t, srv), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	c := keeltest.Client(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	sess := c.NewSession()
	run, err := sess.Send(ctx, "What is in the workspace?",
		client.WithConfig(api.RunConfig{Model: "local", Tools: []string{"list_files"}}))
	if err != nil {
		t.Fatal(err)
	}
	// The run's own config says nothing about approvals: the worker's
	// "list_*: ask" makes the call wait for the host.
	var requested keel.HostInputRequested
	for ev, err := range run.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == keel.TypeToolStarted {
			t.Fatal("list_files started before the host approved it")
		}
		if ev.Type == keel.TypeHostInputRequested {
			e, _ := ev.Event()
			requested = e.(keel.HostInputRequested)
			break
		}
	}
	if requested.ToolCallID != "call_ls" {
		t.Fatalf("host input request %+v, want one for call_ls", requested)
	}
	if err := run.Respond(ctx, requested.RequestID, map[string]any{"approved": true}); err != nil {
		t.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		t.Fatalf("outcome: %v", err)
	}
	if out.Text != "The workspace holds notes.txt." {
		t.Errorf("outcome text %q", out.Text)
	}
	hist, err := sess.History(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := hist.Messages[2].Content; !strings.Contains(got, "notes.txt") {
		t.Errorf("list_files result %q does not list the configured workspace", got)
	}

	for i, req := range llm.Requests() {
		if got := req.Header.Get("Authorization"); got != "Bearer "+key {
			t.Errorf("request %d: Authorization %q, want the key from KEEL_TEST_OPENAI_KEY", i, got)
		}
		var body struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_completion_tokens"`
		}
		if err := json.Unmarshal(req.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Model != "gpt-test" || body.MaxTokens != 77 {
			t.Errorf("request %d: model %q, max_completion_tokens %d; want gpt-test and the file's cap 77", i, body.Model, body.MaxTokens)
		}
	}

	// "default" is default_model; read_file is denied by the worker (the
	// model sees the refusal); the third step is past the worker's
	// max_steps although the run asked for 10.
	run2, err := sess.Send(ctx, "Read missing.txt",
		client.WithConfig(api.RunConfig{Model: config.DefaultModelSpec, Tools: []string{"read_file"}, MaxSteps: 10}))
	if err != nil {
		t.Fatal(err)
	}
	out, err = run2.Outcome(ctx)
	if out.Status != keel.StatusFailed || out.Error == nil || out.Error.Code != keel.CodeMaxSteps {
		t.Fatalf("outcome %+v (%v), want failed with max_steps", out, err)
	}
	if !strings.Contains(out.Error.Message, "limit of 2 steps") {
		t.Errorf("message %q does not name the worker's limit", out.Error.Message)
	}
	evs2, err := sess.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, env := range evs2 {
		e, _ := env.Event()
		switch e := e.(type) {
		case keel.ToolStarted:
			if e.Name == "read_file" {
				t.Errorf("read_file started although the worker denies it")
			}
		case keel.ToolFinished:
			if e.Name == "read_file" && e.Status == keel.ToolError && strings.Contains(e.Output, "denied by this worker's policy") {
				denied++
			}
		}
	}
	if denied != 2 {
		t.Errorf("%d read_file calls were refused by the worker's policy, want 2", denied)
	}
	if n := llm.Count(); n != 4 {
		t.Errorf("the model server saw %d requests, want 4", n)
	}

	// An MCP server's tool, from the file's mcp_servers: listed when the
	// worker started, called with the header the file names (expanded
	// from the environment), behind the worker's "mcp__*: ask".
	run3, err := sess.Send(ctx, "Add 2 and 3",
		client.WithConfig(api.RunConfig{Model: "local", Tools: []string{"mcp__calc__add"}}))
	if err != nil {
		t.Fatal(err)
	}
	requested = keel.HostInputRequested{}
	for ev, err := range run3.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == keel.TypeHostInputRequested {
			e, _ := ev.Event()
			requested = e.(keel.HostInputRequested)
			break
		}
	}
	if requested.ToolCallID != "call_add" {
		t.Fatalf("host input request %+v, want an approval for call_add", requested)
	}
	if calc.calls.Load() != 0 {
		t.Fatal("the MCP tool ran before the host approved it")
	}
	if err := run3.Respond(ctx, requested.RequestID, map[string]any{"approved": true}); err != nil {
		t.Fatal(err)
	}
	if out, err := run3.Outcome(ctx); err != nil || out.Text != "2 + 3 = 5." {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	hist, err = sess.History(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := hist.Messages[len(hist.Messages)-2]; got.Content != "5" {
		t.Errorf("the MCP tool's result is %+v, want 5", got)
	}
	if calc.calls.Load() != 1 {
		t.Errorf("the MCP tool ran %d times, want once", calc.calls.Load())
	}

	// The key never reaches Temporal: not in any event of the session.
	evs, err := sess.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(evs)
	if strings.Contains(string(raw), key) || strings.Contains(string(raw), mcpToken) {
		t.Error("the API key appears in the session's events")
	}
}

// calcServer is an MCP server over streamable HTTP with one tool, add,
// that answers only requests carrying the expected Authorization header.
type calcServer struct {
	*httptest.Server
	calls atomic.Int32
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func startCalcServer(t *testing.T, auth string) *calcServer {
	s := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	c := &calcServer{}
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds two integers."},
		func(ctx context.Context, req *sdk.CallToolRequest, args addArgs) (*sdk.CallToolResult, any, error) {
			c.calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(args.A + args.B)}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != auth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

// A missing key fails Apply, naming the file, line and field.
func TestApplyMissingKey(t *testing.T) {
	t.Setenv("KEEL_TEST_UNSET_KEY", "")
	cfg, err := config.Parse("keel.yaml", []byte("models:\n  gpt:\n    provider: openai\n    model: gpt-4.1\n    api_key_env: KEEL_TEST_UNSET_KEY\n"))
	if err != nil {
		t.Fatal(err)
	}
	var opts worker.Options
	err = cfg.Apply(&opts)
	want := "keel.yaml:5:18: models.gpt.api_key_env: the environment variable KEEL_TEST_UNSET_KEY is not set"
	if err == nil || err.Error() != want {
		t.Fatalf("Apply: %v\nwant %s", err, want)
	}
}
