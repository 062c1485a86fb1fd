package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// events builds a run's envelopes the way the SDK delivers them: durable
// events numbered densely, deltas carrying the last sequence before them.
type events struct {
	t   *testing.T
	seq int64
	out []keel.Envelope
}

func (b *events) seal(ev keel.Event) keel.Envelope {
	b.t.Helper()
	env, err := keel.Seal(ev, "s-test", "s-test/run-1", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		b.t.Fatal(err)
	}
	return env
}

// durable appends durable events.
func (b *events) durable(evs ...keel.Event) *events {
	for _, ev := range evs {
		env := b.seal(ev)
		b.seq++
		env.Seq = b.seq
		b.out = append(b.out, env)
	}
	return b
}

// text appends text deltas of a step's attempt.
func (b *events) text(step, attempt int, chunks ...string) *events {
	for _, c := range chunks {
		env := b.seal(keel.TextDelta{Step: step, Attempt: attempt, Text: c})
		env.AfterSeq = b.seq
		b.out = append(b.out, env)
	}
	return b
}

func (b *events) delta(ev keel.Event) *events {
	env := b.seal(ev)
	env.AfterSeq = b.seq
	b.out = append(b.out, env)
	return b
}

// relay appends a child's text deltas relayed to the run
// (docs/contract.md §21.4), named by its path.
func (b *events) relay(path string, step, attempt int, chunks ...string) *events {
	for _, c := range chunks {
		env := b.seal(keel.TextDelta{Step: step, Attempt: attempt, Text: c})
		env.AfterSeq, env.Path = b.seq, path
		b.out = append(b.out, env)
	}
	return b
}

func args(s string) json.RawMessage { return json.RawMessage(s) }

func dur(d time.Duration) keel.Duration { return keel.Duration(d) }

func usage(in, out int64, reqs int) keel.Usage {
	return keel.Usage{InputTokens: in, OutputTokens: out, Requests: reqs}
}

