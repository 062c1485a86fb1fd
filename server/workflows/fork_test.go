package workflows_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
)

// echoConfig offers the echo tool.
var echoConfig = api.RunConfig{Tools: []string{"echo"}}

// twoStepRuns is the script of runs of two steps each: a call of echo,
// then a final answer. The scripted model plays the turn after the
// assistant turns the transcript holds, so every run reads one script.
func twoStepRuns() string {
	var turns []string
	for n := 1; n <= 6; n++ {
		turns = append(turns, fmt.Sprintf(`{"text":["calling %d"],"tool_calls":[{"id":"c%d","name":"echo","arguments":{"text":"r%d"}}]}`, n, n, n),
			fmt.Sprintf(`{"text":["done %d"]}`, n))
	}
	return `{"turns":[` + strings.Join(turns, ",") + `]}`
}

// sessionOfRuns runs n two-step runs in session id, one execution each,
// and returns the idle input that follows and the transcript after each
// run (index 0: before the first).
func sessionOfRuns(t *testing.T, in carry.SessionInput, n int) (carry.SessionInput, [][]keel.Message) {
	t.Helper()
	return sessionOfScriptedRuns(t, twoStepRuns(), in, n)
}

// sessionOfScriptedRuns is sessionOfRuns with the runs script plays.
func sessionOfScriptedRuns(t *testing.T, script string, in carry.SessionInput, n int) (carry.SessionInput, [][]keel.Message) {
	t.Helper()
	after := [][]keel.Message{nil}
	if in.Fork != nil {
		after[0] = in.Fork.Transcript
	}
	for i := 1; i <= n; i++ {
		e := newSessionEnv(t, script, &memSegments{})
		var sent api.SendResult
		e.RegisterDelayedCallback(func() { e.send(t, "p", api.SendRequest{Prompt: fmt.Sprintf("prompt %d", i)}, &sent) }, 0)
		e.ExecuteWorkflow(api.SessionWorkflowName, in)
		in = continuedAs(t, e)
		require.Equal(t, keel.StatusCompleted, in.Carry.Last.Status)
		after = append(after, in.Carry.Transcript)
	}
	return in, after
}

// idleSession runs an idle execution of in, calls each of during a
// second apart (an update sent by one is applied before the next), and
// returns what it hands over when asked to move.
func idleSession(t *testing.T, in carry.SessionInput, during ...func(e *runEnv)) carry.SessionInput {
	t.Helper()
	e := newSessionEnv(t, `{"turns":[{"text":["unused"]}]}`, &memSegments{})
	for i, f := range during {
		e.RegisterDelayedCallback(func() { f(e) }, time.Duration(i+1)*time.Second)
	}
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(api.SignalMove, nil) }, time.Minute)
	e.ExecuteWorkflow(api.SessionWorkflowName, in)
	return continuedAs(t, e)
}

func forkPoint(t *testing.T, e *runEnv, p api.Point) (api.ForkPoint, error) {
	t.Helper()
	v, err := e.QueryWorkflow(api.QueryForkPoint, api.ForkPointQuery{Point: p})
	if err != nil {
		return api.ForkPoint{}, err
	}
	var fp api.ForkPoint
	require.NoError(t, v.Get(&fp))
	return fp, nil
}

func forkInput(id string, fp api.ForkPoint) carry.SessionInput {
	in := sessionInput(id, fp.Config)
	in.Fork = &api.ForkInput{Origin: fp.Origin, Transcript: fp.Transcript}
	return in
}

// docs/contract.md §19.1: a fork at every run boundary of a multi-run
// session holds exactly the source's transcript after that run, with the
// source's revision and sequence there; the source is untouched.
func TestForkAtEveryRunBoundary(t *testing.T) {
	src := sessionInput("s1", echoConfig)
	idle, after := sessionOfRuns(t, src, 3)
	points := make([]api.ForkPoint, 4)
	moved := idleSession(t, idle, func(e *runEnv) {
		for n := 0; n <= 3; n++ {
			fp, err := forkPoint(t, e, api.Point{Run: n})
			require.NoError(t, err, "run %d", n)
			points[n] = fp
		}
	})
	require.Equal(t, idle.Carry.Transcript, moved.Carry.Transcript, "the source is untouched")
	require.Equal(t, idle.Carry.Seq, moved.Carry.Seq)
	var seq int64
	for n, fp := range points {
		if diff := cmp.Diff(after[n], fp.Transcript); diff != "" {
			t.Errorf("fork at run %d: transcript (-source +fork):\n%s", n, diff)
		}
		require.Equal(t, int64(n), fp.Origin.Revision, "run %d", n)
		require.Equal(t, "s1", fp.Origin.Source)
		require.Equal(t, echoConfig, fp.Config)
		if n > 0 {
			require.Greater(t, fp.Origin.Seq, seq, "run %d", n)
			require.True(t, idle.Carry.Tail[fp.Origin.Seq-1].Terminal(), "the point's sequence is run %d's terminal event", n)
		}
		seq = fp.Origin.Seq
	}
	require.Equal(t, idle.Carry.Seq, points[3].Origin.Seq)
}

