package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/worker"
	"github.com/keelrun/keel/server/workflows"
)

// newHookEnv is newRunEnv whose worker offers hooks.
func newHookEnv(t *testing.T, script string, hooks map[string]hook.Hook, logger ...log.Logger) *runEnv {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	if len(logger) > 0 {
		suite.SetLogger(logger[0])
	}
	env := suite.NewTestWorkflowEnvironment()
	e := &runEnv{TestWorkflowEnvironment: env, acts: &activities.Activities{Models: scriptModels{scriptedProvider(t, script)},
		Tools: testTools(t), Segments: &memSegments{}, Hooks: hooks}}
	specs := map[string]hook.Spec{}
	for name, h := range hooks {
		specs[name] = h.Spec()
	}
	worker.RegisterWithRules(env, e.acts, workflows.Rules{Hooks: specs})
	return e
}

// recorder is a hook that records its calls and answers with decide.
type recorder struct {
	mu     sync.Mutex
	calls  []hook.Call
	decide func(c hook.Call) (hook.Decision, error)
}

func (r *recorder) hook(spec hook.Spec) hook.Hook {
	return hook.Func(spec, func(ctx context.Context, c hook.Call) (hook.Decision, error) {
		r.mu.Lock()
		r.calls = append(r.calls, c)
		r.mu.Unlock()
		if r.decide == nil {
			return hook.Decision{}, nil
		}
		return r.decide(c)
	})
}

// seen lists the calls as "point:step" or "point:tool-call".
func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		at := fmt.Sprint(c.Step)
		if c.Tool != nil {
			at = c.Tool.ID
		}
		out = append(out, string(c.Point)+":"+at)
	}
	return out
}

func hookRun(prompt string, hooks []string, tools ...string) sessionSend {
	in := promptOf(prompt, tools...)
	in.Config.Hooks = hooks
	return in
}

var allPoints = hook.Spec{Points: keel.HookPoints}

// docs/contract.md §23.1: a hook at every point is called at each
// boundary in the run's order, with what is there to see, once per call
// key; a hook that lets the run go on leaves no event.
func TestHooksRunAtEveryBoundaryInOrder(t *testing.T) {
	rec := &recorder{}
	env := newHookEnv(t, twoStepScript, map[string]hook.Hook{"audit": rec.hook(allPoints)})
	res := env.execSession(t, hookRun("hello", []string{"audit"}, "echo"))

	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	require.Equal(t, []string{"run_start:0", "before_step:1", "before_tool:c1", "after_tool:c1",
		"before_step:2", "before_commit:2", "run_end:2"}, rec.seen())
	keys := map[string]bool{}
	for _, c := range rec.calls {
		require.Equal(t, "audit", c.Hook)
		require.Equal(t, "s1", c.SessionID)
		require.Equal(t, "s1/run-1", c.RunID)
		require.False(t, keys[c.Key], "key %s used twice", c.Key)
		keys[c.Key] = true
	}
	require.Equal(t, "hello", rec.calls[0].Prompt)
	require.Equal(t, &hook.ToolResult{Status: keel.ToolOK, Output: "echo: hi"}, rec.calls[3].Result)
	require.Equal(t, "Done.", rec.calls[5].Text)
	require.Equal(t, &hook.Outcome{Status: keel.StatusCompleted, Text: "Done."}, rec.calls[6].Outcome)
	for _, ev := range res.Events {
		require.False(t, strings.HasPrefix(ev.Type, "hook.") || ev.Type == keel.TypeBoundaryInputApplied, ev.Type)
	}
}

