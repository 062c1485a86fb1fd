package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// progressLog collects a call's progress notes.
type progressLog struct {
	mu    sync.Mutex
	notes []string
	note  chan string
}

func newProgressLog() *progressLog { return &progressLog{note: make(chan string, 100)} }

func (p *progressLog) add(msg string) {
	p.mu.Lock()
	p.notes = append(p.notes, msg)
	p.mu.Unlock()
	p.note <- msg
}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.notes...)
}

// callCtx is ctx as the Tool activity prepares it: the call's identity,
// the host's answers so far, and a progress reporter.
func callCtx(ctx context.Context, answers map[string]json.RawMessage, p *progressLog) context.Context {
	report := func(string) {}
	if p != nil {
		report = p.add
	}
	return tool.WithCall(ctx, tool.CallInfo{SessionID: "s", RunID: "s/run-1", ToolCallID: "c1"}, answers, report)
}

// connect connects cfgs into a fresh registry, closed when t ends.
func connect(t *testing.T, opts mcp.Options, cfgs ...mcp.ServerConfig) (*tool.Registry, *mcp.Servers) {
	t.Helper()
	if opts.Registry == nil {
		reg, err := tool.NewRegistry()
		if err != nil {
			t.Fatal(err)
		}
		opts.Registry = reg
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss, err := mcp.Connect(ctx, cfgs, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return opts.Registry, ss
}

// call calls the registered tool name with args.
func call(t *testing.T, ctx context.Context, reg *tool.Registry, name, args string) (tool.Result, error) {
	t.Helper()
	tl, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("tool %s is not registered; registry has %v", name, reg.Names())
	}
	return tl.Call(ctx, json.RawMessage(args))
}

// faultStdio is the test binary as a stdio MCP server.
func faultStdio(t *testing.T) mcp.ServerConfig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcp.ServerConfig{Name: "fault", Command: exe, Env: map[string]string{faultServerEnv: "1"}, Timeout: time.Minute}
}

// A stdio server that exits in the middle of a call: the call is an error
// result the model sees, and the next call starts a new server process.
func TestStdioServerCrashRestarts(t *testing.T) {
	reg, _ := connect(t, mcp.Options{}, faultStdio(t))
	ctx := callCtx(context.Background(), nil, nil)
	first, err := call(t, ctx, reg, "mcp__fault__pid", `{}`)
	if err != nil || first.IsError {
		t.Fatalf("pid: %+v, %v", first, err)
	}
	crash, err := call(t, ctx, reg, "mcp__fault__crash", `{}`)
	if err != nil {
		t.Fatalf("crash: error %v, want an error result", err)
	}
	if !crash.IsError || !strings.Contains(crash.Output, `MCP server "fault" failed during the call`) {
		t.Fatalf("crash: %+v, want an error result saying the server failed", crash)
	}
	second, err := call(t, ctx, reg, "mcp__fault__pid", `{}`)
	if err != nil || second.IsError {
		t.Fatalf("pid after the crash: %+v, %v", second, err)
	}
	if second.Output == first.Output {
		t.Errorf("pid after the crash = %s, the crashed process's; want a new process", second.Output)
	}
}

// Cancelling a call's context cancels the call on the server
// (notifications/cancelled): the server's handler sees its context end.
// Progress notifications reach the call's progress reporter.
func TestCancelSlowCall(t *testing.T) {
	hooks := &faultHooks{slowStarted: make(chan struct{}, 1), slowCancelled: make(chan time.Time, 1)}
	url := serveFault(t, newFaultServer(hooks), "")
	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "fault", URL: url})
	progress := newProgressLog()
	ctx, cancel := context.WithCancel(callCtx(context.Background(), nil, progress))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := call(t, ctx, reg, "mcp__fault__slow", `{"seconds":60}`)
		done <- err
	}()
	<-hooks.slowStarted
	if got := <-progress.note; got != "1/2: started" {
		t.Errorf("progress = %q, want 1/2: started", got)
	}
	cancelled := time.Now()
	cancel()
	var returned time.Duration
	select {
	case err := <-done:
		returned = time.Since(cancelled)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	select {
	case seen := <-hooks.slowCancelled:
		latency := seen.Sub(cancelled)
		t.Logf("cancellation: the call returned after %v; the server's handler saw it after %v", returned, latency)
		if latency > 2*time.Second {
			t.Errorf("the server saw the cancellation after %v, want under 2 s", latency)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the cancellation")
	}
}

// Tools the server adds or removes after start are registered or
// unregistered once it says its list changed.
func TestToolListChanged(t *testing.T) {
	s := newFaultServer(nil)
	url := serveFault(t, s, "")
	changes := make(chan []string, 10)
	reg, ss := connect(t, mcp.Options{OnToolsChanged: func(_ string, tools []string) { changes <- tools }},
		mcp.ServerConfig{Name: "fault", URL: url})
	<-changes // the listing at connect
	if _, ok := reg.Lookup("mcp__fault__added"); ok {
		t.Fatal("mcp__fault__added registered before the server added it")
	}
	s.AddTool(&sdk.Tool{Name: "added", Description: "Added later.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "here"}}}, nil
		})
	waitFor(t, changes, "mcp__fault__added", true)
	res, err := call(t, callCtx(context.Background(), nil, nil), reg, "mcp__fault__added", `{}`)
	if err != nil || res.Output != "here" {
		t.Errorf("added tool: %+v, %v", res, err)
	}
	s.RemoveTools("added")
	waitFor(t, changes, "mcp__fault__added", false)
	if _, ok := reg.Lookup("mcp__fault__added"); ok {
		t.Error("mcp__fault__added still registered after the server removed it")
	}
	if got := ss.Tools("fault"); len(got) != 8 {
		t.Errorf("tools = %v, want the 8 of the fault server", got)
	}
}

// waitFor waits for a listing that has name (or lacks it).
func waitFor(t *testing.T, changes chan []string, name string, present bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case tools := <-changes:
			has := false
			for _, n := range tools {
				has = has || n == name
			}
			if has == present {
				return
			}
		case <-timeout:
			t.Fatalf("no listing with %s present=%v", name, present)
		}
	}
}