// renderCases are whole runs, each rendered and compared with
// testdata/render/NAME.golden.
var renderCases = []struct {
	name  string
	opts  renderOptions
	build func(b *events)
}{
	{
		// Streamed text, a tool card with a progress note and long output,
		// step boundaries and the usage summary.
		name: "tool_run",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Revision: 0, Prompt: "Tour the\nworkspace", Model: "scripted:demo"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 12})
			b.text(1, 1, "Hello! ", "Let me look ", "around.")
			b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: usage(412, 38, 1), Total: usage(412, 38, 1)},
				keel.ModelCallCompleted{Step: 1, Attempt: 1},
				keel.ToolProposed{ToolCallID: "c1", Name: "list_files", Arguments: args(`{ "path" : "." }`), Step: 1},
				keel.ToolStarted{ToolCallID: "c1", Name: "list_files"})
			b.delta(keel.ToolProgress{ToolCallID: "c1", Message: "scanning"})
			b.durable(keel.ToolFinished{ToolCallID: "c1", Name: "list_files", Status: keel.ToolOK,
				Output: "a.txt\nb.txt\n\tc.txt\nd/\ne.txt\nf.txt\n", Duration: dur(3200 * time.Microsecond)},
				keel.StepStarted{Step: 2, EstimatedContextTokens: 530})
			b.text(2, 1, "All done: ", "six files.")
			b.durable(keel.UsageUpdated{Step: 2, Attempt: 1, Usage: usage(521, 21, 1), Total: usage(933, 59, 2)},
				keel.RunCompleted{Revision: 1, Text: "All done: six files.", Steps: 2, Usage: usage(933, 59, 2)})
		},
	},
	{
		// A retryable failure mid-stream: the reset marker, the wait, a late
		// delta of the abandoned attempt (dropped), and the new attempt on a
		// line of its own. Usage counts the abandoned request.
		name: "stream_reset",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 2, Revision: 1, Prompt: "hi", Model: "openai:gpt-test"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 40})
			b.text(1, 1, "The answer ", "is")
			retry := dur(2 * time.Second)
			b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: usage(40, 3, 1), Total: usage(40, 3, 1)},
				keel.ProviderStreamReset{Step: 1, Attempt: 1, Reason: keel.ResetReason{
					Kind: keel.ResetRetryableFailure, Failure: keel.ProviderRateLimited, RetryAfter: &retry}},
				keel.ProviderRequestRetry{Step: 1, Attempt: 1, Kind: keel.ProviderRateLimited, Status: 429,
					RetryAfter: &retry, Delay: dur(2 * time.Second), Message: "slow down"})
			b.text(1, 1, " LATE") // published before the reset, delivered after it
			b.text(1, 2, "The answer is 42.")
			b.durable(keel.ProviderStreamReset{Step: 1, Attempt: 2, Reason: keel.ResetReason{
				Kind: keel.ResetMalformed, Detail: "tool call arguments are not JSON"}})
			b.text(1, 3, "The answer is 42.")
			b.durable(keel.UsageUpdated{Step: 1, Attempt: 3, Usage: usage(40, 6, 1), Total: usage(120, 15, 3)},
				keel.RunCompleted{Revision: 2, Text: "The answer is 42.", Steps: 1, Usage: usage(40, 6, 1)})
		},
	},
	{
		// Failed and unavailable tools, then a run failure.
		name: "failures",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Prompt: "read it", Model: "scripted:x.json"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 9},
				keel.ToolProposed{ToolCallID: "r", Name: "read_file", Arguments: args(`{"path":"../etc/passwd"}`), Step: 1},
				keel.ToolProposed{ToolCallID: "s", Name: "shell", Arguments: args(`{"cmd":"ls"}`), Step: 1},
				keel.ToolFinished{ToolCallID: "r", Name: "read_file", Status: keel.ToolError,
					Output: "path escapes the workspace", Duration: dur(time.Millisecond)},
				keel.ToolFinished{ToolCallID: "s", Name: "shell", Status: keel.ToolUnavailable,
					Output: "no tool named shell on this worker"},
				keel.StepStarted{Step: 2, EstimatedContextTokens: 60},
				keel.UsageUpdated{Step: 2, Attempt: 1, Usage: usage(0, 0, 1), Total: usage(9, 0, 2)},
				keel.RunFailed{Code: keel.CodeProvider, Message: "openai: server_error (HTTP 500): boom",
					Retryable: true, Revision: 1})
		},
	},
	{
		// Model and tool text trying to drive the terminal: colors, a
		// title change (OSC), cursor movement, a carriage return, a bell,
		// a C1 CSI, and invalid UTF-8.
		name: "control_sequences",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Prompt: "x\x1b]0;pwned\x07", Model: "scripted:demo"},
				keel.StepStarted{Step: 1})
			b.text(1, 1, "red: \x1b[31mRED\x1b[0m", " title: \x1b]0;owned\x07 home: \x1b[H\x1b[2J", " cr:\rX bell:\x07 c1:\u009b31m del:\x7f bad:\xff ok\ttab\nline two")
			b.durable(keel.ToolProposed{ToolCallID: "c\x1b[1m", Name: "read\x1b[8mfile", Arguments: args(`{"p":"\u001b[2J"}`)},
				keel.ToolFinished{ToolCallID: "c", Name: "read\x1b[8mfile", Status: keel.ToolOK,
					Output: "\x1b[31mfile\x1b[0m contents\r\nsecond"},
				keel.RunFailed{Code: keel.CodeProvider, Message: "bad \x1b[5mblink\x1b[0m\nnext"})
		},
	},
	{
		// Cancelled while a tool ran; reasoning shown on request.
		name: "cancelled_with_reasoning",
		opts: renderOptions{reasoning: true},
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 3, Revision: 2, Prompt: "nap", Model: "scripted:demo"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 5})
			b.delta(keel.ReasoningDelta{Step: 1, Attempt: 1, Text: "A nap "})
			b.delta(keel.ReasoningDelta{Step: 1, Attempt: 1, Text: "is due."})
			b.text(1, 1, "Sleeping now.")
			b.durable(keel.ToolProposed{ToolCallID: "z", Name: "sleep", Arguments: args(`{"seconds":3600}`)},
				keel.ToolStarted{ToolCallID: "z", Name: "sleep"},
				keel.SteeringAccepted{SteeringID: "st1", Text: "wake up\nnow"},
				keel.HostInputRequested{RequestID: "q1", ToolCallID: "z", Prompt: "Really sleep?"},
				keel.HostInputResolved{RequestID: "q1", ToolCallID: "z", Interrupted: true},
				keel.ToolFinished{ToolCallID: "z", Name: "sleep", Status: keel.ToolInterrupted,
					Output: "interrupted: the run was cancelled", Duration: dur(1300 * time.Millisecond)},
				keel.RunCancelled{Revision: 3})
		},
	},
	{
		// Without a live channel no text streams: the final text comes from
		// run.completed, and reasoning stays hidden by default.
		name: "durable_only",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Prompt: "hi", Model: "scripted:demo"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 5})
			b.delta(keel.ReasoningDelta{Step: 1, Attempt: 1, Text: "hidden"})
			b.durable(keel.CompactionStarted{EstimatedContextTokens: 9000},
				keel.CompactionCompleted{MessagesBefore: 40, MessagesAfter: 3},
				keel.RunCompleted{Revision: 1, Text: "Hi there.\nBye.", Steps: 1, Usage: usage(5, 4, 1)})
		},
	},
	{
		// Money (docs/contract.md §20): a priced request, an unpriced one
		// ("≥" on the total), a warning of a money budget and of a token
		// budget (one naming its currency with escapes, shown cleaned), a
		// second warning of the same limit (not shown), and the run the
		// budget stopped.
		name: "budget",
		build: func(b *events) {
			const table = "keel default list prices of 2026-03-01 (estimate)"
			priced := keel.Usage{InputTokens: 1200, OutputTokens: 50, Requests: 1,
				Cost: keel.Costs{{Currency: "USD", Nanos: 3_300_000_000, Prices: table}}}
			total := priced.Add(keel.Usage{InputTokens: 300, OutputTokens: 5, Requests: 1, Unpriced: 1})
			warn := keel.BudgetWarning{Step: 1, Scope: keel.BudgetRun, Set: "caller", Currency: "USD", Limit: 4_000_000_000, Spent: 3_300_000_000}
			b.durable(keel.RunStarted{Number: 1, Prompt: "spend", Model: "scripted:demo"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 1200},
				keel.UsageUpdated{Step: 1, Attempt: 1, Usage: priced, Total: priced},
				keel.UsageUpdated{Step: 1, Attempt: 1, Usage: usage(300, 5, 1), Total: total},
				warn,
				keel.BudgetWarning{Step: 1, Scope: keel.BudgetSession, Set: "worker", Limit: 1800, Spent: 1555},
				keel.BudgetWarning{Step: 1, Scope: keel.BudgetSession, Set: "caller\x1b[31m", Currency: "EUR\x1b]0;x\x07", Limit: 1, Spent: 1},
				warn,
				keel.StepStarted{Step: 2, EstimatedContextTokens: 1300},
				keel.RunFailed{Code: keel.CodeBudgetExceeded, Revision: 1,
					Message: "the next request could spend 0.91 USD and the run budget (set by the caller) has 0.70 USD left of 4.00 USD"})
		},
	},
	{
		// Waiting for a rate limit (docs/contract.md §20.5): a dim line
		// before the attempt's text; a retry that waits again; notices of
		// an abandoned attempt or a finished response show nothing; a
		// limit's name with control characters is shown inert.
		name: "rate_limit",
		build: func(b *events) {
			const claude = "anthropic:claude-sonnet-4-5"
			b.durable(keel.RunStarted{Number: 1, Prompt: "wait", Model: claude},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 900})
			b.delta(keel.ModelWaiting{Step: 1, Attempt: 1, Limit: claude, Wait: dur(4200 * time.Millisecond)})
			b.text(1, 1, "Hello.")
			b.delta(keel.ModelWaiting{Step: 1, Attempt: 1, Limit: claude, Wait: dur(time.Second)})
			b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: usage(900, 2, 1), Total: usage(900, 2, 1)},
				keel.ModelCallCompleted{Step: 1, Attempt: 1},
				keel.StepStarted{Step: 2, EstimatedContextTokens: 950})
			retry := dur(time.Second)
			b.delta(keel.ModelWaiting{Step: 2, Attempt: 1, Limit: "anthropic\x1b[2J", Wait: dur(90 * time.Second)})
			b.durable(keel.UsageUpdated{Step: 2, Attempt: 1, Usage: usage(0, 0, 1), Total: usage(900, 2, 2)},
				keel.ProviderStreamReset{Step: 2, Attempt: 1, Reason: keel.ResetReason{Kind: keel.ResetRetryableFailure,
					Failure: keel.ProviderRateLimited, RetryAfter: &retry}},
				keel.ProviderRequestRetry{Step: 2, Attempt: 1, Kind: keel.ProviderRateLimited, Status: 429,
					RetryAfter: &retry, Delay: retry})
			b.delta(keel.ModelWaiting{Step: 2, Attempt: 1, Limit: claude, Wait: dur(time.Second)}) // abandoned
			b.delta(keel.ModelWaiting{Step: 2, Attempt: 2, Limit: claude, Wait: dur(350 * time.Millisecond)})
			b.text(2, 2, "Done.")
			b.durable(keel.UsageUpdated{Step: 2, Attempt: 2, Usage: usage(950, 2, 1), Total: usage(1850, 4, 3)},
				keel.RunCompleted{Revision: 1, Text: "Done.", Steps: 2, Usage: usage(1850, 4, 2)})
		},
	},
	{
		// Tools the model's backend ran itself (hosted_tool.activity): one
		// line each, after the response and before the tool calls; a
		// query with escapes shown inert; a repeat of an ID and a use of
		// an abandoned attempt show nothing; a reset that drops a use
		// says so. Usage counts the web searches.
		name: "hosted_tools",
		build: func(b *events) {
			const claude = "anthropic:claude-sonnet-4-5"
			searched := keel.Usage{InputTokens: 400, OutputTokens: 40, WebSearches: 2, Requests: 1}
			b.durable(keel.RunStarted{Number: 1, Prompt: "what is new?", Model: claude},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 400})
			b.text(1, 1, "Let me look.")
			b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: searched, Total: searched},
				keel.ModelCallCompleted{Step: 1, Attempt: 1},
				keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "srvtoolu_1", Query: "keel durable agents",
					URLs: []string{"https://example.com/a", "https://example.com/b", "https://example.com/c"}},
				keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "srvtoolu_1", Query: "keel durable agents"},
				keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "srvtoolu_2", Query: "keel \x1b[31mnews\x1b[0m\nnow",
					URLs: []string{"https://example.com/d"}},
				keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "code_execution", Detail: "ran 12 lines\x07 of Python"},
				keel.ToolProposed{ToolCallID: "c1", Name: "read_file", Arguments: args(`{"path":"NEWS"}`), Step: 1},
				keel.ToolFinished{ToolCallID: "c1", Name: "read_file", Status: keel.ToolOK, Output: "nothing"},
				keel.StepStarted{Step: 2, EstimatedContextTokens: 500},
				keel.HostedToolActivity{Step: 2, Attempt: 1, Name: "web_search", ID: "ws_a", Query: "lost"},
				keel.UsageUpdated{Step: 2, Attempt: 1, Usage: keel.Usage{WebSearches: 1, Requests: 1},
					Total: searched.Add(keel.Usage{WebSearches: 1, Requests: 1})},
				keel.ProviderStreamReset{Step: 2, Attempt: 1, Reason: keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: keel.ProviderServer}},
				keel.HostedToolActivity{Step: 2, Attempt: 1, Name: "web_search", ID: "ws_b", Query: "late"})
			b.text(2, 2, "Nothing new.")
			total := searched.Add(keel.Usage{WebSearches: 1, Requests: 1}).Add(usage(500, 3, 1))
			b.durable(keel.UsageUpdated{Step: 2, Attempt: 2, Usage: usage(500, 3, 1), Total: total},
				keel.RunCompleted{Revision: 1, Text: "Nothing new.", Steps: 2, Usage: searched.Add(usage(500, 3, 1)), UsageTotal: &total})
		},
	},
	{
		// A run's hooks (docs/contract.md §23): boundary input as context
		// from its source, never steering, its text cut to a line and its
		// escapes inert; a denied call and a rewritten one on their cards;
		// a failure the run went on after; a stop, then the run.failed it
		// ends with. A failure after the end shows nothing.
		name: "hooks",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Prompt: "tidy the inbox", Model: "scripted:hooks"},
				keel.BoundaryInputApplied{InputID: "in-1", Source: "mail", Point: keel.HookRunStart, Text: "2 new messages: invoice, lunch"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 60})
			b.text(1, 1, "Cleaning up.")
			b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: usage(60, 12, 1), Total: usage(60, 12, 1)},
				keel.ModelCallCompleted{Step: 1, Attempt: 1},
				keel.ToolProposed{ToolCallID: "c1", Name: "delete_file", Arguments: args(`{"path":"inbox/invoice"}`), Step: 1},
				keel.HookDecided{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookDeny, Reason: "invoices are kept", ToolCallID: "c1"},
				keel.ToolFinished{ToolCallID: "c1", Name: "delete_file", Status: keel.ToolError, Output: "invoices are kept"},
				keel.ToolProposed{ToolCallID: "c2", Name: "write_file", Arguments: args(`{"path":"/etc/notes"}`), Step: 1},
				keel.HookDecided{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookReplace, Reason: "kept in the workspace",
					ToolCallID: "c2", Arguments: args(`{ "path" : "notes" }`)},
				keel.ToolStarted{ToolCallID: "c2", Name: "write_file"},
				keel.ToolFinished{ToolCallID: "c2", Name: "write_file", Status: keel.ToolOK, Output: "wrote notes"},
				keel.HookFailed{Hook: "audit", Point: keel.HookAfterTool, ToolCallID: "c2", Code: keel.CodeHookFailed,
					Message: "audit log unreachable", Retryable: true, Continued: true},
				keel.BoundaryInputApplied{InputID: "in-2", Source: "mail", Point: keel.HookBeforeStep, Step: 2,
					Text: "1 new message: \x1b[31mURGENT\x1b[0m\nreply today"},
				keel.StepStarted{Step: 2, EstimatedContextTokens: 140})
			b.text(2, 1, "Done.")
			b.durable(keel.UsageUpdated{Step: 2, Attempt: 1, Usage: usage(140, 2, 1), Total: usage(200, 14, 2)},
				keel.ModelCallCompleted{Step: 2, Attempt: 1},
				keel.HookDecided{Hook: "quota", Point: keel.HookBeforeCommit, Action: keel.HookStop, Reason: "the day's quota is spent"},
				keel.RunFailed{Code: keel.CodeHookStopped, Message: "the day's quota is spent", Revision: 1},
				keel.HookFailed{Hook: "audit", Point: keel.HookRunEnd, Code: keel.CodeHookFailed, Message: "after the end", Continued: true})
		},
	},
	{
		// A hook whose failure fails the run: its line says so, and
		// run.failed follows with keel.HookFailed.
		name: "hook_failed",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 3, Revision: 2, Prompt: "go", Model: "scripted:demo"},
				keel.HookFailed{Hook: "policy", Point: keel.HookRunStart, Code: keel.CodeHookFailed, Message: "policy service: 503"},
				keel.RunFailed{Code: keel.CodeHookFailed, Message: "hook policy: policy service: 503", Revision: 2})
		},
	},
	{
		// Events the old renderer showed and the transcript drops: a
		// repeated durable event, a late delta of an earlier step, a
		// delta after its response was complete, progress of a call that
		// finished, and a delta of a later attempt that supersedes the
		// live one without a reset.
		name: "strays",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Prompt: "go", Model: "scripted:demo"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 5})
			b.text(1, 1, "First.")
			b.durable(keel.ModelCallCompleted{Step: 1, Attempt: 1})
			b.text(1, 1, " After the response.")
			b.durable(keel.ToolProposed{ToolCallID: "c", Name: "echo", Arguments: args(`{}`), Step: 1},
				keel.ToolFinished{ToolCallID: "c", Name: "echo", Status: keel.ToolOK, Output: "ok"})
			b.out = append(b.out, b.out[len(b.out)-1]) // delivered twice
			b.delta(keel.ToolProgress{ToolCallID: "c", Message: "late progress"})
			b.durable(keel.StepStarted{Step: 2, EstimatedContextTokens: 9})
			b.text(1, 1, " Late step one.")
			b.text(2, 1, "Second, ")
			b.text(2, 2, "second again.")
			b.durable(keel.RunCompleted{Revision: 1, Text: "second again.", Steps: 2})
		},
	},
}

