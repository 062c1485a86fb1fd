package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap/zapcore"

	keelpkg "github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/provider/providertest"
)

// anthropicAnswer is one Anthropic Messages stream: "Hello, world!" with
// 25 prompt tokens at full price, 100 written to the cache, 400 read from
// it, and 12 answer tokens.
var anthropicAnswer = providertest.SSEEvents(
	"event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":400,"output_tokens":1}}}`+"\n\n",
	"event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n",
	"event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, world!"}}`+"\n\n",
	"event: content_block_stop\ndata: "+`{"type":"content_block_stop","index":0}`+"\n\n",
	"event: message_delta\ndata: "+`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}`+"\n\n",
	"event: message_stop\ndata: "+`{"type":"message_stop"}`+"\n\n")

// anthropicAnswerNanos is what anthropicAnswer costs at keel's default
// price of anthropic:claude-sonnet-4-5 (3.00 in, 0.30 cached, 3.75 cache
// write, 15.00 out per million): 25×3 + 400×0.30 + 100×3.75 + 12×15
// millionths.
const anthropicAnswerNanos = 75_000 + 120_000 + 375_000 + 180_000

// dollarScript calls list_files and reports 1,000 answer tokens, again and
// again: 1.00 USD a request at the price the money tests give it.
const dollarScript = `{"repeat":true,"turns":[{"tool_calls":[{"id":"l","name":"list_files","arguments":{"path":"."}}],"usage":{"input_tokens":1000,"output_tokens":1000}}]}`

