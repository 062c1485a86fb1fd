package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// These tests kill -9 a worker process in the middle of a run, start a new
// one, and check what docs/contract.md promises across it: the run ends
// with exactly one terminal event (§3.1), the session's durable log is
// dense with no event skipped or repeated, also as a client following the
// run across the kill saw it (§14.1, §14.3), and no tool call ran again
// once the server had recorded it as finished (§4.7).

// killConfig is the run configuration of the kill tests. A short heartbeat
// timeout makes the server notice a dead worker's activity in 2 s instead
// of 15.
func killConfig(tools ...string) client.SendOption {
	return client.WithConfig(api.RunConfig{Tools: tools, HeartbeatAfter: keel.Duration(2 * time.Second)})
}

const sleepScript = `{"chunk_delay":"10ms","turns":[
  {"text":["I will count, then wait."],"tool_calls":[{"id":"count","name":"tally","arguments":{"label":"before"}}]},
  {"text":["Waiting."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":3}}]},
  {"text":["Done ","waiting."]}
]}`

// TestKillWorkerWhileToolSleeps kills the worker while the run waits in the
// sleep tool's durable timer, after a tally call finished: the new worker
// picks the run up when the timer fires, and the tally call is not run
// again.
func TestKillWorkerWhileToolSleeps(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	s := newKillStack(t, sleepScript)
	first := s.startWorker()
	sess := s.client.Session("kill-sleep")
	run, err := sess.Send(ctx, "count, then wait", killConfig("tally", "sleep"))
	require.NoError(t, err)
	f := followRun(ctx, run)

	f.waitFor(t, ctx, "tool.started of the sleep", sawToolStarted("sleep"))
	first.kill()
	snap := killSnapshot{gen: first.gen, tallied: len(s.tally()),
		completed: toolCallsCompleted(t, ctx, s.client.Temporal(), sess.ID(), run.ID)}
	require.True(t, snap.completed["count"], "the tally call finished before the sleep started")
	killed := time.Now()
	s.startWorker()

	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	t.Logf("run completed %v after the kill", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, "Done waiting.", out.Text)
	followed := durable(f.wait(t, ctx))

	log, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	requireSameEvents(t, runEvents(log, run.ID), followed)
	require.Equal(t, keel.TypeRunCompleted, log[len(log)-1].Type)
	requireToolEffects(t, s.tally(), run.ID, []string{"count"}, []killSnapshot{snap})
	require.Len(t, s.tally(), 2, "the tally call ran exactly once, start and end")
	for _, ev := range log {
		if ev.Type == keel.TypeToolFinished {
			fin := decode[keel.ToolFinished](ev)
			require.Equal(t, keel.ToolOK, fin.Status, "%s: %s", fin.ToolCallID, fin.Output)
		}
	}
	requireTranscript(t, ctx, sess, []transcriptShape{
		{Role: keel.RoleUser, Content: "count, then wait"},
		{Role: keel.RoleAssistant, Content: "I will count, then wait.", Calls: []string{"count:tally"}},
		{Role: keel.RoleTool, Content: "counted before", Tool: "count", Status: keel.ToolOK},
		{Role: keel.RoleAssistant, Content: "Waiting.", Calls: []string{"nap:sleep"}},
		{Role: keel.RoleTool, Content: "slept 3s", Tool: "nap", Status: keel.ToolOK},
		{Role: keel.RoleAssistant, Content: "Done waiting."},
	})
}

// streamChunks is the single turn of streamScript: 20 chunks 100 ms apart,
// so a model turn streams for 2 s.
var streamChunks = func() []string {
	var out []string
	for i := 1; i <= 20; i++ {
		out = append(out, fmt.Sprintf("w%02d ", i))
	}
	return out
}()

func streamScript() string {
	return `{"chunk_delay":"100ms","turns":[{"text":["` + strings.Join(streamChunks, `","`) + `"]}]}`
}

