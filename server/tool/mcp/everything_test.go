package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/tool/mcp"
)

// npmDir holds the npm project pinning the published MCP servers the
// tests run (package-lock.json has their exact versions).
const npmDir = "testdata/npm"

var npmOnce sync.Once
var npmErr error

// npmServers installs the published servers with npm ci (once per test
// binary) and returns node and the project directory. Without node the
// test is skipped, unless CI is set: then it fails.
func npmServers(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("node is not installed: the published MCP servers cannot run (CI installs nodejs and runs this test)")
		}
		t.Fatal("CI is set but node is not installed (.ci/run installs nodejs and npm)")
	}
	dir, err = filepath.Abs(npmDir)
	if err != nil {
		t.Fatal(err)
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", npmDir, err, out)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return node, dir
}

// everything is server-everything over stdio, as a worker would start it.
func everything(t *testing.T) mcp.ServerConfig {
	node, dir := npmServers(t)
	return mcp.ServerConfig{Name: "everything", Command: node,
		Args: []string{filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"}}
}

// connectEverything connects server-everything and waits for the tools it
// registers once it knows the client's capabilities (it announces them
// with list_changed).
func connectEverything(t *testing.T) *tool.Registry {
	t.Helper()
	changes := make(chan []string, 10)
	reg, _ := connect(t, mcp.Options{OnToolsChanged: func(_ string, tools []string) { changes <- tools }}, everything(t))
	waitFor(t, changes, "mcp__everything__trigger-elicitation-request", true)
	return reg
}

func TestEverythingTools(t *testing.T) {
	reg := connectEverything(t)
	ctx := callCtx(context.Background(), nil, nil)
	for _, tc := range []struct{ name, args, want string }{
		{"mcp__everything__echo", `{"message":"hello keel"}`, "Echo: hello keel"},
		{"mcp__everything__get-sum", `{"a":2,"b":40}`, "The sum of 2 and 40 is 42."},
	} {
		res, err := call(t, ctx, reg, tc.name, tc.args)
		if err != nil || res.IsError || res.Output != tc.want {
			t.Errorf("%s: %+v, %v; want %q", tc.name, res, err, tc.want)
		}
	}
	// The model sees the server's schema, without "$schema".
	echo, _ := reg.Lookup("mcp__everything__echo")
	var schema map[string]any
	if err := json.Unmarshal(echo.Spec().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if _, ok := schema["$schema"]; ok {
		t.Errorf("echo's schema keeps $schema: %s", echo.Spec().Parameters)
	}
	if props, _ := schema["properties"].(map[string]any); props["message"] == nil {
		t.Errorf("echo's schema has no message property: %s", echo.Spec().Parameters)
	}
	// Structured content reaches the model as JSON.
	res, err := call(t, ctx, reg, "mcp__everything__get-structured-content", `{"location":"New York"}`)
	if err != nil || res.IsError || !strings.Contains(res.Output, `"temperature"`) {
		t.Errorf("get-structured-content: %+v, %v; want its JSON", res, err)
	}
	// An image is a line naming it, between the text blocks.
	res, err = call(t, ctx, reg, "mcp__everything__get-tiny-image", `{}`)
	if err != nil || res.IsError || !regexp.MustCompile(`^Here's the image you requested:\n\[image image/png, \d+ bytes\]\nThe image above is the MCP logo\.$`).MatchString(res.Output) {
		t.Errorf("get-tiny-image: %+v, %v", res, err)
	}
	// Arguments the schema refuses never reach the server.
	res, err = call(t, ctx, reg, "mcp__everything__get-sum", `{"a":"two","b":40}`)
	if err != nil || !res.IsError || !strings.Contains(res.Output, "at /a") {
		t.Errorf("get-sum with a string: %+v, %v; want an argument error at /a", res, err)
	}
	// Sampling is not offered (keel advertises no sampling capability),
	// so the server does not offer its sampling tool.
	if _, ok := reg.Lookup("mcp__everything__trigger-sampling-request"); ok {
		t.Error("trigger-sampling-request offered although keel refuses sampling")
	}
}

// The long-running operation reports progress, which becomes the call's
// progress notes.
func TestEverythingLongRunningProgress(t *testing.T) {
	reg := connectEverything(t)
	progress := newProgressLog()
	res, err := call(t, callCtx(context.Background(), nil, progress), reg,
		"mcp__everything__trigger-long-running-operation", `{"duration":0.4,"steps":4}`)
	if err != nil || res.IsError || !strings.Contains(res.Output, "Long running operation completed") {
		t.Fatalf("long-running operation: %+v, %v", res, err)
	}
	want := []string{"1/4", "2/4", "3/4", "4/4"}
	if got := progress.all(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("progress = %v, want %v", got, want)
	}
}

// Cancelling the long-running operation returns at once; the session
// survives and answers the next call.
func TestEverythingCancelLongRunning(t *testing.T) {
	reg := connectEverything(t)
	progress := newProgressLog()
	ctx, cancel := context.WithCancel(callCtx(context.Background(), nil, progress))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := call(t, ctx, reg, "mcp__everything__trigger-long-running-operation", `{"duration":60,"steps":120}`)
		done <- err
	}()
	<-progress.note // running
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		t.Logf("cancellation of the long-running operation: the call returned %v after cancel", time.Since(start))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	res, err := call(t, callCtx(context.Background(), nil, nil), reg, "mcp__everything__echo", `{"message":"still here"}`)
	if err != nil || res.Output != "Echo: still here" {
		t.Errorf("echo after the cancellation: %+v, %v", res, err)
	}
}

// server-everything's elicitation becomes a host-input question with its
// schema; the answer validated against it goes back to the server when
// the call runs again.
func TestEverythingElicitation(t *testing.T) {
	reg := connectEverything(t)
	const name = "mcp__everything__trigger-elicitation-request"
	_, err := call(t, callCtx(context.Background(), nil, nil), reg, name, `{}`)
	var need *tool.NeedInput
	if !errors.As(err, &need) {
		t.Fatalf("first run: error %v, want *tool.NeedInput", err)
	}
	q := need.Question
	if q.ID != "elicitation-1" || !strings.Contains(q.Prompt, "Please provide inputs") {
		t.Errorf("question = %+v", q)
	}
	if err := tool.ValidateJSON(q.Schema, json.RawMessage(`{"check":true}`)); err == nil {
		t.Error("an answer without the required name validated")
	}
	answer := json.RawMessage(`{"name":"Ada Lovelace","check":true,"email":"ada@example.com","integer":7}`)
	if err := tool.ValidateJSON(q.Schema, answer); err != nil {
		t.Fatalf("valid answer refused: %v", err)
	}
	res, err := call(t, callCtx(context.Background(), map[string]json.RawMessage{q.ID: answer}, nil), reg, name, `{}`)
	if err != nil || res.IsError {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	for _, want := range []string{"- Name: Ada Lovelace", "- Email: ada@example.com", "- Favorite Integer: 7"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
}

// server-everything over streamable HTTP.
func TestEverythingStreamableHTTP(t *testing.T) {
	node, dir := npmServers(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	// Wait for the server to say it listens.
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "listening on port") {
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()

	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "everything", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)})
	res, err := call(t, callCtx(context.Background(), nil, nil), reg, "mcp__everything__get-sum", `{"a":1.5,"b":2}`)
	if err != nil || res.Output != "The sum of 1.5 and 2 is 3.5." {
		t.Errorf("get-sum over HTTP: %+v, %v", res, err)
	}
}

// server-filesystem, confined to a temporary directory.
func TestFilesystemServer(t *testing.T) {
	node, dir := npmServers(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("keel was here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, _ := connect(t, mcp.Options{}, mcp.ServerConfig{Name: "fs", Command: node,
		Args: []string{filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root}})
	ctx := callCtx(context.Background(), nil, nil)
	res, err := call(t, ctx, reg, "mcp__fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "notes.txt")))
	if err != nil || res.IsError || !strings.Contains(res.Output, "keel was here") {
		t.Errorf("read_text_file: %+v, %v", res, err)
	}
	res, err = call(t, ctx, reg, "mcp__fs__write_file", fmt.Sprintf(`{"path":%q,"content":"new"}`, filepath.Join(root, "out.txt")))
	if err != nil || res.IsError {
		t.Errorf("write_file: %+v, %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "out.txt")); err != nil || string(b) != "new" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
	// Outside the allowed directory: the server refuses, the model sees why.
	res, err = call(t, ctx, reg, "mcp__fs__read_text_file", `{"path":"/etc/hostname"}`)
	if err != nil || !res.IsError || !strings.Contains(res.Output, "Access denied") {
		t.Errorf("read outside the root: %+v, %v; want an access-denied error result", res, err)
	}
}

// A URL elicitation asks the host to open the URL and say when done.
func TestEverythingURLElicitation(t *testing.T) {
	changes := make(chan []string, 10)
	reg, _ := connect(t, mcp.Options{OnToolsChanged: func(_ string, tools []string) { changes <- tools }}, everything(t))
	const name = "mcp__everything__trigger-url-elicitation"
	waitFor(t, changes, name, true)
	args := `{"url":"https://auth.example.com/consent","message":"Grant access"}`
	_, err := call(t, callCtx(context.Background(), nil, nil), reg, name, args)
	var need *tool.NeedInput
	if !errors.As(err, &need) {
		t.Fatalf("first run: error %v, want *tool.NeedInput", err)
	}
	if q := need.Question; !strings.Contains(q.Prompt, "https://auth.example.com/consent") || string(q.Schema) != `{"type":"boolean"}` {
		t.Errorf("question = %+v, want a yes-or-no question naming the URL", q)
	}
	res, err := call(t, callCtx(context.Background(), map[string]json.RawMessage{need.Question.ID: json.RawMessage(`true`)}, nil), reg, name, args)
	if err != nil || res.IsError || !strings.Contains(res.Output, "User completed the URL elicitation flow") {
		t.Errorf("second run: %+v, %v", res, err)
	}
}

// With sampling allowed for the server, server-everything's sampling
// request reaches the call's sampler (the Tool activity's: the run's
// model); a call without one refuses it and the server reports the
// failure.
func TestEverythingSampling(t *testing.T) {
	changes := make(chan []string, 10)
	cfg := everything(t)
	cfg.Sampling = true
	reg, _ := connect(t, mcp.Options{OnToolsChanged: func(_ string, tools []string) { changes <- tools }}, cfg)
	const name = "mcp__everything__trigger-sampling-request"
	waitFor(t, changes, name, true)
	var got tool.SampleRequest
	ctx := tool.WithSampler(callCtx(context.Background(), nil, nil), func(_ context.Context, req tool.SampleRequest) (tool.SampleResult, error) {
		got = req
		return tool.SampleResult{Text: "hi from the model", Model: "m1", Finish: "stop"}, nil
	})
	res, err := call(t, ctx, reg, name, `{"prompt":"say hi","maxTokens":50}`)
	if err != nil || res.IsError || !strings.Contains(res.Output, `"text": "hi from the model"`) || !strings.Contains(res.Output, `"model": "m1"`) {
		t.Fatalf("sampling: %+v, %v", res, err)
	}
	if got.System != "You are a helpful test server." || got.MaxTokens != 50 || len(got.Messages) != 1 ||
		got.Messages[0].Content != "Resource trigger-sampling-request context: say hi" {
		t.Errorf("sample request = %+v", got)
	}
	res, err = call(t, callCtx(context.Background(), nil, nil), reg, name, `{"prompt":"say hi"}`)
	if err != nil || !res.IsError || !strings.Contains(res.Output, "sampling is refused") {
		t.Errorf("without a sampler: %+v, %v; want an error result saying sampling is refused", res, err)
	}
}