// moneyConfig writes a keel.yaml that names an Anthropic model at baseURL
// (priced by keel's default table), prices the scripted model at a
// thousandth of a USD an answer token, caps answers at 1,000 tokens (so a
// budget check asks for 1.00 USD), and sets the operator's ceilings.
func moneyConfig(t *testing.T, baseURL, scripted string) string {
	t.Helper()
	yaml := fmt.Sprintf(`models:
  claude:
    provider: anthropic
    model: claude-sonnet-4-5
    base_url: %s
prices:
  %q: {input: 0, output: 1000, currency: USD}
limits:
  max_tokens: 1000
budgets:
  run: {max: 5.00, currency: USD}
  session: {max: 50.00, currency: USD}
`, baseURL, scripted)
	path := filepath.Join(t.TempDir(), "keel.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMoneyEndToEnd checks docs/contract.md §20 through every surface of
// keel dev: keel run prints a run's cost and the table it came from;
// keel state and the HTTP state name keel's dated default table, so no
// one mistakes the estimate for a bill; a budget above the operator's
// ceiling is refused by the CLI, the HTTP API, the Go client and a
// Temporal update sent directly, each before history; and a run its
// budget stops shows the warning and the cost in keel run and carries the
// totals in the Go client's outcome.
func TestMoneyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 3*time.Minute)
	defer cancel()
	models := providertest.NewServer(t, anthropicAnswer)
	scripted := writeScript(t, dollarScript)
	conf := configFlag{path: moneyConfig(t, models.URL, scripted)}
	if err := conf.load(); err != nil {
		t.Fatal(err)
	}
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: t.TempDir(),
		logger: quietLogger(), logLevel: zapcore.ErrorLevel, config: &conf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	keel := func(args ...string) (code int, stdout, stderr string) {
		var out, errOut bytes.Buffer
		conn := []string{args[0], "--address", stack.server.Address(), "--codec-endpoint", stack.codecURL}
		if args[0] == "run" {
			conn = append(conn, "--nats", stack.nats.ClientURL())
		}
		code = dispatch(ctx, append(conn, args[1:]...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	table := config.DefaultPricesName()
	if !strings.Contains(table, "(estimate)") || !strings.Contains(table, "20") {
		t.Fatalf("the default table's name %q does not say it is a dated estimate", table)
	}

	t.Run("keel run prints the cost and its table", func(t *testing.T) {
		code, out, errOut := keel("run", "--session", "money", "--model", "claude", "hi")
		if code != exitOK {
			t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
		}
		want := fmt.Sprintf("usage: 525 tokens in · 12 out · 1 request · %s USD (%s)", keelpkg.FormatNanos(anthropicAnswerNanos), table)
		if !strings.Contains(out, want) {
			t.Errorf("keel run's output lacks %q:\n%s", want, out)
		}
	})

	// wantTable checks a session state's usage: one cost, in USD, from
	// the default table.
	wantTable := func(t *testing.T, what string, st api.SessionStatus) {
		t.Helper()
		c := st.Usage.Cost
		if len(c) != 1 || c[0].Currency != "USD" || c[0].Nanos != anthropicAnswerNanos || c[0].Prices != table {
			t.Errorf("%s: usage cost %+v, want %d nanos USD named %q", what, c, anthropicAnswerNanos, table)
		}
	}
	t.Run("keel state names the table", func(t *testing.T) {
		code, out, errOut := keel("state", "money")
		if code != exitOK {
			t.Fatalf("state: %d %s", code, errOut)
		}
		var st api.SessionStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		wantTable(t, "keel state", st)
		if !strings.Contains(out, `"prices": "`+table+`"`) {
			t.Errorf("keel state does not print the table's name:\n%s", out)
		}
	})
	t.Run("the HTTP state names the table", func(t *testing.T) {
		code, body := rawDo(t, ctx, http.MethodGet, stack.gatewayURL()+"/sessions/money", nil, "")
		if code != http.StatusOK {
			t.Fatalf("GET state: %d %s", code, body)
		}
		var st api.SessionStatus
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		wantTable(t, "GET /v1/sessions/money", st)
	})

	kc, err := client.Dial(ctx, client.Options{Temporal: stack.temporal})
	if err != nil {
		t.Fatal(err)
	}
	const ceiling = "above this worker's ceiling of 5.00 USD"
	t.Run("a budget above the ceiling is refused everywhere", func(t *testing.T) {
		code, out, errOut := keel("run", "--session", "raise-cli", "--model", scripted, "--budget", "5.01", "hi")
		if code != exitFailed || !strings.Contains(errOut, ceiling) {
			t.Errorf("keel run --budget 5.01: status %d, stdout %q, stderr %q", code, out, errOut)
		}
		code, body := rawDo(t, ctx, http.MethodPost, stack.gatewayURL()+"/sessions/raise-http/runs",
			map[string]string{"Content-Type": "application/json"},
			`{"prompt":"hi","model":"`+scripted+`","session_budget":{"max":50.5,"currency":"USD"}}`)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_input"`) ||
			!strings.Contains(body, "session_budget of 50.50 USD is above this worker's ceiling of 50.00 USD") {
			t.Errorf("POST runs with a session budget above the ceiling: %d %s", code, body)
		}
		_, err := kc.Session("raise-go").Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: scripted,
			Budget: &api.Budget{Max: 6, Currency: "USD"}}))
		if !errors.Is(err, keelpkg.ErrInvalidInput) || !strings.Contains(err.Error(), ceiling) {
			t.Errorf("Go client: %v", err)
		}
		var eur *keelpkg.Error
		_, err = kc.Session("raise-go").Send(ctx, "hi", client.WithConfig(api.RunConfig{Model: scripted,
			Budget: &api.Budget{Max: 1, Currency: "EUR"}}))
		if !errors.As(err, &eur) || eur.Code != keelpkg.CodeInvalidInput || !strings.Contains(eur.Message, "this worker's ceiling is in USD") {
			t.Errorf("Go client, a budget in another currency: %v", err)
		}
		// A Temporal client that skips keel's own: the session's
		// validator refuses the update before it enters history.
		h, err := stack.temporal.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: "money",
			UpdateName: api.UpdateSend, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.SendRequest{Prompt: "hi", Config: &api.RunConfig{Model: scripted,
				Budget: &api.Budget{MaxTokens: 1, Max: 1e6, Currency: "USD"}}}}})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != string(keelpkg.CodeInvalidInput) || !strings.Contains(appErr.Error(), ceiling) {
			t.Errorf("a send update straight to Temporal: %v", err)
		}
		st, err := kc.Session("money").State(ctx)
		if err != nil || st.Runs != 1 {
			t.Errorf("the refused update changed the session: %+v %v", st, err)
		}
	})

	t.Run("a run its budget stops", func(t *testing.T) {
		// 1.00 USD a request, 1.00 USD asked at each check: with 2.50 the
		// third request is refused; the warning comes at 2.00 (80 %).
		code, out, errOut := keel("run", "--session", "spend", "--model", scripted, "--tools", "list_files",
			"--budget", "2.50", "spend")
		if code != exitFailed {
			t.Fatalf("run: status %d\n%s\n%s", code, out, errOut)
		}
		for _, want := range []string{
			"! budget warning: run budget (caller) 2.00 of 2.50 USD",
			"usage: 2000 tokens in · 2000 out · 2 requests · 2.00 USD (keel.yaml)",
			"✗ failed: keel.BudgetExceeded: the next request could spend 1.00 USD and the run budget (set by the caller) has 0.50 USD left of 2.50 USD",
		} {
			if !strings.Contains(out+errOut, want) {
				t.Errorf("keel run's output lacks %q:\n%s\n%s", want, out, errOut)
			}
		}
		o, err := kc.Session("spend").Run(1).Outcome(ctx)
		if !errors.Is(err, keelpkg.ErrBudgetExceeded) {
			t.Fatalf("outcome: %v", err)
		}
		want := keelpkg.Costs{{Currency: "USD", Nanos: 2e9, Prices: config.PricesFromFile}}
		if fmt.Sprint(o.UsageTotal.Cost) != fmt.Sprint(want) || o.UsageTotal.Requests != 2 {
			t.Errorf("the Go client's outcome: usage_total %+v, want cost %v over 2 requests", o.UsageTotal, want)
		}
	})
}