func init() {
	renderCases = append(renderCases, struct {
		name  string
		opts  renderOptions
		build func(b *events)
	}{
		// A planner's two children stream at once, indented under their
		// paths; one abandons an attempt; a grandchild's text goes deeper
		// (docs/contract.md §21.4).
		name: "delegation",
		build: func(b *events) {
			b.durable(keel.RunStarted{Number: 1, Prompt: "Research A and B", Model: "scripted:planner", Agent: "planner"},
				keel.StepStarted{Step: 1, EstimatedContextTokens: 30},
				keel.ToolProposed{ToolCallID: "c1", Name: "agent__researcher", Arguments: args(`{"task":"A"}`), Step: 1},
				keel.ToolProposed{ToolCallID: "c2", Name: "agent__researcher", Arguments: args(`{"task":"B"}`), Step: 1},
				keel.ToolStarted{ToolCallID: "c1", Name: "agent__researcher"},
				keel.AgentStarted{ToolCallID: "c1", Agent: "researcher", SessionID: "s-test--researcher-1", Path: "researcher-1"},
				keel.ToolStarted{ToolCallID: "c2", Name: "agent__researcher"},
				keel.AgentStarted{ToolCallID: "c2", Agent: "researcher", SessionID: "s-test--researcher-2", Path: "researcher-2"})
			b.relay("researcher-1", 1, 1, "Looking at ", "A")
			b.relay("researcher-2", 1, 1, "B is\nblue")
			b.relay("researcher-1", 1, 2, "A is red")
			b.relay("researcher-1/coder-1", 1, 1, "deeper")
			b.durable(keel.AgentFinished{ToolCallID: "c2", Agent: "researcher", SessionID: "s-test--researcher-2", Path: "researcher-2",
				Status: keel.StatusCompleted, Steps: 1, Usage: usage(5, 3, 1)},
				keel.ToolFinished{ToolCallID: "c2", Name: "agent__researcher", Status: keel.ToolOK, Output: `{"facts":["B is blue"]}`},
				keel.AgentFinished{ToolCallID: "c1", Agent: "researcher", SessionID: "s-test--researcher-1", Path: "researcher-1",
					Status: keel.StatusFailed, Steps: 2, Error: &keel.Error{Code: keel.CodeMaxSteps, Message: "limit"}},
				keel.ToolFinished{ToolCallID: "c1", Name: "agent__researcher", Status: keel.ToolError, Output: "agent researcher failed"},
				keel.StepStarted{Step: 2, EstimatedContextTokens: 60})
			b.text(2, 1, "B is blue.")
			b.durable(keel.RunCompleted{Revision: 1, Text: "B is blue.", Steps: 2, Usage: usage(20, 5, 2)})
		},
	})
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			b := &events{t: t}
			tc.build(b)
			var out bytes.Buffer
			r := newRenderer(&out, tc.opts)
			for _, env := range b.out {
				r.Render(env)
			}
			golden(t, filepath.Join("testdata", "render", tc.name+".golden"), out.String())
		})
	}
}