// TestKillWorkerWhileModelStreams kills the worker at the first text delta
// of a slow model turn: the turn's heartbeat times out, the run records the
// abandoned attempt and retries it on the new worker.
func TestKillWorkerWhileModelStreams(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	s := newKillStack(t, streamScript())
	first := s.startWorker()
	sess := s.client.Session("kill-stream")
	run, err := sess.Send(ctx, "talk slowly", killConfig())
	require.NoError(t, err)
	f := followRun(ctx, run)

	f.waitFor(t, ctx, "the first text delta", func(seen []keel.Envelope) bool {
		for _, ev := range seen {
			if ev.Type == keel.TypeTextDelta {
				return true
			}
		}
		return false
	})
	first.kill()
	killed := time.Now()
	s.startWorker()

	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	t.Logf("run completed %v after the kill", time.Since(killed).Round(time.Millisecond))
	full := strings.Join(streamChunks, "")
	require.Equal(t, full, out.Text)
	require.Equal(t, 2, out.UsageTotal.Requests, "the abandoned attempt counts as a physical request")
	seen := f.wait(t, ctx)

	log, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	requireSameEvents(t, runEvents(log, run.ID), durable(seen))

	// The abandoned attempt is on record: its usage, a stream reset that
	// says the worker was lost, the retry, then the attempt that succeeded.
	var reset, retry *keel.Envelope
	var completed []keel.ModelCallCompleted
	usageAttempts := map[int]bool{}
	for i, ev := range log {
		switch ev.Type {
		case keel.TypeProviderStreamReset:
			reset = &log[i]
		case keel.TypeProviderRetry:
			retry = &log[i]
		case keel.TypeModelCallCompleted:
			completed = append(completed, decode[keel.ModelCallCompleted](ev))
		case keel.TypeUsageUpdated:
			usageAttempts[decode[keel.UsageUpdated](ev).Attempt] = true
		}
	}
	require.NotNil(t, reset, "no provider.stream_reset in %v", types(log))
	r := decode[keel.ProviderStreamReset](*reset)
	require.Equal(t, keel.ProviderStreamReset{Step: 1, Attempt: 1,
		Reason: keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: keel.ProviderWorkerLost}}, r)
	require.NotNil(t, retry, "no provider.request_retry in %v", types(log))
	require.Greater(t, retry.Seq, reset.Seq)
	require.Equal(t, keel.ProviderWorkerLost, decode[keel.ProviderRequestRetry](*retry).Kind)
	require.Len(t, completed, 1)
	require.Equal(t, 2, completed[0].Attempt)
	require.Equal(t, map[int]bool{1: true, 2: true}, usageAttempts)

	// What a client saw: every delta of the abandoned attempt came before
	// the reset, every delta of the retry after it, and the retry's deltas
	// spell the whole response.
	resetAt := -1
	for i, ev := range seen {
		if ev.Type == keel.TypeProviderStreamReset {
			resetAt = i
		}
	}
	require.GreaterOrEqual(t, resetAt, 0)
	var abandoned, retried int
	var retryText strings.Builder
	for i, ev := range seen {
		if ev.Type != keel.TypeTextDelta {
			continue
		}
		d := decode[keel.TextDelta](ev)
		switch d.Attempt {
		case 1:
			abandoned++
			require.Less(t, i, resetAt, "a delta of the abandoned attempt came after the reset")
		case 2:
			retried++
			require.Greater(t, i, resetAt, "a delta of the retry came before the reset")
			retryText.WriteString(d.Text)
		default:
			t.Fatalf("delta of attempt %d", d.Attempt)
		}
	}
	require.Positive(t, abandoned)
	require.Equal(t, full, retryText.String())
	t.Logf("deltas seen: %d of the abandoned attempt, %d of the retry", abandoned, retried)
	// The abandoned attempt's partial text is not part of the conversation.
	requireTranscript(t, ctx, sess, []transcriptShape{
		{Role: keel.RoleUser, Content: "talk slowly"},
		{Role: keel.RoleAssistant, Content: full},
	})
}

// manyStepsScript is a four-step run with three tally calls held in flight
// for 400 ms and a 1 s durable sleep. Its durable events, numbered:
//
//	 1 run.started         2 step.started 1     3-4 usage, model_call
//	 5 tool.proposed a     6 tool.started a     7 tool.finished a
//	 8 step.started 2      9-10 usage, model_call
//	11-12 tool.proposed b, nap   13-14 tool.started b, nap
//	15-16 tool.finished b, nap   17 step.started 3   18-19 usage, model_call
//	20 tool.proposed c    21 tool.started c    22 tool.finished c
//	23 step.started 4     24-25 usage, model_call   26 run.completed
const manyStepsScript = `{"chunk_delay":"150ms","turns":[
  {"text":["Counting ","a."],"tool_calls":[{"id":"a","name":"tally","arguments":{"label":"a","hold_ms":400}}]},
  {"text":["Counting b, ","resting."],"tool_calls":[
    {"id":"b","name":"tally","arguments":{"label":"b","hold_ms":400}},
    {"id":"nap","name":"sleep","arguments":{"seconds":1}}]},
  {"text":["Counting ","c."],"tool_calls":[{"id":"c","name":"tally","arguments":{"label":"c","hold_ms":400}}]},
  {"text":["All ","counted."]}
]}`

// manyStepsEvents is the number of durable events of manyStepsScript's run.
const manyStepsEvents = 26

// atTerminal in a kill plan kills the worker as soon as the run's terminal
// event was seen: the run has ended and its session's execution has yet
// to commit it.
const atTerminal = 0

