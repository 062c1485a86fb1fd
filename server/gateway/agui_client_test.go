package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/server/gateway"
)

// aguiClientDir holds the npm project that drives the gateway with the
// published @ag-ui/client (its version pinned in package-lock.json).
const aguiClientDir = "testdata/agui-client"

// aguiClientResult is what run.mjs prints: each AG-UI run's events as the
// client validated and handed them to its subscriber, and the agent's
// messages at the end.
type aguiClientResult struct {
	Runs []struct {
		Events  []aguiEvent `json:"events"`
		Outcome string      `json:"outcome"`
		Pending []string    `json:"pending"`
	} `json:"runs"`
	Messages []map[string]any `json:"messages"`
}

// The published AG-UI client (HttpAgent of @ag-ui/client) runs a thread
// against the gateway: the run asks a question, the client sees the
// interrupt outcome and resumes with its answer, and the same keel run
// completes. The client checks every event against the protocol's schemas
// and ordering rules (a violation fails its run, and the script); it must
// also have stripped nothing it does not know.
func TestAGUIPublishedClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("node is not installed: the published AG-UI client cannot run (CI installs nodejs and runs this test)")
		}
		t.Fatal("CI is set but node is not installed (.ci/run installs nodejs and npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, err := filepath.Abs(aguiClientDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client")); err != nil {
		// Exactly the versions of package-lock.json.
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", aguiClientDir, err, out)
		}
	}

	s := startGateway(t, gateway.Options{})
	m := model(t, `{"turns":[
	  {"text":["Let me ask."],"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
	  {"text":["Blue ","it is."]}]}`)
	keelProps, _ := json.Marshal(map[string]any{"model": m, "tools": []string{"ask_user"}})
	cmd := exec.CommandContext(ctx, node, "run.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"AGUI_URL="+s.srv.URL+"/v1/ag-ui", "AGUI_THREAD=agui-client", "AGUI_PROMPT=pick a colour",
		`AGUI_ANSWER="blue"`, "AGUI_KEEL="+string(keelProps))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node run.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	// The client warns (on stderr) about every field it strips or event it
	// drops as not part of the protocol.
	if strings.Contains(stderr.String(), "[ag-ui]") {
		t.Fatalf("the AG-UI client complained:\n%s", stderr.String())
	}
	var res aguiClientResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("run.mjs output: %v\n%s", err, stdout.String())
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d AG-UI runs, want the interrupted one and its resumption: %s", len(res.Runs), stdout.String())
	}
	first, second := res.Runs[0], res.Runs[1]
	if first.Outcome != "interrupt" || len(first.Pending) != 1 || !strings.HasPrefix(first.Pending[0], "q1/") {
		t.Fatalf("first run: outcome %q, pending %v", first.Outcome, first.Pending)
	}
	if second.Outcome != "success" || len(second.Pending) != 0 {
		t.Fatalf("second run: outcome %q, pending %v", second.Outcome, second.Pending)
	}
	var types []string
	for _, r := range res.Runs {
		for _, e := range r.Events {
			types = append(types, e.str("type"))
		}
	}
	for _, want := range []string{"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STEP_FINISHED", "CUSTOM", "RUN_FINISHED"} {
		if !strings.Contains(" "+strings.Join(types, " ")+" ", " "+want+" ") {
			t.Errorf("the client collected no %s: %v", want, types)
		}
	}
	last := durableContiguous(t, first.Events, 1)
	durableContiguous(t, second.Events, last+1)

	// The agent's conversation: the prompt, the assistant message with
	// its text and the ask_user call, the answer as the tool's result,
	// and the final text.
	var roles, texts []string
	for _, msg := range res.Messages {
		roles = append(roles, msg["role"].(string))
		if c, ok := msg["content"].(string); ok {
			texts = append(texts, c)
		}
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("messages %v", res.Messages)
	}
	if calls, _ := res.Messages[1]["toolCalls"].([]any); len(calls) != 1 || calls[0].(map[string]any)["id"] != "q1" {
		t.Fatalf("assistant message %v: want its ask_user call", res.Messages[1])
	}
	if texts[0] != "pick a colour" || texts[1] != "Let me ask." || texts[len(texts)-1] != "Blue it is." {
		t.Fatalf("message texts %q", texts)
	}
}