// docs/contract.md §19.1: a fork's log begins with session.forked, its
// next prompt runs on top of the source's conversation at the point and
// from its revision, and its state names its parent.
func TestForkRunsOnTopOfThePoint(t *testing.T) {
	idle, after := sessionOfRuns(t, sessionInput("s1", echoConfig), 2)
	var fp api.ForkPoint
	idleSession(t, idle, func(e *runEnv) {
		var err error
		fp, err = forkPoint(t, e, api.Point{Run: 1})
		require.NoError(t, err)
	})
	var parent api.SessionStatus
	fork := idleSession(t, forkInput("f1", fp), func(e *runEnv) {
		parent = query[api.SessionStatus](t, e, api.QueryState)
	})
	require.Equal(t, &api.ForkOrigin{Source: "s1", Point: api.Point{Run: 1}, Revision: 1, Seq: fp.Origin.Seq}, parent.Parent)
	require.Equal(t, int64(1), parent.Revision)
	require.Equal(t, 0, parent.Runs)
	require.Len(t, fork.Carry.Tail, 1)
	ev := fork.Carry.Tail[0]
	require.Equal(t, int64(1), ev.Seq)
	require.Equal(t, keel.TypeSessionForked, ev.Type)
	require.Empty(t, ev.RunID)
	require.Equal(t, []keel.Event{keel.SessionForked{Source: "s1", Run: 1, Revision: 1, Seq: fp.Origin.Seq, Messages: len(after[1])}},
		decode(t, fork.Carry.Tail))

	ran, forkAfter := sessionOfRuns(t, fork, 1)
	c := ran.Carry
	require.Equal(t, after[1], c.Transcript[:len(after[1])], "the fork's run went on from the point")
	require.Equal(t, keel.UserMessage("prompt 1"), c.Transcript[len(after[1])])
	require.Equal(t, int64(2), c.Revision)
	checkLog(t, 1, c.Tail[1:])
	require.Equal(t, keel.RunStarted{Number: 1, Revision: 1, Prompt: "prompt 1", Model: "scripted:demo"},
		decode(t, c.Tail[1:2])[0])
	require.Equal(t, "f1/run-1", c.Tail[1].RunID)
	require.Equal(t, &fp.Origin, c.Origin, "the origin is carried")

	// A fork of the fork, at its run 1 and at its run 0 (its own point).
	var ff, ff0 api.ForkPoint
	idleSession(t, ran, func(e *runEnv) {
		var err error
		ff, err = forkPoint(t, e, api.Point{Run: 1})
		require.NoError(t, err)
		ff0, err = forkPoint(t, e, api.Point{Run: 0})
		require.NoError(t, err)
	})
	require.Equal(t, "f1", ff.Origin.Source)
	require.Equal(t, forkAfter[1], ff.Transcript)
	require.Equal(t, int64(2), ff.Origin.Revision)
	require.Equal(t, after[1], ff0.Transcript)
	require.Equal(t, int64(1), ff0.Origin.Revision)
	ffIn := idleSession(t, forkInput("f2", ff), func(*runEnv) {})
	require.Equal(t, keel.SessionForked{Source: "f1", Run: 1, Revision: 2, Seq: ff.Origin.Seq, Messages: len(forkAfter[1])},
		decode(t, ffIn.Carry.Tail)[0])
}

