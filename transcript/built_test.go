package transcript_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

var buildStreams = flag.Bool("build-streams", false, "rewrite the built streams of testdata (those no real run can produce on demand)")

// TestBuildStreams writes the streams of testdata that are built from
// keel's event types rather than recorded: a tool call whose activity
// Temporal retried (a worker lost under it: no event says so, and the
// new attempt reports its progress from the start), and a hostile stream
// of repeats, garbage and strays. The recorded ones come from the
// gateway's TestRecordTranscriptStreams.
func TestBuildStreams(t *testing.T) {
	if !*buildStreams {
		t.Skip("writes testdata only with -build-streams")
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	b := &builder{t: t, session: "transcript-tool_retry", run: "transcript-tool_retry/run-1", at: at}
	b.durable(keel.RunStarted{Number: 1, Prompt: "record tool_retry", Model: "scripted:tool_retry"},
		keel.StepStarted{Step: 1, EstimatedContextTokens: 31})
	b.delta(keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, ID: "t1", Name: "copy_files", Arguments: `{"from":"a",`},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: 0, Arguments: `"to":"b"}`})
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: keel.Usage{InputTokens: 31, OutputTokens: 9, Requests: 1},
		Total: keel.Usage{InputTokens: 31, OutputTokens: 9, Requests: 1}},
		keel.ModelCallCompleted{Step: 1, Attempt: 1, Metrics: keel.ModelCallMetrics{Model: "tool_retry", Provider: "scripted",
			FinishReason: "tool_calls", GenerationOutputTokens: keel.GenerationTokens{Kind: keel.GenerationNone}}},
		keel.ToolProposed{ToolCallID: "t1", Name: "copy_files", Arguments: json.RawMessage(`{"from":"a","to":"b"}`), Step: 1},
		keel.ToolStarted{ToolCallID: "t1", Name: "copy_files"})
	b.delta(keel.ToolProgress{ToolCallID: "t1", Message: "copying 1 of 3"},
		// The worker is lost; Temporal runs the activity again with the
		// same idempotency key (docs/contract.md §4.7).
		keel.ToolProgress{ToolCallID: "t1", Message: "copying 1 of 3"},
		keel.ToolProgress{ToolCallID: "t1", Message: "copying 3 of 3"})
	b.durable(keel.ToolFinished{ToolCallID: "t1", Name: "copy_files", Status: keel.ToolOK, Output: "copied 3 files",
		Duration: keel.Duration(7 * time.Second)},
		keel.StepStarted{Step: 2, EstimatedContextTokens: 52})
	b.delta(keel.TextDelta{Step: 2, Attempt: 1, Text: "Copied."})
	b.durable(keel.UsageUpdated{Step: 2, Attempt: 1, Usage: keel.Usage{InputTokens: 52, OutputTokens: 2, Requests: 1},
		Total: keel.Usage{InputTokens: 83, OutputTokens: 11, Requests: 2}},
		keel.ModelCallCompleted{Step: 2, Attempt: 1, Metrics: keel.ModelCallMetrics{Model: "tool_retry", Provider: "scripted",
			FinishReason: "stop", GenerationOutputTokens: keel.GenerationTokens{Kind: keel.GenerationNone}}},
		keel.RunCompleted{Revision: 1, Text: "Copied.", Steps: 2, Usage: keel.Usage{InputTokens: 83, OutputTokens: 11, Requests: 2}})
	b.write("tool_retry")

	b = &builder{t: t, session: "h", run: "h/run-1", at: at}
	b.durable(keel.RunStarted{Number: 1, Prompt: "hostile", Model: "scripted:h"}, keel.StepStarted{Step: 1})
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: "Good "})
	b.raw(keel.Envelope{Seq: 2, Type: keel.TypeStepStarted, Data: json.RawMessage(`{"step":1}`)}) // a repeat
	b.delta(keel.TextDelta{Step: 1, Attempt: 1},
		keel.TextDelta{Step: 1, Attempt: 0, Text: "attempt zero"},
		keel.TextDelta{Step: 2, Attempt: 1, Text: "a step not started"},
		keel.ToolCallDelta{Step: 1, Attempt: 1, Index: -1, Arguments: "{}"})
	b.raw(keel.Envelope{Type: keel.TypeTextDelta, RunID: "h/run-9", Data: json.RawMessage(`{"step":1,"attempt":1,"text":"stray"}`)})
	b.raw(keel.Envelope{Seq: 3, Type: "future.fact", Data: json.RawMessage(`{"x":[1,2]}`)})
	b.raw(keel.Envelope{Type: "future.delta", Data: json.RawMessage(`{"y":1}`)})
	b.raw(keel.Envelope{Seq: 4, Type: keel.TypeStepStarted, Data: json.RawMessage(`{"step":"one"}`)})
	b.raw(keel.Envelope{Type: keel.TypeTextDelta, Data: json.RawMessage(`{"step":1,"attempt":1,"text":42}`)})
	b.seq = 4
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: "text."})
	b.durable(keel.ProviderStreamReset{Step: 7, Attempt: 1, Reason: keel.ResetReason{Kind: keel.ResetMalformed}})
	b.delta(keel.ToolProgress{ToolCallID: "nobody", Message: "?"})
	b.durable(keel.ToolFinished{ToolCallID: "x", Name: "read", Status: keel.ToolError, Output: "no such file"},
		keel.ToolFinished{ToolCallID: "x", Name: "read", Status: keel.ToolOK, Output: "again"})
	b.raw(keel.Envelope{Seq: 3, Type: keel.TypeHostInputResolved, Data: json.RawMessage(`{"request_id":"r"}`)}) // out of order
	b.durable(keel.HostInputResolved{RequestID: "never/asked", ToolCallID: "never"},
		keel.ModelCallCompleted{Step: 1, Attempt: 1})
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: " late"})
	b.raw(keel.Envelope{Type: keel.TypeStepStarted, Data: json.RawMessage(`{"step":3}`)}) // durable without a seq
	b.durable(keel.RunCompleted{Revision: 1, Text: "Good text.", Steps: 1},
		keel.StepStarted{Step: 2})
	b.delta(keel.TextDelta{Step: 2, Attempt: 1, Text: "after the end"})
	b.write("hostile")
	// A fork's log: session.forked names no run, nor do its rewinds
	// (docs/contract.md §19); a repeat and an undecodable one change
	// nothing, and runs go on around them.
	b = &builder{t: t, session: "fk", at: at}
	b.durable(keel.SessionForked{Source: "src", Run: 2, Step: 1, Revision: 2, Seq: 9, Messages: 3})
	b.run = "fk/run-1"
	b.durable(keel.RunStarted{Number: 1, Revision: 2, Prompt: "on the fork", Model: "scripted:fk"}, keel.StepStarted{Step: 1})
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: "Forked."})
	b.durable(keel.ModelCallCompleted{Step: 1, Attempt: 1}, keel.RunCompleted{Revision: 3, Text: "Forked.", Steps: 1})
	b.run = ""
	b.durable(keel.SessionRewound{FromRun: 1, FromRevision: 3, ToRun: 0, Revision: 4, Messages: 3})
	b.raw(keel.Envelope{Seq: b.seq, Type: keel.TypeSessionRewound, Data: json.RawMessage(`{"from_run":1,"from_revision":3,"to_run":0,"revision":4,"messages":3}`)}) // a repeat
	b.seq++
	b.raw(keel.Envelope{Seq: b.seq, Type: keel.TypeSessionForked, Data: json.RawMessage(`{"source":"src","run":"two"}`)})
	b.run = "fk/run-2"
	b.durable(keel.RunStarted{Number: 2, Revision: 4, Prompt: "after the rewind", Model: "scripted:fk"}, keel.StepStarted{Step: 1},
		keel.StepStarted{Step: 2}, keel.RunCompleted{Revision: 5, Text: "Two steps.", Steps: 2})
	b.run = ""
	b.durable(keel.SessionRewound{FromRun: 2, FromRevision: 5, ToRun: 2, ToStep: 1, Revision: 6, Messages: 5})
	b.write("lineage")

	// Money (docs/contract.md §20): usage carries its cost, per currency in
	// nanos and naming its table, and its unpriced requests; a run ends
	// with its totals; budget.warning is a fact of its run, once per limit;
	// a budget stops the next run with run.failed keel.BudgetExceeded. A
	// cost or a warning of the wrong shape is undecodable.
	const table = "keel default list prices of 2026-03-01 (estimate)"
	b = &builder{t: t, session: "mo", run: "mo/run-1", at: at}
	usd := func(n int64) keel.Costs { return keel.Costs{{Currency: "USD", Nanos: n, Prices: table}} }
	b.durable(keel.RunStarted{Number: 1, Revision: 0, Prompt: "price this", Model: "scripted:mo"}, keel.StepStarted{Step: 1, EstimatedContextTokens: 1200})
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: "Priced."})
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1,
		Usage: keel.Usage{InputTokens: 1200, OutputTokens: 50, CacheReadTokens: 200, Requests: 1, Cost: usd(12_300_000)},
		Total: keel.Usage{InputTokens: 1200, OutputTokens: 50, CacheReadTokens: 200, Requests: 1, Cost: usd(12_300_000)}})
	// A second request, to a model with no price on this worker: counted
	// in tokens, and as unpriced.
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1,
		Usage: keel.Usage{InputTokens: 300, OutputTokens: 5, Requests: 1, Unpriced: 1},
		Total: keel.Usage{InputTokens: 1500, OutputTokens: 55, CacheReadTokens: 200, Requests: 2, Cost: usd(12_300_000), Unpriced: 1}},
		keel.ModelCallCompleted{Step: 1, Attempt: 1},
		keel.BudgetWarning{Step: 1, Scope: keel.BudgetSession, Set: "worker", Limit: 1800, Spent: 1555})
	b.raw(keel.Envelope{Seq: b.seq + 1, Type: keel.TypeUsageUpdated, Data: json.RawMessage(
		`{"step":1,"attempt":1,"usage":{"requests":1},"total":{"requests":3,"cost":{"currency":"USD","nanos":1}}}`)}) // cost not a list
	b.raw(keel.Envelope{Seq: b.seq + 2, Type: keel.TypeUsageUpdated, Data: json.RawMessage(
		`{"step":1,"attempt":1,"usage":{"requests":1},"total":{"requests":3,"cost":[{"currency":"USD","nanos":"12"}]}}`)}) // nanos not an integer
	b.seq += 2
	b.durable(keel.RunCompleted{Revision: 1, Text: "Priced.", Steps: 1,
		Usage: keel.Usage{InputTokens: 1500, OutputTokens: 55, CacheReadTokens: 200, Requests: 2, Cost: usd(12_300_000), Unpriced: 1}})
	b.run = "mo/run-2"
	b.durable(keel.RunStarted{Number: 2, Revision: 1, Prompt: "spend more", Model: "scripted:mo"}, keel.StepStarted{Step: 1, EstimatedContextTokens: 1600})
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1,
		Usage: keel.Usage{InputTokens: 1600, OutputTokens: 40, Requests: 1,
			Cost: keel.Costs{{Currency: "EUR", Nanos: 5, Prices: "keel.yaml"}, {Currency: "USD", Nanos: 3_300_000_000, Prices: table}}},
		Total: keel.Usage{InputTokens: 1600, OutputTokens: 40, Requests: 1,
			Cost: keel.Costs{{Currency: "EUR", Nanos: 5, Prices: "keel.yaml"}, {Currency: "USD", Nanos: 3_300_000_000, Prices: table}}}},
		keel.ModelCallCompleted{Step: 1, Attempt: 1},
		keel.BudgetWarning{Step: 1, Scope: keel.BudgetRun, Set: "caller", Currency: "USD", Limit: 4_000_000_000, Spent: 3_300_000_000},
		keel.BudgetWarning{Step: 1, Scope: keel.BudgetSession, Set: "worker", Limit: 1800, Spent: 1640})
	b.durable(keel.BudgetWarning{Step: 1, Scope: keel.BudgetRun, Set: "caller", Currency: "USD", Limit: 4_000_000_000, Spent: 3_400_000_000}) // the same limit again
	b.raw(keel.Envelope{Seq: b.seq + 1, Type: keel.TypeBudgetWarning, Data: json.RawMessage(
		`{"step":1,"scope":"run","set":"caller","currency":"EUR","limit":"4.00","spent":1}`)}) // limit not an integer
	b.seq++
	b.durable(keel.StepStarted{Step: 2, EstimatedContextTokens: 1700},
		keel.RunFailed{Code: keel.CodeBudgetExceeded, Revision: 2,
			Message: "the next request could spend 0.91 USD and the run budget (set by the caller) has 0.70 USD left of 4.00 USD"})
	b.write("money")

	// A planner's run with two children (docs/contract.md §21.3–21.4):
	// their relayed deltas go to their cards, a later attempt's replace
	// the earlier one's, a grandchild's make a nested card, and a delta
	// of no child, or of a child that ended, changes nothing. A third
	// call's child never started (its ID was taken): its card links to
	// no session.
	b = &builder{t: t, session: "p", run: "p/run-1", at: at}
	b.durable(keel.RunStarted{Number: 1, Prompt: "Research A and B", Model: "scripted:planner", Agent: "planner"},
		keel.StepStarted{Step: 1, EstimatedContextTokens: 30},
		keel.ToolProposed{ToolCallID: "c1", Name: "agent__researcher", Arguments: json.RawMessage(`{"task":"A"}`), Step: 1},
		keel.ToolProposed{ToolCallID: "c2", Name: "agent__researcher", Arguments: json.RawMessage(`{"task":"B"}`), Step: 1},
		keel.ToolProposed{ToolCallID: "c3", Name: "agent__researcher", Arguments: json.RawMessage(`{"task":"C"}`), Step: 1},
		keel.ToolStarted{ToolCallID: "c1", Name: "agent__researcher"},
		keel.AgentStarted{ToolCallID: "c1", Agent: "researcher", SessionID: "p--researcher-1", Path: "researcher-1"},
		keel.ToolStarted{ToolCallID: "c2", Name: "agent__researcher"},
		keel.AgentStarted{ToolCallID: "c2", Agent: "researcher", SessionID: "p--researcher-2", Path: "researcher-2"})
	b.relay("researcher-1", keel.TextDelta{Step: 1, Attempt: 1, Text: "Looking at "}, keel.TextDelta{Step: 1, Attempt: 1, Text: "A"})
	b.relay("researcher-2", keel.TextDelta{Step: 1, Attempt: 1, Text: "B is blue"})
	b.relay("researcher-1", keel.TextDelta{Step: 1, Attempt: 2, Text: "A is réd"},
		keel.TextDelta{Step: 1, Attempt: 1, Text: "stale"},
		keel.TextDelta{Step: 2, Attempt: 1, Text: "Done."},
		keel.TextDelta{Step: 2, Attempt: 1},
		keel.ReasoningDelta{Step: 2, Attempt: 1, Text: "hm"})
	b.relay("researcher-1/coder-1", keel.TextDelta{Step: 1, Attempt: 1, Text: "deeper"})
	b.relay("ghost-9", keel.TextDelta{Step: 1, Attempt: 1, Text: "who?"})
	b.durable(keel.AgentFinished{ToolCallID: "c2", Agent: "researcher", SessionID: "p--researcher-2", Path: "researcher-2",
		Status: keel.StatusCompleted, Steps: 1, Usage: keel.Usage{InputTokens: 5, OutputTokens: 3, Requests: 1}},
		keel.ToolFinished{ToolCallID: "c2", Name: "agent__researcher", Status: keel.ToolOK, Output: `{"facts":["B is blue"]}`})
	b.relay("researcher-2", keel.TextDelta{Step: 1, Attempt: 1, Text: "late"})
	b.durable(keel.ToolStarted{ToolCallID: "c3", Name: "agent__researcher"},
		keel.AgentStarted{ToolCallID: "c3", Agent: "researcher", SessionID: "p--researcher-3", Path: "researcher-3"},
		keel.AgentFinished{ToolCallID: "c3", Agent: "researcher", Path: "researcher-3", Status: keel.StatusFailed,
			Error: &keel.Error{Code: keel.CodeInternal, Message: "its session ID was taken by a workflow this run did not start"}},
		keel.ToolFinished{ToolCallID: "c3", Name: "agent__researcher", Status: keel.ToolError, Output: "agent researcher failed"})
	b.durable(keel.AgentFinished{ToolCallID: "c2", Agent: "researcher", SessionID: "p--researcher-2", Path: "researcher-2",
		Status: keel.StatusCompleted},
		keel.AgentFinished{ToolCallID: "c1", Agent: "researcher", SessionID: "p--researcher-1", Path: "researcher-1",
			Status: keel.StatusFailed, Steps: 2, Error: &keel.Error{Code: keel.CodeMaxSteps, Message: "limit"}},
		keel.ToolFinished{ToolCallID: "c1", Name: "agent__researcher", Status: keel.ToolError, Output: "agent researcher failed"},
		keel.StepStarted{Step: 2, EstimatedContextTokens: 60})
	b.delta(keel.TextDelta{Step: 2, Attempt: 1, Text: "B is blue."})
	b.durable(keel.RunCompleted{Revision: 1, Text: "B is blue.", Steps: 2, Usage: keel.Usage{InputTokens: 20, OutputTokens: 5, Requests: 2}})
	b.write("delegation")
	// Rate limits (docs/contract.md §20.5): model.waiting shows on its
	// step until the live attempt's first delta, its response, a reset or
	// the run's end; it follows the rules of deltas. A wait of zero adds
	// nothing, a negative one is invalid, one that is not a duration (or
	// a limit that is not a string) is undecodable; a wait in
	// milliseconds, as Go reads durations, decodes.
	const claude = "anthropic:claude-sonnet-4-5"
	wait := func(step, attempt int, d time.Duration) keel.ModelWaiting {
		return keel.ModelWaiting{Step: step, Attempt: attempt, Limit: claude, Wait: keel.Duration(d)}
	}
	waitRaw := func(data string) {
		b.raw(keel.Envelope{Type: keel.TypeModelWaiting, AfterSeq: b.seq, Data: json.RawMessage(data)})
	}
	b = &builder{t: t, session: "rl", run: "rl/run-1", at: at}
	b.durable(keel.RunStarted{Number: 1, Prompt: "wait your turn", Model: claude}, keel.StepStarted{Step: 1, EstimatedContextTokens: 900})
	b.delta(wait(1, 1, 4200*time.Millisecond), wait(1, 1, 3*time.Second), keel.TextDelta{Step: 1, Attempt: 1, Text: "Hello."})
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: keel.Usage{InputTokens: 900, OutputTokens: 2, Requests: 1},
		Total: keel.Usage{InputTokens: 900, OutputTokens: 2, Requests: 1}},
		keel.ModelCallCompleted{Step: 1, Attempt: 1}, keel.StepStarted{Step: 2, EstimatedContextTokens: 950})
	b.delta(wait(1, 1, time.Second), wait(2, 1, 2*time.Second))
	retry := keel.Duration(time.Second)
	b.durable(keel.UsageUpdated{Step: 2, Attempt: 1, Usage: keel.Usage{Requests: 1}, Total: keel.Usage{InputTokens: 900, OutputTokens: 2, Requests: 2}},
		keel.ProviderStreamReset{Step: 2, Attempt: 1, Reason: keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: keel.ProviderRateLimited, RetryAfter: &retry}},
		keel.ProviderRequestRetry{Step: 2, Attempt: 1, Kind: keel.ProviderRateLimited, Status: 429, RetryAfter: &retry, Delay: retry})
	b.delta(wait(2, 1, time.Second), wait(2, 2, 750*time.Millisecond), wait(2, 2, 0), wait(2, 2, -time.Second))
	waitRaw(`{"step":2,"attempt":2,"limit":"anthropic","wait":"soon"}`)
	waitRaw(`{"step":2,"attempt":2,"limit":5,"wait":"1s"}`)
	waitRaw(`{"step":2,"attempt":2,"limit":"anthropic","wait":null}`) // keel.Duration refuses null
	waitRaw(`{"step":2,"attempt":2,"limit":"anthropic","wait":"1.0000005ms"}`)
	waitRaw(`{"step":2,"attempt":2,"limit":"anthropic","wait":1500.75}`)
	b.delta(keel.ToolCallDelta{Step: 2, Attempt: 2, Index: 0, ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`},
		wait(2, 2, time.Second))
	b.durable(keel.UsageUpdated{Step: 2, Attempt: 2, Usage: keel.Usage{InputTokens: 950, OutputTokens: 9, Requests: 1},
		Total: keel.Usage{InputTokens: 1850, OutputTokens: 11, Requests: 3}},
		keel.ModelCallCompleted{Step: 2, Attempt: 2}, keel.StepStarted{Step: 3, EstimatedContextTokens: 990})
	b.delta(wait(3, 1, time.Hour+2*time.Minute+3500*time.Millisecond))
	b.durable(keel.RunCancelled{Revision: 1})
	b.delta(wait(3, 1, time.Second))
	b.run = "rl/run-2"
	b.durable(keel.RunStarted{Number: 2, Revision: 1, Prompt: "still waiting", Model: claude}, keel.StepStarted{Step: 1, EstimatedContextTokens: 1000})
	b.delta(wait(1, 1, 90*time.Second))
	waitRaw(`{"step":1,"attempt":1,"limit":"anthropic","wait":"1m2.0009µs"}`)
	b.write("rate_limit")

	// Hosted tools (docs/contract.md §1.3): the uses of tools the model's
	// backend ran itself go on their step as output of their attempt,
	// after its response and before its tool calls. A repeat of an ID is
	// a duplicate; uses without an ID are all kept; a use of an invalid
	// step, of a step never started, or with URLs that are not strings
	// shows nothing; a reset drops its attempt's uses, and a use of the
	// abandoned attempt that comes after it is not shown; URLs past
	// MaxURLs are left out. Usage counts the web searches, which are
	// billed per search.
	b = &builder{t: t, session: "hs", run: "hs/run-1", at: at}
	searched := func(in, out, searches int64, nanos int64) keel.Usage {
		return keel.Usage{InputTokens: in, OutputTokens: out, WebSearches: searches, Requests: 1,
			Cost: keel.Costs{{Currency: "USD", Nanos: nanos, Prices: table}}}
	}
	hostedRaw := func(data string) {
		b.seq++
		b.raw(keel.Envelope{Seq: b.seq, Type: keel.TypeHostedToolActivity, Data: json.RawMessage(data)})
	}
	b.durable(keel.RunStarted{Number: 1, Prompt: "what is new in keel?", Model: "anthropic:claude-sonnet-4-5"},
		keel.StepStarted{Step: 1, EstimatedContextTokens: 400})
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: "Let me look."})
	step1 := searched(400, 40, 2, 21_800_000)
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: step1, Total: step1},
		keel.ModelCallCompleted{Step: 1, Attempt: 1},
		keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "srvtoolu_1", Query: "keel durable agents",
			URLs: []string{"https://example.com/keel", "https://example.org/temporal", "https://example.net/agents"}},
		keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "srvtoolu_2", Query: "keel release notes"},
		keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "code_execution", ID: "srvtoolu_3", Detail: "ran 12 lines of Python"},
		keel.HostedToolActivity{Step: 1, Attempt: 1, Name: "web_search", ID: "srvtoolu_1", Query: "keel durable agents"}, // a repeat of its ID
		keel.HostedToolActivity{Step: 0, Attempt: 1, Name: "web_search"},
		keel.HostedToolActivity{Step: 9, Attempt: 1, Name: "web_search", ID: "srvtoolu_9"})
	hostedRaw(`{"step":1,"attempt":1,"name":"web_search","urls":"https://example.com/"}`)
	hostedRaw(`{"step":1,"attempt":1,"name":"file_search","detail":"searched 2 files","urls":[null,"file://notes.md"]}`)
	b.durable(keel.ToolProposed{ToolCallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"NEWS"}`), Step: 1},
		keel.ToolFinished{ToolCallID: "c1", Name: "read_file", Status: keel.ToolOK, Output: "nothing new"},
		keel.StepStarted{Step: 2, EstimatedContextTokens: 900})
	b.delta(keel.TextDelta{Step: 2, Attempt: 1, Text: "Half"})
	b.durable(keel.HostedToolActivity{Step: 2, Attempt: 1, Name: "web_search", ID: "ws_a", Query: "lost with its attempt"},
		keel.UsageUpdated{Step: 2, Attempt: 1, Usage: searched(0, 0, 1, 10_000_000), Total: step1.Add(searched(0, 0, 1, 10_000_000))},
		keel.ProviderStreamReset{Step: 2, Attempt: 1, Reason: keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: keel.ProviderServer}},
		keel.HostedToolActivity{Step: 2, Attempt: 1, Name: "web_search", ID: "ws_b", Query: "late, of the abandoned attempt"})
	b.delta(keel.TextDelta{Step: 2, Attempt: 2, Text: "Found it."})
	many := make([]string, transcript.MaxURLs+5)
	for i := range many {
		many[i] = fmt.Sprintf("https://example.com/r/%d", i)
	}
	step2 := searched(900, 30, 3, 33_150_000)
	total := step1.Add(searched(0, 0, 1, 10_000_000)).Add(step2)
	b.durable(keel.UsageUpdated{Step: 2, Attempt: 2, Usage: step2, Total: total},
		keel.ModelCallCompleted{Step: 2, Attempt: 2},
		keel.HostedToolActivity{Step: 2, Attempt: 2, Name: "web_search", ID: "ws_c", Query: "keel \x1b[31mrelease\x1b[0m", URLs: many},
		keel.HostedToolActivity{Step: 2, Attempt: 2, Name: "web_search", Query: "no ID"},
		keel.HostedToolActivity{Step: 2, Attempt: 2, Name: "web_search", Query: "no ID either"},
		keel.RunCompleted{Revision: 1, Text: "Found it.", Steps: 2, Usage: step1.Add(step2), UsageTotal: &total},
		keel.HostedToolActivity{Step: 2, Attempt: 2, Name: "web_search", ID: "ws_d", Query: "after the end"})
	b.write("hosted")

	// Hooks (docs/contract.md §23): boundary input enters at run_start,
	// before_step and before_commit as internal context; a hook denies one
	// tool call and replaces another's arguments; a hook that fails with
	// on_error continue is recorded and the run goes on; a stop at
	// before_commit ends the run with run.failed keel.HookStopped. A
	// repeat, a decision of the wrong shape, a boundary input without a
	// sequence and a failure after the end change nothing.
	b = &builder{t: t, session: "hk", run: "hk/run-1", at: at}
	b.durable(keel.RunStarted{Number: 1, Prompt: "tidy the inbox", Model: "scripted:hooks"},
		keel.BoundaryInputApplied{InputID: "in-1", Source: "mail", Point: keel.HookRunStart, Text: "2 new messages: invoice, lunch"},
		keel.StepStarted{Step: 1, EstimatedContextTokens: 60})
	b.delta(keel.TextDelta{Step: 1, Attempt: 1, Text: "Cleaning up."})
	b.durable(keel.UsageUpdated{Step: 1, Attempt: 1, Usage: keel.Usage{InputTokens: 60, OutputTokens: 12, Requests: 1},
		Total: keel.Usage{InputTokens: 60, OutputTokens: 12, Requests: 1}},
		keel.ModelCallCompleted{Step: 1, Attempt: 1},
		keel.ToolProposed{ToolCallID: "c1", Name: "delete_file", Arguments: json.RawMessage(`{"path":"inbox/invoice"}`), Step: 1},
		keel.HookDecided{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookDeny, Reason: "invoices are kept", ToolCallID: "c1"},
		keel.ToolFinished{ToolCallID: "c1", Name: "delete_file", Status: keel.ToolError, Output: "invoices are kept"},
		keel.ToolProposed{ToolCallID: "c2", Name: "write_file", Arguments: json.RawMessage(`{"path":"/etc/notes"}`), Step: 1},
		keel.HookDecided{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookReplace, Reason: "kept in the workspace",
			ToolCallID: "c2", Arguments: json.RawMessage(`{"path":"notes"}`)},
		keel.ToolStarted{ToolCallID: "c2", Name: "write_file"},
		keel.ToolFinished{ToolCallID: "c2", Name: "write_file", Status: keel.ToolOK, Output: "wrote notes"},
		keel.HookFailed{Hook: "audit", Point: keel.HookAfterTool, ToolCallID: "c2", Code: keel.CodeHookFailed,
			Message: "audit log unreachable", Retryable: true, Continued: true})
	b.raw(keel.Envelope{Seq: b.seq, Type: keel.TypeHookFailed, Data: json.RawMessage(`{"hook":"audit","point":"after_tool"}`)}) // a repeat
	b.durable(keel.BoundaryInputApplied{InputID: "in-2", Source: "mail", Point: keel.HookBeforeStep, Step: 2, Text: "1 new message: \x1b[31mURGENT\x1b[0m\nreply today"},
		keel.StepStarted{Step: 2, EstimatedContextTokens: 140})
	b.delta(keel.TextDelta{Step: 2, Attempt: 1, Text: "Done."})
	b.durable(keel.UsageUpdated{Step: 2, Attempt: 1, Usage: keel.Usage{InputTokens: 140, OutputTokens: 2, Requests: 1},
		Total: keel.Usage{InputTokens: 200, OutputTokens: 14, Requests: 2}},
		keel.ModelCallCompleted{Step: 2, Attempt: 1},
		keel.BoundaryInputApplied{InputID: "in-3", Source: "mail", Point: keel.HookBeforeCommit, Step: 2, Text: "one more: the lunch moved"})
	b.seq++
	b.raw(keel.Envelope{Seq: b.seq, Type: keel.TypeHookDecided, Data: json.RawMessage(`{"hook":"guard","action":7}`)}) // undecodable
	b.raw(keel.Envelope{Type: keel.TypeBoundaryInputApplied, Data: json.RawMessage(`{"input_id":"in-x","source":"mail","text":"no seq"}`)})
	b.durable(keel.StepStarted{Step: 3, EstimatedContextTokens: 160},
		keel.UsageUpdated{Step: 3, Attempt: 1, Usage: keel.Usage{InputTokens: 160, OutputTokens: 3, Requests: 1},
			Total: keel.Usage{InputTokens: 360, OutputTokens: 17, Requests: 3}},
		keel.ModelCallCompleted{Step: 3, Attempt: 1},
		keel.HookDecided{Hook: "quota", Point: keel.HookBeforeCommit, Action: keel.HookStop, Reason: "the day's quota is spent"},
		keel.RunFailed{Code: keel.CodeHookStopped, Message: "the day's quota is spent", Revision: 1},
		keel.HookFailed{Hook: "audit", Point: keel.HookRunEnd, Code: keel.CodeHookFailed, Message: "after the end", Continued: true})
	b.write("hooks")
}