// TestEventLinesGolden renders the same runs as `keel events` lines.
func TestEventLinesGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			b := &events{t: t}
			tc.build(b)
			var out strings.Builder
			for _, env := range b.out {
				out.WriteString(eventLine(env) + "\n")
			}
			golden(t, filepath.Join("testdata", "events", tc.name+".golden"), out.String())
		})
	}
}

// TestRenderedOutputHasNoControls checks every case's output, in both
// forms, for control characters that did not come from the renderer.
func TestRenderedOutputHasNoControls(t *testing.T) {
	for _, tc := range renderCases {
		b := &events{t: t}
		tc.build(b)
		var out bytes.Buffer
		r := newRenderer(&out, renderOptions{reasoning: true})
		for _, env := range b.out {
			r.Render(env)
			out.WriteString(eventLine(env) + "\n")
		}
		for i, c := range out.String() {
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c <= 0x9f {
				t.Fatalf("%s: control character %U at byte %d of output:\n%q", tc.name, c, i, out.String())
			}
		}
	}
}

func TestRenderColor(t *testing.T) {
	b := &events{t: t}
	b.durable(keel.StepStarted{Step: 1})
	b.text(1, 1, "plain \x1b[31mmodel red\x1b[0m")
	b.durable(keel.RunFailed{Code: keel.CodeProvider, Message: "boom"})
	var out bytes.Buffer
	r := newRenderer(&out, renderOptions{color: true})
	for _, env := range b.out {
		r.Render(env)
	}
	want := styleDim + "· step 1 (~0 context tokens)" + styleReset + "\n" +
		"plain [31mmodel red[0m\n" +
		styleRed + "✗ failed: keel.ProviderError: boom (not retryable)" + styleReset + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("colored output (-want +got):\n%s", diff)
	}
}