// docs/contract.md §19.1: a step point keeps the run's prompt, its first K
// assistant turns and their tool results, and none of its later work; its
// revision is the one the run started from.
func TestForkAtAStep(t *testing.T) {
	idle, after := sessionOfRuns(t, sessionInput("s1", echoConfig), 2)
	var step1, step2 api.ForkPoint
	var err3 error
	idleSession(t, idle, func(e *runEnv) {
		var err error
		step1, err = forkPoint(t, e, api.Point{Run: 2, Step: 1})
		require.NoError(t, err)
		step2, err = forkPoint(t, e, api.Point{Run: 2, Step: 2})
		require.NoError(t, err)
		_, err3 = forkPoint(t, e, api.Point{Run: 2, Step: 3})
	})
	run2 := after[2][len(after[1]):]
	require.Len(t, run2, 4, "prompt, call, result, answer")
	want := append(append([]keel.Message(nil), after[1]...), run2[:3]...)
	if diff := cmp.Diff(want, step1.Transcript); diff != "" {
		t.Fatalf("step 1 (-want +got):\n%s", diff)
	}
	require.Equal(t, keel.RoleTool, step1.Transcript[len(step1.Transcript)-1].Role)
	require.Equal(t, int64(1), step1.Origin.Revision)
	require.Equal(t, api.Point{Run: 2, Step: 1}, step1.Origin.Point)
	require.Equal(t, after[2], step2.Transcript, "the last step ends where the run does")
	require.Equal(t, keel.CodeNotFound, keelCode(err3), "%v", err3)
}

// threeStepRuns is the script of runs of three steps each: two calls of
// echo at once, then one, then a final answer.
func threeStepRuns(runs int) string {
	var turns []string
	for n := 1; n <= runs; n++ {
		turns = append(turns,
			fmt.Sprintf(`{"text":["first %d"],"tool_calls":[{"id":"a%d","name":"echo","arguments":{"text":"a%d"}},`+
				`{"id":"b%d","name":"echo","arguments":{"text":"b%d"}}]}`, n, n, n, n, n),
			fmt.Sprintf(`{"tool_calls":[{"id":"c%d","name":"echo","arguments":{"text":"c%d"}}]}`, n, n),
			fmt.Sprintf(`{"text":["done %d"]}`, n))
	}
	return `{"turns":[` + strings.Join(turns, ",") + `]}`
}

// docs/contract.md §19.1: a fork at every step boundary of every run of a
// session whose runs take three steps (the first with two tool calls)
// holds, in its own history (the history query of the fork), exactly the
// source's transcript up to there: the runs before, the run's prompt, its
// first K assistant turns and every tool result that answers them; its
// revision is the one the run started from. A step the run does not have
// is refused.
func TestForkAtEveryStepBoundary(t *testing.T) {
	const runs, steps = 3, 3
	idle, after := sessionOfScriptedRuns(t, threeStepRuns(runs), sessionInput("s1", echoConfig), runs)
	points := map[api.Point]api.ForkPoint{}
	idleSession(t, idle, func(e *runEnv) {
		for n := 1; n <= runs; n++ {
			for k := 1; k <= steps; k++ {
				fp, err := forkPoint(t, e, api.Point{Run: n, Step: k})
				require.NoError(t, err, "run %d step %d", n, k)
				points[api.Point{Run: n, Step: k}] = fp
			}
			_, err := forkPoint(t, e, api.Point{Run: n, Step: steps + 1})
			require.Equal(t, keel.CodeNotFound, keelCode(err), "run %d step %d: %v", n, steps+1, err)
		}
	})
	// Each run: prompt, the turn with two calls, their two results, the
	// turn with one call, its result, the answer. Step K ends after the
	// K-th assistant turn's results.
	stepEnds := map[int]int{1: 4, 2: 6, 3: 7}
	for n := 1; n <= runs; n++ {
		run := after[n][len(after[n-1]):]
		roles := make([]keel.Role, len(run))
		for i, m := range run {
			roles[i] = m.Role
		}
		require.Equal(t, []keel.Role{keel.RoleUser, keel.RoleAssistant, keel.RoleTool, keel.RoleTool, keel.RoleAssistant,
			keel.RoleTool, keel.RoleAssistant}, roles, "run %d", n)
		for k := 1; k <= steps; k++ {
			fp := points[api.Point{Run: n, Step: k}]
			want := after[n][:len(after[n-1])+stepEnds[k]]
			var hist api.HistoryPage
			idleSession(t, forkInput(fmt.Sprintf("f%d-%d", n, k), fp), func(e *runEnv) {
				hist = query[api.HistoryPage](t, e, api.QueryHistory, api.HistoryQuery{})
			})
			if diff := cmp.Diff(want, hist.Messages); diff != "" {
				t.Errorf("fork at run %d step %d: history (-source's prefix +fork):\n%s", n, k, diff)
			}
			require.Equal(t, int64(n-1), fp.Origin.Revision, "run %d step %d", n, k)
			require.Equal(t, int64(n-1), hist.Revision, "run %d step %d", n, k)
		}
	}
}