// docs/contract.md §23.2: boundary input enters at the boundary as
// internal context (boundary_input.applied, a user message marked with
// its ID), never as steering; before the commit it makes the run take
// another step.
func TestBoundaryInputEntersAsContext(t *testing.T) {
	rec := &recorder{decide: func(c hook.Call) (hook.Decision, error) {
		switch {
		case c.Point == keel.HookBeforeStep && c.Step == 1:
			return hook.Decision{Input: []string{"new mail: the meeting moved"}}, nil
		case c.Point == keel.HookBeforeCommit && c.Step == 1:
			return hook.Decision{Input: []string{"a file changed"}}, nil
		}
		return hook.Decision{}, nil
	}}
	env := newHookEnv(t, `{"turns":[{"text":["first"]},{"text":["second"]}]}`,
		map[string]hook.Hook{"inbox": rec.hook(hook.Spec{Points: []keel.HookPoint{keel.HookBeforeStep, keel.HookBeforeCommit}})})
	res := env.execSession(t, hookRun("hello", []string{"inbox"}))

	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	require.Equal(t, "second", res.Outcome.Text)
	applied := find[keel.BoundaryInputApplied](t, res.Events)
	require.Equal(t, []keel.BoundaryInputApplied{
		{InputID: "s1/run-1-input-1", Source: "inbox", Point: keel.HookBeforeStep, Step: 1, Text: "new mail: the meeting moved"},
		{InputID: "s1/run-1-input-2", Source: "inbox", Point: keel.HookBeforeCommit, Step: 1, Text: "a file changed"},
	}, applied)
	_, first := at(res.Events, keel.TypeBoundaryInputApplied, 0)
	_, step := at(res.Events, keel.TypeStepStarted, 0)
	require.Less(t, first, step, "the input is applied before the step that reads it")
	require.Empty(t, find[keel.SteeringApplied](t, res.Events))
	var inputs []keel.Message
	for _, m := range res.Messages {
		if m.InputID != "" {
			inputs = append(inputs, m)
		}
	}
	require.Equal(t, []keel.Message{
		{Role: keel.RoleUser, Content: "new mail: the meeting moved", InputID: "s1/run-1-input-1"},
		{Role: keel.RoleUser, Content: "a file changed", InputID: "s1/run-1-input-2"},
	}, inputs)
}