// defaultKillPlans kill each run three times, after the given number of
// durable events were seen (numbered as in manyStepsScript's comment, plus
// three after each killed model turn): while a model turn streams (2, 17),
// while a tool call is in flight (6; 14 also with the sleep's timer
// running), between steps (22), and between the run's end and the
// session's commit.
var defaultKillPlans = [][]int{{2, 14, 22}, {6, 17, atTerminal}}

// killPlans returns defaultKillPlans, or with KEEL_KILL_SEED set (a number,
// or "random") two plans of three kill points drawn at random.
func killPlans(t *testing.T) [][]int {
	v := os.Getenv("KEEL_KILL_SEED")
	if v == "" {
		return defaultKillPlans
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		seed = rand.Uint64()
	}
	t.Logf("kill points drawn with KEEL_KILL_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	plans := make([][]int, 2)
	for i := range plans {
		// Distinct points in 1..manyStepsEvents-1 or atTerminal, in order.
		picked := rng.Perm(manyStepsEvents)[:3]
		slices.Sort(picked)
		if picked[0] == atTerminal {
			picked = append(picked[1:], atTerminal)
		}
		plans[i] = picked
	}
	return plans
}

// killPoint returns what a kill plan's point waits for.
func killPoint(k int) (string, func([]keel.Envelope) bool) {
	if k == atTerminal {
		return "the terminal event", func(seen []keel.Envelope) bool {
			return slices.ContainsFunc(seen, keel.Envelope.Terminal)
		}
	}
	return fmt.Sprintf("%d durable events", k), countDurable(k)
}

func planName(plan []int) string {
	parts := make([]string, len(plan))
	for i, k := range plan {
		parts[i] = strconv.Itoa(k)
		if k == atTerminal {
			parts[i] = "terminal"
		}
	}
	return "kills_after_" + strings.Join(parts, "_")
}

// TestKillWorkerAtManyPoints is "kill -9 at random points loses nothing":
// each run's worker is killed three times at points counted in durable
// events seen, and every invariant is checked on every run.
func TestKillWorkerAtManyPoints(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	s := newKillStack(t, manyStepsScript)
	// Six kills would each cost another 4 s waiting for the dead worker's
	// sticky queue; the Kill tests above run with Temporal's default.
	s.spec.StickyTimeout = time.Second
	for i, plan := range killPlans(t) {
		t.Run(planName(plan), func(t *testing.T) {
			sessID := fmt.Sprintf("kill-many-%d", i)
			w := s.startWorker()
			sess := s.client.Session(sessID)
			run, err := sess.Send(ctx, "count a, b and c", killConfig("tally", "sleep"))
			require.NoError(t, err)
			f := followRun(ctx, run)
			var kills []killSnapshot
			for _, k := range plan {
				what, cond := killPoint(k)
				f.waitFor(t, ctx, what, cond)
				w.kill()
				kills = append(kills, killSnapshot{gen: w.gen, tallied: len(s.tally()),
					completed: toolCallsCompleted(t, ctx, s.client.Temporal(), sess.ID(), run.ID)})
				w = s.startWorker()
			}
			out, err := run.Outcome(ctx)
			require.NoError(t, err)
			require.Equal(t, "All counted.", out.Text)
			followed := durable(f.wait(t, ctx))

			log, err := sess.EventsAfter(ctx, 0)
			require.NoError(t, err)
			requireSessionLog(t, log)
			requireSameEvents(t, runEvents(log, run.ID), followed)
			require.Equal(t, keel.TypeRunCompleted, log[len(log)-1].Type)
			requireToolEffects(t, s.tally(), run.ID, []string{"a", "b", "c"}, kills)
			// Killing a model turn adds a reset, a retry and a usage
			// report; nothing else may differ from an undisturbed run.
			var extra int
			for _, ev := range log {
				switch ev.Type {
				case keel.TypeProviderStreamReset, keel.TypeProviderRetry:
					extra++
				case keel.TypeUsageUpdated:
					if decode[keel.UsageUpdated](ev).Attempt > 1 {
						extra++
					}
				}
			}
			require.Equal(t, manyStepsEvents, len(log)-extra, "events: %v", types(log))
			runs := map[string]int{}
			for _, l := range s.tally() {
				if l.RunID == run.ID && l.Phase == "start" {
					runs[l.ToolCallID]++
				}
			}
			t.Logf("%d events recorded by a killed model turn; tally executions per call: %v", extra, runs)
			requireTranscript(t, ctx, sess, []transcriptShape{
				{Role: keel.RoleUser, Content: "count a, b and c"},
				{Role: keel.RoleAssistant, Content: "Counting a.", Calls: []string{"a:tally"}},
				{Role: keel.RoleTool, Content: "counted a", Tool: "a", Status: keel.ToolOK},
				{Role: keel.RoleAssistant, Content: "Counting b, resting.", Calls: []string{"b:tally", "nap:sleep"}},
				{Role: keel.RoleTool, Content: "counted b", Tool: "b", Status: keel.ToolOK},
				{Role: keel.RoleTool, Content: "slept 1s", Tool: "nap", Status: keel.ToolOK},
				{Role: keel.RoleAssistant, Content: "Counting c.", Calls: []string{"c:tally"}},
				{Role: keel.RoleTool, Content: "counted c", Tool: "c", Status: keel.ToolOK},
				{Role: keel.RoleAssistant, Content: "All counted."},
			})
			// The next plan starts a worker of its own.
			w.kill()
		})
	}
}

// lossSleepScript's second turn streams for a minute, so that the cancel
// finds the run active whichever workflow task the server hands the new
// worker first (the real one may beat the query; the turn it starts must
// not end the run before the cancel lands).
const lossSleepScript = `{"turns":[
  {"text":["Napping."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":4}}]},
  {"chunk_delay":"60s","text":["Awake."]}
]}`

// TestFollowAcrossWorkerLossDeliversOnlyCommittedEvents makes a worker
// answer a run's events query from state no workflow task committed (the
// run executes in its session's workflow, so the query is the session's),
// then cancels the run so that the task that does commit decides
// otherwise, and checks that a client following the run sees only what
// was committed, terminal event included (docs/contract.md §14.2).
//
// The worker dies while the run sleeps. A query sent then waits on the dead
// worker's sticky queue for 5 s before another worker gets it; the sleep's
// timer fires at 4 s, and the workflow task that processes it waits for
// the sticky queue too, until about 9 s. So the new worker, which does not
// have the run cached, answers the query by replaying the whole history,
// TimerFired included (tool.finished and step.started, with a stale clock),
// and the cancel signal sent right after lands before the real task, which
// commits run.cancelled where the query said step.started. Such an
// answer must not name a completed workflow task: readers deliver a page
// only if it does.
func TestFollowAcrossWorkerLossDeliversOnlyCommittedEvents(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	s := newKillStack(t, lossSleepScript)
	first := s.startWorker()
	sess := s.client.Session("query-after-loss")
	run, err := sess.Send(ctx, "nap", killConfig("sleep"))
	require.NoError(t, err)
	f := followRun(ctx, run)
	f.waitFor(t, ctx, "tool.started of the sleep", sawToolStarted("sleep"))
	first.kill()

	type answer struct {
		page api.EventsPage
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		for {
			v, err := s.client.Temporal().QueryWorkflow(ctx, sess.ID(), "", api.QueryEvents, api.EventsQuery{})
			// A query matched to a poll of the killed worker just as its
			// connection went can come back cancelled by the server, and
			// one that waited out the dead worker's sticky queue and then
			// a replay on a loaded machine can pass the server's query
			// deadline; either is sent again (only while the test's
			// context lives).
			var cancelled *serviceerror.Canceled
			var late *serviceerror.DeadlineExceeded
			if (errors.As(err, &cancelled) || status.Code(err) == codes.Canceled || errors.As(err, &late)) && ctx.Err() == nil {
				t.Logf("query not answered (%T: %v); sending it again", err, err)
				continue
			}
			if a.err = err; err == nil {
				a.err = v.Get(&a.page)
			}
			break
		}
		answered <- a
	}()
	s.startWorker()
	var a answer
	select {
	case a = <-answered:
	case <-ctx.Done():
		t.Fatal("query not answered")
	}
	require.NoError(t, a.err, "%T", a.err)
	require.NoError(t, run.Cancel(ctx))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)

	log, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	// An answer that names a completed task holds committed events only;
	// any other is left unread. Say whether this run met the hazard.
	var uncommitted []string
	for _, ev := range a.page.Events {
		if ev.Seq > int64(len(log)) || !cmp.Equal(log[ev.Seq-1], ev) {
			uncommitted = append(uncommitted, fmt.Sprintf("%d %s", ev.Seq, ev.Type))
		}
	}
	named := taskCompleted(t, ctx, s.client.Temporal(), sess.ID(), a.page)
	if named && len(uncommitted) > 0 {
		t.Errorf("the answer names workflow task %d of %s, which completed, yet holds events the run did not commit: %v",
			a.page.Task, a.page.Execution, uncommitted)
	}
	t.Logf("the query answered %v at task %d (completed: %v), of which %v were never committed as such; "+
		"the run committed %v", types(a.page.Events), a.page.Task, named, uncommitted, types(log))

	// The session has committed the run, so its terminal event is there to
	// be read; the guard only bounds the failure.
	guard, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	select {
	case <-f.done:
	case <-guard.Done():
		t.Fatalf("the follower never delivered the run's terminal event (seq %d); it saw %v",
			len(log), types(durable(f.stop())))
	}
	requireSameEvents(t, log, durable(f.wait(t, ctx)))
}