// docs/contract.md §19.2: a rewind cuts the history the model sees, keeps
// the log whole and dense with session.rewound, and the next run goes on
// from the point with the next run number.
func TestRewindThenANewRun(t *testing.T) {
	idle, after := sessionOfRuns(t, sessionInput("s1", echoConfig), 3)
	var res updateResult
	var hist api.HistoryPage
	rewound := idleSession(t, idle, func(e *runEnv) {
		e.update(api.UpdateRewind, "rw", &res, api.RewindRequest{Point: api.Point{Run: 1}})
	}, func(e *runEnv) {
		hist = query[api.HistoryPage](t, e, api.QueryHistory, api.HistoryQuery{})
	})
	require.NoError(t, res.rejected)
	require.NoError(t, res.err)
	rr := res.value.(api.RewindResult)
	require.Equal(t, api.RewindResult{FromRun: 3, FromRevision: 3, Revision: 4, Seq: idle.Carry.Seq + 1, Messages: len(after[1])}, rr)
	require.Equal(t, after[1], hist.Messages, "keel history shows the point")
	require.Equal(t, int64(4), hist.Revision)
	c := rewound.Carry
	require.Equal(t, idle.Carry.Tail, c.Tail[:len(idle.Carry.Tail)], "the later runs stay in the log")
	last := c.Tail[len(c.Tail)-1]
	require.Equal(t, rr.Seq, last.Seq)
	require.Equal(t, keel.SessionRewound{FromRun: 3, FromRevision: 3, ToRun: 1, Revision: 4, Messages: len(after[1])},
		decode(t, []keel.Envelope{last})[0])

	e := newSessionEnv(t, twoStepRuns(), &memSegments{})
	var sent api.SendResult
	e.RegisterDelayedCallback(func() { e.send(t, "p", api.SendRequest{Prompt: "again"}, &sent) }, 0)
	e.ExecuteWorkflow(api.SessionWorkflowName, rewound)
	next := continuedAs(t, e).Carry
	require.Equal(t, 4, sent.Number, "run numbers go on")
	require.Equal(t, rr.Seq, sent.BaseSeq)
	require.Equal(t, after[1], next.Transcript[:len(after[1])])
	require.Len(t, next.Transcript, len(after[1])+4)
	require.Equal(t, keel.UserMessage("again"), next.Transcript[len(after[1])])
	require.Equal(t, int64(5), next.Revision)
	checkLog(t, rr.Seq, next.Tail[rr.Seq:])
	require.Equal(t, 4, decode(t, next.Tail[rr.Seq:rr.Seq+1])[0].(keel.RunStarted).Number)

	// Run 2 was rewound away: no point there; run 1 and run 4 are.
	idleSession(t, continuedAs(t, e), func(e *runEnv) {
		_, err := forkPoint(t, e, api.Point{Run: 2})
		require.Equal(t, keel.CodeNotFound, keelCode(err), "%v", err)
		fp, err := forkPoint(t, e, api.Point{Run: 4})
		require.NoError(t, err)
		require.Equal(t, next.Transcript, fp.Transcript)
		fp, err = forkPoint(t, e, api.Point{Run: 4, Step: 1})
		require.NoError(t, err)
		require.Len(t, fp.Transcript, len(after[1])+3)
	})
}

// docs/contract.md §19.2: a rewind to a step keeps the run's work up to it.
func TestRewindToAStep(t *testing.T) {
	idle, after := sessionOfRuns(t, sessionInput("s1", echoConfig), 2)
	var res updateResult
	rewound := idleSession(t, idle, func(e *runEnv) {
		e.update(api.UpdateRewind, "rw", &res, api.RewindRequest{Point: api.Point{Run: 2, Step: 1}})
	})
	require.NoError(t, res.rejected)
	require.Equal(t, after[2][:len(after[1])+3], rewound.Carry.Transcript)
	require.Len(t, rewound.Carry.Marks, 1, "run 2's mark went")
	require.Equal(t, 1, rewound.Carry.Marks[0].Run)
}