// docs/contract.md §23.3: a before_tool hook denies a call (the model
// sees the reason) or runs it with other arguments; hook.decided records
// each.
func TestToolHookDeniesAndReplaces(t *testing.T) {
	rec := &recorder{decide: func(c hook.Call) (hook.Decision, error) {
		switch c.Tool.Name {
		case "fail":
			return hook.Decision{Action: keel.HookDeny, Reason: "not on Sundays"}, nil
		case "echo":
			return hook.Decision{Action: keel.HookReplace, Arguments: []byte(`{"text":"safe"}`)}, nil
		}
		return hook.Decision{}, nil
	}}
	env := newHookEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"e","name":"echo","arguments":{"text":"rm -rf"}},{"id":"f","name":"fail","arguments":{"text":"x"}}]},
	  {"text":["ok"]}]}`,
		map[string]hook.Hook{"guard": rec.hook(hook.Spec{Points: []keel.HookPoint{keel.HookBeforeTool}})})
	res := env.execSession(t, hookRun("go", []string{"guard"}, "echo", "fail"))

	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	finished := find[keel.ToolFinished](t, res.Events)
	require.Len(t, finished, 2)
	byID := map[string]keel.ToolFinished{}
	for _, f := range finished {
		byID[f.ToolCallID] = f
	}
	require.Equal(t, "echo: safe", byID["e"].Output)
	require.Equal(t, keel.ToolError, byID["f"].Status)
	require.Equal(t, "the call was denied by hook guard: not on Sundays", byID["f"].Output)
	require.NotContains(t, toolEvents(t, res.Events), "started:f", "a denied call never starts")
	decided := find[keel.HookDecided](t, res.Events)
	require.ElementsMatch(t, []keel.HookDecided{
		{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookReplace, ToolCallID: "e", Arguments: []byte(`{"text":"safe"}`)},
		{Hook: "guard", Point: keel.HookBeforeTool, Action: keel.HookDeny, Reason: "not on Sundays", ToolCallID: "f"},
	}, decided)
}

// docs/contract.md §23.4: arguments a hook puts in place are checked
// against the tool's schema on the worker; ones that do not match are the
// hook's failure, which under its default policy fails the run.
func TestReplacedArgumentsOutsideTheSchemaFailTheRun(t *testing.T) {
	rec := &recorder{decide: func(c hook.Call) (hook.Decision, error) {
		return hook.Decision{Action: keel.HookReplace, Arguments: []byte(`{"text":5}`)}, nil
	}}
	env := newHookEnv(t, `{"turns":[{"tool_calls":[{"id":"e","name":"echo","arguments":{"text":"x"}}]},{"text":["never"]}]}`,
		map[string]hook.Hook{"guard": rec.hook(hook.Spec{Points: []keel.HookPoint{keel.HookBeforeTool}})})
	res := env.execSession(t, hookRun("go", []string{"guard"}, "echo"))

	require.Equal(t, keel.StatusFailed, res.Outcome.Status)
	err := failure(t, res.Outcome)
	require.Equal(t, keel.CodeHookFailed, err.Code)
	require.False(t, err.Retryable)
	require.Contains(t, err.Message, "hook guard failed at before_tool")
	require.Len(t, rec.calls, 1, "a decision that fails its checks is not asked again")
	failed := find[keel.HookFailed](t, res.Events)
	require.Len(t, failed, 1)
	require.Equal(t, keel.CodeInvalidInput, failed[0].Code)
	require.Equal(t, "e", failed[0].ToolCallID)
	require.False(t, failed[0].Continued)
	require.Empty(t, find[keel.ToolStarted](t, res.Events))
}

// docs/contract.md §23.3: a hook stops the run: run.failed with
// keel.HookStopped and its reason; run_end still sees how it ended.
func TestHookStopsTheRun(t *testing.T) {
	rec := &recorder{decide: func(c hook.Call) (hook.Decision, error) {
		if c.Point == keel.HookBeforeStep && c.Step == 2 {
			return hook.Decision{Action: keel.HookStop, Reason: "over the quota"}, nil
		}
		return hook.Decision{}, nil
	}}
	env := newHookEnv(t, twoStepScript, map[string]hook.Hook{"quota": rec.hook(allPoints)})
	res := env.execSession(t, hookRun("hello", []string{"quota"}, "echo"))

	require.Equal(t, keel.StatusFailed, res.Outcome.Status)
	want := &keel.Error{Code: keel.CodeHookStopped, Message: "stopped by hook quota at before_step: over the quota"}
	require.Equal(t, want, failure(t, res.Outcome))
	require.Equal(t, 1, res.Outcome.Steps, "the second step never started")
	require.Equal(t, "run_end:1", rec.seen()[len(rec.seen())-1])
	require.Equal(t, &hook.Outcome{Status: keel.StatusFailed, Error: want}, rec.calls[len(rec.calls)-1].Outcome)
	require.Equal(t, []keel.HookDecided{{Hook: "quota", Point: keel.HookBeforeStep, Action: keel.HookStop, Reason: "over the quota"}},
		find[keel.HookDecided](t, res.Events))
}

// docs/contract.md §23.4: a hook that keeps failing is called within the
// retry budget (four attempts); then its policy decides: "continue"
// records hook.failed and the run goes on, "fail" fails the run with its
// sanitized message and retryability.
func TestHookFailurePolicy(t *testing.T) {
	for _, policy := range []string{hook.OnErrorContinue, hook.OnErrorFail} {
		t.Run(policy, func(t *testing.T) {
			rec := &recorder{decide: func(c hook.Call) (hook.Decision, error) {
				return hook.Decision{}, &keel.Error{Code: keel.CodeHookFailed, Message: "status 503", Retryable: true}
			}}
			env := newHookEnv(t, `{"turns":[{"text":["done"]}]}`, map[string]hook.Hook{
				"flaky": rec.hook(hook.Spec{Points: []keel.HookPoint{keel.HookBeforeStep}, OnError: policy})})
			res := env.execSession(t, hookRun("hello", []string{"flaky"}))

			require.Len(t, rec.calls, 4)
			keys := map[string]bool{}
			for _, c := range rec.calls {
				keys[c.Key] = true
			}
			require.Len(t, keys, 1, "every attempt carries the same key")
			failed := find[keel.HookFailed](t, res.Events)
			require.Equal(t, []keel.HookFailed{{Hook: "flaky", Point: keel.HookBeforeStep, Code: keel.CodeHookFailed,
				Message: "status 503", Retryable: true, Continued: policy == hook.OnErrorContinue}}, failed)
			if policy == hook.OnErrorContinue {
				require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
				return
			}
			require.Equal(t, &keel.Error{Code: keel.CodeHookFailed, Retryable: true,
				Message: "hook flaky failed at before_step: status 503"}, failure(t, res.Outcome))
			require.Equal(t, 0, res.Outcome.Steps)
		})
	}
}

// docs/contract.md §23.5: cancellation reaches a hook in flight, and the
// input it brings after that never enters the transcript.
func TestCancelReachesHookInFlight(t *testing.T) {
	ended := make(chan error, 1)
	h := hook.Func(hook.Spec{Points: []keel.HookPoint{keel.HookBeforeStep}, Timeout: keel.Duration(time.Minute)},
		func(ctx context.Context, c hook.Call) (hook.Decision, error) {
			<-ctx.Done()
			ended <- ctx.Err()
			return hook.Decision{Input: []string{"too late"}}, nil
		})
	env := newHookEnv(t, `{"turns":[{"text":["never"]}]}`, map[string]hook.Hook{"slow": h})
	env.acts.HeartbeatEvery = 20 * time.Millisecond // cancellation reaches an activity with its heartbeat
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalCancel, api.CancelRequest{RunID: "s1/run-1"})
	}, 100*time.Millisecond)
	res := env.execSession(t, hookRun("hello", []string{"slow"}))

	require.Equal(t, keel.StatusCancelled, res.Outcome.Status)
	select {
	case err := <-ended:
		require.True(t, errors.Is(err, context.Canceled), "the hook's context ended by cancellation, not %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the hook in flight never saw the cancellation")
	}
	require.Empty(t, find[keel.BoundaryInputApplied](t, res.Events))
	for _, m := range res.Messages {
		require.NotEqual(t, "too late", m.Content)
	}
}

// docs/contract.md §23.1: a send naming a hook the worker does not offer
// is refused, as a model it does not offer is.
func TestSendNamingAHookNotOfferedIsRefused(t *testing.T) {
	env := newHookEnv(t, `{"turns":[{"text":["hi"]}]}`, map[string]hook.Hook{"audit": (&recorder{}).hook(allPoints)})
	var refused error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateSend, "send", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { refused = err },
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, api.SendRequest{Prompt: "hi", Config: &api.RunConfig{Hooks: []string{"audit", "nope"}}})
	}, 0)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	require.Error(t, refused)
	require.Contains(t, refused.Error(), "hook nope is not offered by this worker")
	require.Contains(t, refused.Error(), string(keel.CodeInvalidInput))
}

// docs/contract.md §23.3: a stop at after_tool ends the run's work as a
// cancel does (the batch's other call is interrupted), and the run fails
// with keel.HookStopped; the call that finished keeps its result.
func TestAfterToolStopInterruptsTheBatch(t *testing.T) {
	rec := &recorder{decide: func(c hook.Call) (hook.Decision, error) {
		if c.Tool.Name == "echo" {
			return hook.Decision{Action: keel.HookStop, Reason: "saw enough"}, nil
		}
		return hook.Decision{}, nil
	}}
	env := newHookEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"e","name":"echo","arguments":{"text":"x"}},{"id":"s","name":"sleep","arguments":{"seconds":3600}}]},
	  {"text":["never"]}]}`,
		map[string]hook.Hook{"watch": rec.hook(hook.Spec{Points: []keel.HookPoint{keel.HookAfterTool}})})
	res := env.execSession(t, hookRun("go", []string{"watch"}, "echo", "sleep"))

	require.Equal(t, keel.StatusFailed, res.Outcome.Status)
	require.Equal(t, keel.CodeHookStopped, failure(t, res.Outcome).Code)
	tools := toolEvents(t, res.Events)
	require.Contains(t, tools, "finished:e:ok")
	require.Contains(t, tools, "finished:s:interrupted")
	require.Equal(t, 1, res.Outcome.Steps)
	end, _ := at(res.Events, keel.TypeRunFailed, 0)
	require.Less(t, end.Sub(res.Events[0].At), time.Hour, "the sleep did not hold the run")
}