// A budget warning stands out in yellow while the run goes on.
func TestRenderBudgetWarningColor(t *testing.T) {
	b := &events{t: t}
	b.durable(keel.BudgetWarning{Step: 1, Scope: keel.BudgetRun, Set: "caller", Currency: "USD", Limit: 4_000_000_000, Spent: 3_300_000_000},
		keel.BudgetWarning{Step: 1, Scope: keel.BudgetSession, Set: "worker", Limit: 1800, Spent: 1555})
	var out bytes.Buffer
	r := newRenderer(&out, renderOptions{color: true})
	for _, env := range b.out {
		r.Render(env)
	}
	want := styleYellow + "! budget warning: run budget (caller) 3.30 of 4.00 USD" + styleReset + "\n" +
		styleYellow + "! budget warning: session budget (worker) 1555 of 1800 tokens" + styleReset + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("colored output (-want +got):\n%s", diff)
	}
}

func TestUseColor(t *testing.T) {
	t.Setenv("NO_COLOR", "x") // restored after the test
	os.Unsetenv("NO_COLOR")
	if !colorAllowed() {
		t.Error("color forbidden without NO_COLOR")
	}
	if useColor(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if useColor(f) {
		t.Error("a regular file is not a terminal")
	}
	t.Setenv("NO_COLOR", "")
	if colorAllowed() {
		t.Error("NO_COLOR set, even empty, must forbid color")
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer null.Close()
		if isTerminal(null) {
			t.Error("the null device is a character device, not a terminal")
		}
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if useColor(tty) {
			t.Error("a terminal with NO_COLOR set gets color")
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":           "plain text",
		"keep\nnewline\ttab":   "keep\nnewline\ttab",
		"\x1b[31mred\x1b[0m":   "[31mred[0m",
		"a\rb\x07c\x00d\x7fe":  "abcde",
		"c1 \u009b31m \u0085x": "c1 31m x",
		"bad \xff utf8":        "bad \uFFFD utf8",
		"emoji 🙂 ü":            "emoji 🙂 ü",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	if got := sanitizeLine("a\nb\tc"); got != "a b c" {
		t.Errorf("sanitizeLine joined lines into %q", got)
	}
}

func TestOutcomeWithoutTerminalEvent(t *testing.T) {
	var out bytes.Buffer
	r := newRenderer(&out, renderOptions{})
	r.Outcome(keel.Outcome{Status: keel.StatusFailed, Error: &keel.Error{Code: keel.CodeMaxSteps, Message: "run reached its step limit"},
		UsageTotal: usage(10, 2, 2)})
	r.Outcome(keel.Outcome{Status: keel.StatusCompleted}) // a second outcome is ignored
	want := "✗ failed: keel.MaxSteps: run reached its step limit (not retryable)\n  usage: 10 tokens in · 2 out · 2 requests\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// After the terminal event the outcome adds nothing.
	out.Reset()
	r = newRenderer(&out, renderOptions{})
	b := &events{t: t}
	b.durable(keel.RunCancelled{Revision: 4})
	r.Render(b.out[0])
	r.Outcome(keel.Outcome{Status: keel.StatusCancelled, Revision: 4})
	if diff := cmp.Diff("⊘ cancelled (session revision 4)\n", out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// keel events names where a fork came from and where a rewind went.
func TestEventSummaryOfForkAndRewind(t *testing.T) {
	for _, tc := range []struct {
		ev   keel.Event
		want string
	}{
		{keel.SessionForked{Source: "s1", Run: 3, Revision: 7, Seq: 40, Messages: 6},
			"from s1 at run 3 · revision 7 · seq 40 · 6 messages"},
		{keel.SessionForked{Source: "s1\x1b[31m", Run: 2, Step: 1, Revision: 4, Seq: 9, Messages: 1},
			"from s1[31m at step 1 of run 2 · revision 4 · seq 9 · 1 message"},
		{keel.SessionRewound{FromRun: 5, FromRevision: 9, ToRun: 2, Revision: 10, Messages: 4},
			"from run 5 (revision 9) to run 2 · revision 10 · 4 messages"},
	} {
		data, err := json.Marshal(tc.ev)
		if err != nil {
			t.Fatal(err)
		}
		env := keel.Envelope{Type: tc.ev.EventType(), SessionID: "s2", Seq: 1, Data: data}
		if got := eventSummary(env); got != tc.want {
			t.Errorf("eventSummary(%s) = %q, want %q", tc.ev.EventType(), got, tc.want)
		}
	}
}

// A hosted tool's use is one line, whatever its backend sent: the query
// and detail on one line, control characters dropped, long parts cut.
func TestHostedText(t *testing.T) {
	long := strings.Repeat("q", 300)
	for _, tc := range []struct {
		ev   keel.HostedToolActivity
		want string
	}{
		{keel.HostedToolActivity{Name: "web_search", Query: "keel", URLs: []string{"a", "b", "c"}}, `⌕ web_search "keel" → 3 results`},
		{keel.HostedToolActivity{Name: "web_search", Query: "one\nline\x1b]0;x\x07", URLs: []string{"a"}}, `⌕ web_search "one line]0;x" → 1 result`},
		{keel.HostedToolActivity{Name: "code_execution", Detail: "exit 0"}, `⌕ code_execution · exit 0`},
		{keel.HostedToolActivity{Name: "file_search", Query: long},
			`⌕ file_search "` + strings.Repeat("q", cardArgsRunes-1) + `…"`},
	} {
		if got := hostedText(tc.ev); got != tc.want {
			t.Errorf("hostedText(%+v) = %q, want %q", tc.ev, got, tc.want)
		}
	}
}