// docs/contract.md §19.3: a point inside the active run, a run that does
// not exist and a malformed point are refused with typed errors, and so is
// a rewind while a run is active; none of them changes the session.
func TestForkAndRewindRefusals(t *testing.T) {
	e := newSessionEnv(t, napThen(`{"text":["one"]}`), &memSegments{})
	var sent api.SendResult
	var rw updateResult
	var active, missing, negative error
	e.RegisterDelayedCallback(func() { e.send(t, "p", api.SendRequest{Prompt: "hello"}, &sent) }, 0)
	e.RegisterDelayedCallback(func() {
		_, active = forkPoint(t, e, api.Point{Run: 1})
		_, missing = forkPoint(t, e, api.Point{Run: 2})
		_, negative = forkPoint(t, e, api.Point{Run: -1})
		e.update(api.UpdateRewind, "rw", &rw, api.RewindRequest{Point: api.Point{Run: 0}})
	}, 30*time.Second)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", napConfig))
	require.Equal(t, keel.CodeRunActive, keelCode(active), "%v", active)
	require.Equal(t, keel.CodeRunActive, keelCode(missing), "a run after the active one: %v", missing)
	require.Equal(t, keel.CodeInvalidInput, keelCode(negative), "%v", negative)
	require.Equal(t, keel.CodeRunActive, keelCode(rw.rejected), "%v", rw.rejected)
	c := continuedAs(t, e).Carry
	checkLog(t, 0, c.Tail)

	var bad updateResult
	after := idleSession(t, continuedAs(t, e), func(e *runEnv) {
		_, err := forkPoint(t, e, api.Point{Run: 2})
		require.Equal(t, keel.CodeNotFound, keelCode(err), "%v", err)
		e.update(api.UpdateRewind, "rw", &bad, api.RewindRequest{Point: api.Point{Run: 5}})
	})
	require.Equal(t, keel.CodeNotFound, keelCode(bad.rejected), "%v", bad.rejected)
	require.Equal(t, c.Seq, after.Carry.Seq, "a refused rewind leaves the log alone")

	// A fork whose source is no session ID fails at its start.
	h := newSessionEnv(t, `{"turns":[{"text":["unused"]}]}`, &memSegments{})
	forged := sessionInput("f1", api.RunConfig{})
	forged.Fork = &api.ForkInput{Origin: api.ForkOrigin{Source: "../s1\n"}}
	h.ExecuteWorkflow(api.SessionWorkflowName, forged)
	require.Equal(t, keel.CodeInvalidInput, keelCode(h.GetWorkflowError()), "%v", h.GetWorkflowError())
}

// docs/contract.md §24.1: a session started with a conversation (an eval
// case's) holds it as its transcript and its run 0, records no event of
// it, and runs its first prompt on top of it; one that breaks the
// rules fails at its start.
func TestSessionStartsWithAConversation(t *testing.T) {
	conv := []keel.Message{{Role: keel.RoleUser, Content: "My name is Ada."}, {Role: keel.RoleAssistant, Content: "Hello, Ada."}}
	in := sessionInput("c1", echoConfig)
	in.Conversation = conv
	var fp api.ForkPoint
	idle := idleSession(t, in, func(e *runEnv) {
		var err error
		fp, err = forkPoint(t, e, api.Point{Run: 0})
		require.NoError(t, err)
	})
	require.Equal(t, conv, fp.Transcript, "run 0 is the conversation")
	require.Equal(t, conv, idle.Carry.Transcript)
	require.Empty(t, idle.Carry.Tail, "no event records it")

	// The script plays the turn after the assistant turns the request
	// carries: after the conversation's one, its second turn, which
	// answers without calling echo.
	ran, _ := sessionOfRuns(t, idle, 1)
	c := ran.Carry
	require.Len(t, c.Transcript, 4, "%+v", c.Transcript)
	require.Equal(t, conv, c.Transcript[:2])
	require.Equal(t, keel.UserMessage("prompt 1"), c.Transcript[2])
	require.Equal(t, "done 1", c.Transcript[3].Content)
	checkLog(t, 0, c.Tail) // the log begins with run 1, at seq 1

	for name, tt := range map[string]struct {
		msgs []keel.Message
		code keel.Code
	}{
		"ends with the user": {conv[:1], keel.CodeInvalidInput},
		"a tool call":        {[]keel.Message{conv[0], {Role: keel.RoleAssistant, Content: "x", ToolCalls: []keel.ToolCall{{ID: "1", Name: "echo"}}}}, keel.CodeInvalidInput},
		"too many turns":     {slices.Repeat(conv, api.MaxEvalConversation/2+1), keel.CodeTooLarge},
	} {
		h := newSessionEnv(t, `{"turns":[{"text":["unused"]}]}`, &memSegments{})
		bad := sessionInput("c2", api.RunConfig{})
		bad.Conversation = tt.msgs
		h.ExecuteWorkflow(api.SessionWorkflowName, bad)
		require.Equal(t, tt.code, keelCode(h.GetWorkflowError()), "%s: %v", name, h.GetWorkflowError())
	}
}