type builder struct {
	t            *testing.T
	session, run string
	at           time.Time
	seq          int64
	out          bytes.Buffer
}

func (b *builder) seal(ev keel.Event) keel.Envelope {
	env, err := keel.Seal(ev, b.session, b.run, b.at)
	if err != nil {
		b.t.Fatal(err)
	}
	b.at = b.at.Add(10 * time.Millisecond)
	return env
}

func (b *builder) durable(evs ...keel.Event) {
	for _, ev := range evs {
		env := b.seal(ev)
		b.seq++
		env.Seq = b.seq
		b.raw(env)
	}
}

func (b *builder) delta(evs ...keel.Event) {
	for _, ev := range evs {
		env := b.seal(ev)
		env.AfterSeq = b.seq
		b.raw(env)
	}
}

// relay writes a child's deltas relayed to the run, named by path.
func (b *builder) relay(path string, evs ...keel.Event) {
	for _, ev := range evs {
		env := b.seal(ev)
		env.AfterSeq, env.Path = b.seq, path
		b.raw(env)
	}
}

// raw writes env as it is, filling in the session, the run and the time
// when it has none.
func (b *builder) raw(env keel.Envelope) {
	if env.SessionID == "" {
		env.SessionID = b.session
	}
	if env.RunID == "" {
		env.RunID = b.run
	}
	if env.At.IsZero() {
		env.At = b.at
	}
	line, err := json.Marshal(env)
	if err != nil {
		b.t.Fatal(err)
	}
	b.out.Write(append(line, '\n'))
}

func (b *builder) write(name string) {
	if err := os.WriteFile(filepath.Join("testdata", name+".jsonl"), b.out.Bytes(), 0o644); err != nil {
		b.t.Fatal(err)
	}
}
