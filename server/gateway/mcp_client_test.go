package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/server/gateway"
)

// mcpClientDir holds the npm project that drives the gateway with the
// published @modelcontextprotocol/sdk client (pinned in
// package-lock.json).
const mcpClientDir = "testdata/mcp-client"

// nodeProject finds node and installs dir's locked packages (npm ci)
// when pkg is not installed yet. Without node the test is skipped, but
// under CI, which installs node, it fails.
func nodeProject(t *testing.T, ctx context.Context, dir, pkg string) (node, abs string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("node is not installed: the published client cannot run (CI installs nodejs and runs this test)")
		}
		t.Fatal("CI is set but node is not installed (.ci/run installs nodejs and npm)")
	}
	abs, err = filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "node_modules", pkg)); err != nil {
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = abs
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node, abs
}

// The published MCP TypeScript client against the gateway: it lists the
// agents as tools, calls the typed one (checking its structured content
// against the tool's output schema) with progress, answers the asker's
// elicitation, and cancels a call, which cancels the keel run.
func TestMCPPublishedClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, dir := nodeProject(t, ctx, mcpClientDir, "@modelcontextprotocol/sdk")
	shared.book.Add(t, "typed", `{"chunk_delay":"5ms","turns":[{"text":["{\"n\":", " 7}"]}]}`)
	shared.book.Add(t, "asker", `{"turns":[
	  {"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["Noted."]}]}`)
	shared.book.Add(t, "researcher", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"mcp-ts-never"}}]},
	  {"text":["unreachable"]}]}`)
	const key = "mcp-client-key-0123456789abcdef"
	s := startGateway(t, gateway.Options{Agents: interopAgents(), Keys: []gateway.APIKey{{Key: key, Prefix: "ts-"}}})
	cmd := exec.CommandContext(ctx, node, "run.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+s.srv.URL+"/v1/mcp", "MCP_KEY="+key, "MCP_ANSWER=green")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node run.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	var res struct {
		Tools []struct {
			Name            string `json:"name"`
			HasOutputSchema bool   `json:"hasOutputSchema"`
		} `json:"tools"`
		Typed struct {
			Content           []map[string]any `json:"content"`
			StructuredContent map[string]any   `json:"structuredContent"`
			IsError           bool             `json:"isError"`
		} `json:"typed"`
		Progress []struct {
			Progress float64 `json:"progress"`
			Message  string  `json:"message"`
		} `json:"progress"`
		Asker struct {
			Content []map[string]any `json:"content"`
		} `json:"asker"`
		Asked  []string `json:"asked"`
		Cancel struct {
			Run   string `json:"run"`
			Error string `json:"error"`
		} `json:"cancel"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("run.mjs output: %v\n%s", err, stdout.String())
	}
	if len(res.Tools) != 4 || res.Tools[3].Name != "agent__typed" || !res.Tools[3].HasOutputSchema {
		t.Errorf("tools %+v", res.Tools)
	}
	if res.Typed.IsError || res.Typed.StructuredContent["n"] != 7.0 {
		t.Errorf("typed call %+v", res.Typed)
	}
	if len(res.Progress) < 3 || !strings.HasPrefix(res.Progress[0].Message, "run ts-mcp-") {
		t.Errorf("progress %+v", res.Progress)
	}
	if len(res.Asked) != 1 || res.Asked[0] != "Which colour?" || len(res.Asker.Content) != 1 || res.Asker.Content[0]["text"] != "Noted." {
		t.Errorf("asker: asked %q, result %+v", res.Asked, res.Asker)
	}
	if res.Cancel.Error == "" || !strings.HasPrefix(res.Cancel.Run, "ts-mcp-") {
		t.Fatalf("cancel %+v", res.Cancel)
	}
	session, _, _ := strings.Cut(res.Cancel.Run, "/")
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	var seen []byte
	defer func() {
		if t.Failed() {
			t.Logf("session %s: %s", session, seen)
		}
	}()
	waitFor(t, wctx, func() bool {
		r := s.callWith(t, http.MethodGet, "/v1/sessions/"+session, nil, map[string]string{"Authorization": bearer(key)})
		seen = r.raw
		last, _ := r.body["last_outcome"].(map[string]any)
		return r.body["state"] == "idle" && last != nil && last["status"] == "cancelled"
	})
}

// A call outlives the gateway that started it: the published client
// calls through one gateway, that gateway stops mid-call, and the client
// resumes the call through another gateway (no state shared but the key)
// from the last event ID it saw, with its MCP session. The result arrives
// there, once, and the run ran once.
func TestMCPPublishedClientResumesOnAnotherGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, dir := nodeProject(t, ctx, mcpClientDir, "@modelcontextprotocol/sdk")
	shared.book.Add(t, "researcher", `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"mcp-resume"}}]},
	  {"text":["found ", "it"]}]}`)
	const key = "mcp-resume-key-0123456789abcdef"
	opts := gateway.Options{Agents: interopAgents(), Keys: []gateway.APIKey{{Key: key, Prefix: "rs-"}}}
	s1, s2 := startGateway(t, opts), startGateway(t, opts)
	cmd := exec.CommandContext(ctx, node, "resume.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+s1.srv.URL+"/v1/mcp", "MCP_URL2="+s2.srv.URL+"/v1/mcp", "MCP_KEY="+key)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	next := func(v any) {
		t.Helper()
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), v) != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("resume.mjs said %q\nstderr:\n%s", lines.Text(), stderr.String())
		}
	}
	var started struct{ Started string }
	next(&started)
	if !strings.HasPrefix(started.Started, "rs-mcp-") {
		t.Fatalf("started %q", started.Started)
	}
	// The first gateway goes away mid-call; the run goes on.
	s1.stop()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	// The resumed stream follows the run on the second gateway; then the
	// tool may finish.
	waitFor(t, ctx, func() bool { return gateway.Followers(s2.gw) == 1 })
	shared.gates.open("mcp-resume")
	var out struct {
		Result struct {
			Content []map[string]any `json:"content"`
			IsError bool             `json:"isError"`
			Meta    map[string]any   `json:"_meta"`
		}
		Token      string
		FirstEnded string
	}
	next(&out)
	if out.Result.IsError || len(out.Result.Content) != 1 || out.Result.Content[0]["text"] != "found it" ||
		out.Result.Meta["keel/run_id"] != started.Started || out.Token == "" || out.FirstEnded == "the first gateway answered" {
		t.Fatalf("resumed: %+v", out)
	}
	session, _, _ := strings.Cut(started.Started, "/")
	r := s2.callWith(t, http.MethodGet, "/v1/sessions/"+session+"/events?after=0&limit=500", nil,
		map[string]string{"Authorization": bearer(key)}).must(t, http.StatusOK)
	if n := strings.Count(string(r.raw), `"type":"run.started"`); n != 1 {
		t.Errorf("%d runs started", n)
	}
	if n := strings.Count(string(r.raw), `"type":"run.completed"`); n != 1 {
		t.Errorf("%d runs completed", n)
	}
}