// logRecorder keeps every record the SDK logs.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) rec(level, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(append([]any{level, msg}, kv...)...))
}
func (l *logRecorder) Debug(msg string, kv ...any) { l.rec("DEBUG", msg, kv...) }
func (l *logRecorder) Info(msg string, kv ...any)  { l.rec("INFO", msg, kv...) }
func (l *logRecorder) Warn(msg string, kv ...any)  { l.rec("WARN", msg, kv...) }
func (l *logRecorder) Error(msg string, kv ...any) { l.rec("ERROR", msg, kv...) }

// docs/contract.md §23.4, §1.5: webhooks that misbehave as an attacker's
// would (hang, answer 10 MB, redirect to another host, answer invalid
// JSON, bring input over the prompt limit) each end the run's call with a
// typed, bounded result, and neither the events nor the logs hold the
// webhook's URL, its secret or what it answered.
func TestHostileWebhooksLeaveNoSecret(t *testing.T) {
	const secret = "whsec-do-not-log-me"
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the redirect was followed")
	}))
	defer other.Close()
	big := strings.Repeat("z", 10<<20)
	// release ends the hanging handler's waits, which the server side of
	// a request the client gave up on may not see end on its own.
	release := make(chan struct{})
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		code    keel.Code
	}{
		{"hangs", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, keel.CodeHookFailed},
		{"answers 10 MB", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) }, keel.CodeTooLarge},
		{"redirects", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		}, keel.CodeHookFailed},
		{"answers invalid JSON", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"action":"zzzz`)
		}, keel.CodeHookFailed},
		{"brings input over the prompt limit", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"input":["`+strings.Repeat("z", api.MaxPromptBytes+1)+`"]}`)
		}, keel.CodeTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			defer func() {
				if tc.name == "hangs" {
					close(release)
				}
			}()
			wh, err := hook.NewWebhook(hook.WebhookConfig{URL: srv.URL + "/keel?token=" + secret, Secret: []byte(secret),
				Spec: hook.Spec{Points: []keel.HookPoint{keel.HookBeforeStep}, Timeout: keel.Duration(200 * time.Millisecond),
					OnError: hook.OnErrorContinue}})
			require.NoError(t, err)
			logs := &logRecorder{}
			env := newHookEnv(t, `{"turns":[{"text":["done"]}]}`, map[string]hook.Hook{"audit": wh}, logs)
			res := env.execSession(t, hookRun("hello", []string{"audit"}))

			require.Equal(t, keel.StatusCompleted, res.Outcome.Status, "on_error continue: the run goes on")
			failed := find[keel.HookFailed](t, res.Events)
			require.Len(t, failed, 1)
			require.Equal(t, tc.code, failed[0].Code)
			require.True(t, failed[0].Continued)
			require.LessOrEqual(t, len(failed[0].Message), 1024)
			require.Empty(t, find[keel.BoundaryInputApplied](t, res.Events))
			everything := fmt.Sprint(res.Events) + strings.Join(logs.lines, "\n")
			for _, leak := range []string{secret, srv.URL, other.URL, "zzzz"} {
				require.NotContains(t, everything, leak)
			}
		})
	}
}

// Sessions of one worker start as the same agent, with the same hooks,
// at once: the side effects that record the agent's spec and the hooks'
// never write into the worker's rules, which all of them read (under
// -race, decoding into the value a side effect returned was a data race
// on the agent's tools).
func TestSessionsShareTheWorkersRules(t *testing.T) {
	rules := &workflows.Rules{
		Agents: map[string]delegation.AgentSpec{"helper": {Name: "helper", Model: "scripted:test", Tools: []string{"echo", "fail"}}},
		Hooks:  map[string]hook.Spec{"audit": {Points: []keel.HookPoint{keel.HookRunStart, keel.HookRunEnd}}},
	}
	audit := (&recorder{}).hook(rules.Hooks["audit"])
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			x := newExecution(t, `{"turns":[{"text":["hi"]}]}`, rules)
			x.acts.Hooks = map[string]hook.Hook{"audit": audit}
			x.sendAll(t, sessionInput("s1", api.RunConfig{}),
				api.SendRequest{Prompt: "go", Config: &api.RunConfig{Agent: "helper", Hooks: []string{"audit"}}})
		})
	}
	wg.Wait()
	require.Equal(t, []string{"echo", "fail"}, rules.Agents["helper"].Tools)
	require.Equal(t, []keel.HookPoint{keel.HookRunStart, keel.HookRunEnd}, rules.Hooks["audit"].Points)
}