// The server's errors reach the model as error results: an isError
// result, a JSON-RPC error, and arguments that do not match the schema
// (checked before the server is called).
func TestServerErrorsAreErrorResults(t *testing.T) {
	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "fault", URL: serveFault(t, newFaultServer(nil), "")})
	ctx := callCtx(context.Background(), nil, nil)
	for _, tc := range []struct{ name, args, want string }{
		{"mcp__fault__fail", `{}`, "disk on fire"},
		{"mcp__fault__refuse", `{}`, `MCP server "fault" refused the call: quota exceeded (JSON-RPC error -32001)`},
		{"mcp__fault__slow", `{"seconds":"soon"}`, `invalid arguments for tool "mcp__fault__slow": at /seconds: got string, want number`},
	} {
		res, err := call(t, ctx, reg, tc.name, tc.args)
		if err != nil {
			t.Errorf("%s: error %v, want an error result", tc.name, err)
			continue
		}
		if !res.IsError || res.Output != tc.want {
			t.Errorf("%s: %+v, want error result %q", tc.name, res, tc.want)
		}
	}
}

// Headers name environment variables as ${NAME}; the worker expands them
// when it connects, and refuses a variable that is not set.
func TestHeadersFromEnvironment(t *testing.T) {
	url := serveFault(t, newFaultServer(nil), "s3cret")
	t.Setenv("KEEL_TEST_MCP_TOKEN", "s3cret")
	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "fault", URL: url,
		Headers: map[string]string{"X-Token": "${KEEL_TEST_MCP_TOKEN}"}})
	if res, err := call(t, callCtx(context.Background(), nil, nil), reg, "mcp__fault__pid", `{}`); err != nil || res.IsError {
		t.Fatalf("pid through the token: %+v, %v", res, err)
	}

	reg2, _ := tool.NewRegistry()
	_, err := mcp.Connect(context.Background(), []mcp.ServerConfig{{Name: "fault", URL: url,
		Headers: map[string]string{"X-Token": "${KEEL_TEST_MCP_UNSET}"}}}, mcp.Options{Registry: reg2})
	var cerr *mcp.ConfigError
	if !errors.As(err, &cerr) || cerr.Field != "headers.X-Token" || !strings.Contains(cerr.Problem, "KEEL_TEST_MCP_UNSET is not set") {
		t.Errorf("unset variable: error %v, want a ConfigError naming headers.X-Token and the variable", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Error("the error shows a header value")
	}
}

// An elicitation becomes a host-input question: the call ends with a
// *tool.NeedInput whose schema is the requested one; run again with the
// host's answer, the server gets it.
func TestElicitationAsksTheHost(t *testing.T) {
	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "fault", URL: serveFault(t, newFaultServer(nil), "")})
	_, err := call(t, callCtx(context.Background(), nil, nil), reg, "mcp__fault__ask", `{"topic":"the roof"}`)
	var need *tool.NeedInput
	if !errors.As(err, &need) {
		t.Fatalf("first run: error %v, want *tool.NeedInput", err)
	}
	q := need.Question
	if q.ID != "elicitation-1" || q.Prompt != "Favourite colour for the roof?" {
		t.Errorf("question = %+v", q)
	}
	if err := tool.ValidateJSON(q.Schema, json.RawMessage(`{"colour":"green"}`)); err == nil {
		t.Error("an answer outside the requested schema's enum validated")
	}
	answer := json.RawMessage(`{"colour":"blue"}`)
	if err := tool.ValidateJSON(q.Schema, answer); err != nil {
		t.Fatalf("valid answer refused: %v", err)
	}
	res, err := call(t, callCtx(context.Background(), map[string]json.RawMessage{q.ID: answer}, nil), reg, "mcp__fault__ask", `{"topic":"the roof"}`)
	if err != nil || res.IsError || res.Output != "accept: blue" {
		t.Errorf("second run: %+v, %v; want accept: blue", res, err)
	}
}

// Every progress notification sent before the result is published before
// the call returns, over stdio and over HTTP, although the SDK hands over
// the result before its notification handler runs.
func TestProgressBeforeResult(t *testing.T) {
	for name, cfg := range map[string]mcp.ServerConfig{
		"stdio": faultStdio(t),
		"http":  {Name: "fault", URL: serveFault(t, newFaultServer(nil), "")},
	} {
		t.Run(name, func(t *testing.T) {
			reg, _ := connect(t, mcp.Options{}, cfg)
			for i := range 20 {
				progress := newProgressLog()
				res, err := call(t, callCtx(context.Background(), nil, progress), reg, "mcp__fault__steps", `{"n":3}`)
				if err != nil || res.Output != "done" {
					t.Fatalf("steps: %+v, %v", res, err)
				}
				if got := progress.all(); strings.Join(got, ",") != "1/3,2/3,3/3" {
					t.Fatalf("call %d: progress = %v, want 1/3, 2/3, 3/3", i, got)
				}
			}
		})
	}
}
