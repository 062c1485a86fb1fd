package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// Schedules on the embedded server (docs/contract.md §22). Temporal's
// test environment has no schedules, so these run on a real server, with
// `trigger` or a one-second interval; they wait on the sessions' events
// and on the schedules' descriptions, never on time.

// schedRig is a server, a worker whose models tests add by name, and a
// client.
type schedRig struct {
	t      *testing.T
	ctx    context.Context
	srv    *devserver.Server
	book   *keeltest.ScriptBook
	worker sdkworker.Worker
	c      *client.Client
}

func newSchedRig(t *testing.T, timeout time.Duration) *schedRig {
	t.Helper()
	r := &schedRig{t: t, ctx: testContext(t, timeout), book: &keeltest.ScriptBook{}}
	r.srv = keeltest.StartServer(t, devserver.Config{})
	// Firings a second apart: the tests trigger a schedule again soon
	// after, and one fires every two seconds.
	r.worker = keeltest.StartWorker(t, r.srv, keeltest.WorkerOptions{Models: r.book,
		Schedules: schedreg.ScheduleLimits{MinInterval: api.MinScheduleEvery}})
	r.c = keeltest.Client(t, r.srv, nil)
	return r
}

// model adds script under the test's name (and suffix) and returns its spec.
func (r *schedRig) model(suffix, script string) string {
	return r.book.Add(r.t, r.t.Name()+suffix, script)
}

// create creates s and fails the test on error.
func (r *schedRig) create(s api.Schedule) *client.Schedule {
	r.t.Helper()
	if err := r.c.CreateSchedule(r.ctx, s); err != nil {
		r.t.Fatalf("create schedule %s: %v", s.ID, err)
	}
	return r.c.Schedule(s.ID)
}

// waitDescribe reads h's description until ok says it is what the test
// waits for, polling Temporal's answer (a schedule has no event to wait
// on), and returns it.
func (r *schedRig) waitDescribe(h *client.Schedule, what string, ok func(api.ScheduleStatus) bool) api.ScheduleStatus {
	r.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last api.ScheduleStatus
	for {
		st, err := h.Describe(r.ctx)
		if err == nil && ok(st) {
			return st
		}
		if err == nil {
			last = st
		}
		select {
		case <-r.ctx.Done():
			r.t.Fatalf("schedule %s: waiting for %s: %v; last description %+v", h.ID(), what, err, last)
		case <-tick.C:
		}
	}
}

// firing waits until the schedule's nth firing (from 1) is settled (sent,
// skipped or failed) and returns it.
func (r *schedRig) firing(h *client.Schedule, n int) api.ScheduleFiring {
	r.t.Helper()
	st := r.waitDescribe(h, "firing to settle", func(st api.ScheduleStatus) bool {
		return len(st.Recent) >= n && st.Recent[n-1].Status != api.FiringSending
	})
	return st.Recent[n-1]
}

// until follows the session's events after seq until one of type typ and
// returns it.
func (r *schedRig) until(session string, after int64, typ string) keel.Envelope {
	r.t.Helper()
	for ev, err := range r.c.Session(session).EventsFrom(r.ctx, after) {
		if err != nil {
			r.t.Fatalf("session %s: %v", session, err)
		}
		if ev.Type == typ {
			return ev
		}
	}
	r.t.Fatalf("session %s: events ended without %s", session, typ)
	return keel.Envelope{}
}

// started decodes a run.started event.
func started(t *testing.T, ev keel.Envelope) keel.RunStarted {
	t.Helper()
	e, err := ev.Event()
	if err != nil {
		t.Fatal(err)
	}
	return e.(keel.RunStarted)
}

// prime creates session id with one run of model and returns its last
// sequence, so later firings can be followed from there.
func (r *schedRig) prime(id, model string) int64 {
	r.t.Helper()
	run, err := r.c.Session(id).Send(r.ctx, "hello", client.WithConfig(api.RunConfig{Model: model}))
	if err != nil {
		r.t.Fatal(err)
	}
	o, err := run.Outcome(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return o.Seq
}

const answerScript = `{"repeat":true,"turns":[{"text":["done"]}]}`

// TestScheduleFiresRunsWithItsPrompt: a schedule with a two-second
// interval fires by itself, and each firing runs the schedule's prompt
// under its model in the schedule's session; trigger fires at once;
// describe shows the firings with the runs they made; a new-session
// schedule makes a session named after itself and the firing's time.
func TestScheduleFiresRunsWithItsPrompt(t *testing.T) {
	r := newSchedRig(t, 2*time.Minute)
	m := r.model("", answerScript)
	seq := r.prime("sched-every", m)

	h := r.create(api.Schedule{ID: "every-2s", ScheduleSpec: api.ScheduleSpec{Every: keel.Duration(2 * time.Second)},
		Prompt: "Check the dashboard.", Session: "sched-every", Config: &api.RunConfig{Model: m}})
	for range 2 {
		ev := r.until("sched-every", seq, keel.TypeRunStarted)
		rs := started(t, ev)
		if rs.Prompt != "Check the dashboard." || rs.Model == "" {
			t.Fatalf("run.started %+v", rs)
		}
		seq = r.until("sched-every", ev.Seq, keel.TypeRunCompleted).Seq
	}
	if err := h.Pause(r.ctx, "enough"); err != nil {
		t.Fatal(err)
	}
	st := r.waitDescribe(h, "two firings", func(st api.ScheduleStatus) bool { return st.Fired >= 2 })
	if !st.Paused || st.Note != "enough" || len(st.Next) != 0 || st.Schedule.Prompt != "Check the dashboard." {
		t.Fatalf("paused description: %+v", st)
	}
	f := r.firing(h, 1)
	if f.Status != api.FiringSent || f.Result == nil || f.Result.Session != "sched-every" || f.Result.Number < 2 {
		t.Fatalf("first firing: %+v", f)
	}

	// A new session each time, named by the schedule and the time.
	hn := r.create(api.Schedule{ID: "fresh", ScheduleSpec: api.ScheduleSpec{Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin"},
		Prompt: "Morning report.", NewSession: true, Config: &api.RunConfig{Model: m}})
	st = r.waitDescribe(hn, "next firings", func(st api.ScheduleStatus) bool { return len(st.Next) > 0 })
	if hour := st.Next[0].In(mustZone(t, "Europe/Berlin")).Hour(); hour != 9 {
		t.Fatalf("next firing %v is not at 9 in Berlin", st.Next[0])
	}
	if err := hn.Trigger(r.ctx); err != nil {
		t.Fatal(err)
	}
	f = r.firing(hn, 1)
	if f.Status != api.FiringSent || f.Result == nil || !strings.HasPrefix(f.Result.Session, "fresh-") ||
		f.Result.Session != api.ScheduledSessionID("fresh", f.ScheduledAt) || f.Result.Number != 1 {
		t.Fatalf("triggered firing: %+v", f)
	}
	rs := started(t, r.until(f.Result.Session, 0, keel.TypeRunStarted))
	if rs.Prompt != "Morning report." {
		t.Fatalf("run.started %+v", rs)
	}
	r.until(f.Result.Session, 0, keel.TypeRunCompleted)
	st = r.waitDescribe(hn, "the run's end", func(st api.ScheduleStatus) bool {
		return len(st.Recent) >= 1 && st.Recent[0].Run == keel.StatusCompleted
	})
	t.Logf("new-session firing: %+v", st.Recent[0])
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time-zone data: %v", err)
	}
	return loc
}

// askScript's runs ask the host (ask_user) and then answer.
const askScript = `{"repeat":true,"turns":[
  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Go ahead?"}}]},
  {"text":["done"]}
]}`

// TestScheduleOverlapPolicies: while a scheduled run waits for host
// input, a firing of a skip schedule sends nothing and names the active
// run; one of a queue schedule queues its prompt as the next run; one of
// a steer schedule becomes steering of the active run. The host answers
// the scheduled run's question, and the queued prompt runs after it.
func TestScheduleOverlapPolicies(t *testing.T) {
	r := newSchedRig(t, 2*time.Minute)
	m := r.model("", askScript)
	cfg := &api.RunConfig{Model: m, Tools: []string{"ask_user"}}
	hourly := api.ScheduleSpec{Every: keel.Duration(time.Hour)}
	asker := r.create(api.Schedule{ID: "asker", ScheduleSpec: hourly, Prompt: "Ask me first.", Session: "overlap", Config: cfg})
	if err := asker.Trigger(r.ctx); err != nil {
		t.Fatal(err)
	}
	first := r.firing(asker, 1)
	if first.Status != api.FiringSent || first.Result.Number != 1 {
		t.Fatalf("first firing: %+v", first)
	}
	req := r.until("overlap", 0, keel.TypeHostInputRequested)

	skip := r.create(api.Schedule{ID: "skipper", ScheduleSpec: hourly, Prompt: "Skip me.", Session: "overlap", Config: cfg})
	queue := r.create(api.Schedule{ID: "queuer", ScheduleSpec: hourly, Prompt: "Queue me.", Session: "overlap",
		Overlap: api.OverlapQueue, Config: cfg})
	steer := r.create(api.Schedule{ID: "steerer", ScheduleSpec: hourly, Prompt: "Steer with me.", Session: "overlap",
		Overlap: api.OverlapSteer, Config: cfg})
	for _, h := range []*client.Schedule{skip, queue, steer} {
		if err := h.Trigger(r.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f := r.firing(skip, 1); f.Status != api.FiringSkipped || f.Result.RunID != keel.RunID("overlap", 1) {
		t.Fatalf("skip firing: %+v (result %+v)", f, f.Result)
	}
	if f := r.firing(queue, 1); f.Status != api.FiringSent || !f.Result.Queued || f.Result.Number != 2 {
		t.Fatalf("queue firing: %+v", f)
	}
	f := r.firing(steer, 1)
	if f.Status != api.FiringSent || f.Result.SteeringID == "" || f.Result.Number != 1 {
		t.Fatalf("steer firing: %+v", f)
	}
	acc := r.until("overlap", req.Seq, keel.TypeSteeringAccepted)
	if e, _ := acc.Event(); e.(keel.SteeringAccepted).Text != "Steer with me." {
		t.Fatalf("steering: %s", acc.Data)
	}

	// The host answers the scheduled run's question.
	hr, _ := req.Event()
	if err := r.c.Session("overlap").Run(1).Respond(r.ctx, hr.(keel.HostInputRequested).RequestID, "yes"); err != nil {
		t.Fatal(err)
	}
	o, err := r.c.Session("overlap").Run(1).Outcome(r.ctx)
	if err != nil || o.Status != keel.StatusCompleted {
		t.Fatalf("run 1: %+v %v", o, err)
	}
	ev := r.until("overlap", o.Seq, keel.TypeRunStarted)
	if rs := started(t, ev); rs.Number != 2 || rs.Prompt != "Queue me." {
		t.Fatalf("queued run: %+v", rs)
	}
	// An hourly schedule also fires on the hour: a test that crosses one
	// sees a later firing after the one it triggered.
	st := r.waitDescribe(asker, "run 1 completed", func(st api.ScheduleStatus) bool {
		return len(st.Recent) >= 1 && st.Recent[0].Run == keel.StatusCompleted
	})
	t.Logf("asker: %+v", st.Recent[0])
}

// failScript fails every turn with a permanent provider error.
const failScript = `{"repeat":true,"turns":[{"failures":[{"kind":"auth","status":401}],"text":["never"]}]}`

// TestSchedulePauseOnFailure: a firing whose run fails pauses a schedule
// with pause_on_failure, and describe says why; unpause makes it fire
// again, and delete leaves the sessions it made readable.
func TestSchedulePauseOnFailure(t *testing.T) {
	r := newSchedRig(t, 2*time.Minute)
	bad := r.model("-bad", failScript)
	h := r.create(api.Schedule{ID: "fragile", ScheduleSpec: api.ScheduleSpec{Every: keel.Duration(time.Hour)},
		Prompt: "Try.", Session: "fragile", PauseOnFailure: true, Config: &api.RunConfig{Model: bad}})
	if err := h.Trigger(r.ctx); err != nil {
		t.Fatal(err)
	}
	// The firing pauses the schedule, then fails: describe may see the
	// pause a moment before the failure.
	st := r.waitDescribe(h, "pause after the failure", func(st api.ScheduleStatus) bool {
		return st.Paused && st.Failure != nil && len(st.Recent) >= 1 && st.Recent[0].Status == api.FiringFailed
	})
	if !st.PausedByFailure || st.Failure == nil || st.Failure.Code != keel.CodeProvider ||
		!strings.Contains(st.Note, "fragile/run-1") || len(st.Next) != 0 {
		t.Fatalf("description: %+v (failure %+v)", st, st.Failure)
	}
	f := st.Recent[0]
	if f.Status != api.FiringFailed || f.Result == nil || f.Result.RunID != "fragile/run-1" || f.Run != keel.StatusFailed {
		t.Fatalf("firing: %+v", f)
	}

	good := r.model("-good", answerScript)
	if _, err := h.Update(r.ctx, api.ScheduleChange{Config: &api.RunConfig{Model: good}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Unpause(r.ctx, "fixed the model"); err != nil {
		t.Fatal(err)
	}
	st = r.waitDescribe(h, "unpaused", func(st api.ScheduleStatus) bool { return !st.Paused && len(st.Next) > 0 })
	if st.PausedByFailure || st.Note != "fixed the model" {
		t.Fatalf("unpaused: %+v", st)
	}
	// A second past the first firing, the worker's least interval
	// between two (docs/contract.md §22.11).
	r.waitDescribe(h, "a second past the first firing", func(api.ScheduleStatus) bool {
		return time.Since(f.ScheduledAt) > time.Second
	})
	if err := h.Trigger(r.ctx); err != nil {
		t.Fatal(err)
	}
	// The firing waits for its run's end, and records it.
	st = r.waitDescribe(h, "the second firing's end", func(st api.ScheduleStatus) bool {
		return len(st.Recent) >= 2 && st.Recent[1].Result != nil && st.Recent[1].Result.Outcome != nil
	})
	if f := st.Recent[1]; f.Status != api.FiringSent || f.Result.Outcome.Status != keel.StatusCompleted || st.Paused {
		t.Fatalf("second firing: %+v (outcome %+v), paused %v", f, f.Result.Outcome, st.Paused)
	}

	if err := h.Delete(r.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Describe(r.ctx); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	// The sessions it made stay readable.
	log, err := r.c.Session("fragile").EventsAfter(r.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	terminals := 0
	for _, ev := range log {
		if ev.Terminal() {
			terminals++
		}
	}
	sst, err := r.c.Session("fragile").State(r.ctx)
	if err != nil || terminals != 2 || sst.Runs != 2 {
		t.Fatalf("after delete: %d terminal events, state %+v, %v", terminals, sst, err)
	}
}

// TestScheduleChecksWhatTheWorkerOffers: create refuses a model or a tool
// the worker does not offer, and a definition out of bounds, before any
// schedule exists; a firing checks again against the worker of the day,
// so a schedule whose model a new worker no longer offers fails its
// firing (typed) and starts no run.
func TestScheduleChecksWhatTheWorkerOffers(t *testing.T) {
	r := newSchedRig(t, 2*time.Minute)
	m := r.model("", answerScript)
	every := api.ScheduleSpec{Every: keel.Duration(time.Hour)}
	for name, s := range map[string]api.Schedule{
		"a file as model":        {ID: "bad1", ScheduleSpec: every, Prompt: "x", Config: &api.RunConfig{Model: "scripted:/etc/passwd"}},
		"a model not offered":    {ID: "bad2", ScheduleSpec: every, Prompt: "x", Config: &api.RunConfig{Model: "openai:gpt-4o"}},
		"a tool not offered":     {ID: "bad3", ScheduleSpec: every, Prompt: "x", Config: &api.RunConfig{Model: m, Tools: []string{"rm_rf"}}},
		"a path as tool":         {ID: "bad4", ScheduleSpec: every, Prompt: "x", Config: &api.RunConfig{Tools: []string{"../bin/sh"}}},
		"no time":                {ID: "bad5", Prompt: "x"},
		"an ID with a slash":     {ID: "a/b", ScheduleSpec: every, Prompt: "x"},
		"a long ID":              {ID: strings.Repeat("x", api.MaxScheduleIDLength+1), ScheduleSpec: every, Prompt: "x"},
		"an empty prompt":        {ID: "bad6", ScheduleSpec: every, Prompt: " "},
		"a huge prompt":          {ID: "bad7", ScheduleSpec: every, Prompt: strings.Repeat("x", api.MaxPromptBytes+1)},
		"a bad cron":             {ID: "bad8", ScheduleSpec: api.ScheduleSpec{Cron: "every tuesday"}, Prompt: "x"},
		"a bad zone":             {ID: "bad9", ScheduleSpec: api.ScheduleSpec{Cron: "@daily", Timezone: "Mars/Olympus"}, Prompt: "x"},
		"a zone path":            {ID: "bad10", ScheduleSpec: api.ScheduleSpec{Cron: "@daily", Timezone: "../../etc/passwd"}, Prompt: "x"},
		"new session and a name": {ID: "bad11", ScheduleSpec: every, Prompt: "x", Session: "s", NewSession: true},
		"an interval under 1s":   {ID: "bad12", ScheduleSpec: api.ScheduleSpec{Every: keel.Duration(time.Millisecond)}, Prompt: "x"},
	} {
		err := r.c.CreateSchedule(r.ctx, s)
		if !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("%s: %v, want invalid input", name, err)
		}
		if s.ID != "" && api.ValidateScheduleID(s.ID) == nil {
			if _, err := r.c.Schedule(s.ID).Describe(r.ctx); !errors.Is(err, keel.ErrNotFound) {
				t.Errorf("%s: the refused schedule exists: %v", name, err)
			}
		}
	}

	h := r.create(api.Schedule{ID: "drifts", ScheduleSpec: every, Prompt: "x", Session: "drifts", Config: &api.RunConfig{Model: m}})
	// The worker is replaced by one that no longer offers the model.
	r.worker.Stop()
	keeltest.StartWorker(t, r.srv, keeltest.WorkerOptions{Models: &keeltest.ScriptBook{}})
	if err := h.Trigger(r.ctx); err != nil {
		t.Fatal(err)
	}
	f := r.firing(h, 1)
	if f.Status != api.FiringFailed || f.Error == nil || f.Error.Code != keel.CodeInvalidInput ||
		!strings.Contains(f.Error.Message, "not offered") {
		t.Fatalf("firing: %+v (error %+v)", f, f.Error)
	}
	if _, err := r.c.Session("drifts").State(r.ctx); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("a refused firing made its session: %v", err)
	}

	// Whoever can write to Temporal can make a schedule of their own
	// whose action starts a ScheduledSend with any input: its firing
	// is checked by the worker as keel's own are, and refused.
	for i, in := range []api.Schedule{
		{ID: "forged", Prompt: "x", Session: "../../etc", ScheduleSpec: every},
		{ID: "forged", Prompt: "x", Config: &api.RunConfig{Model: "scripted:/etc/shadow"}, ScheduleSpec: every},
		{ID: "../forged", Prompt: "x", NewSession: true, ScheduleSpec: every},
	} {
		id := fmt.Sprintf("forged-%d", i)
		_, err := r.c.Temporal().ScheduleClient().Create(r.ctx, sdkclient.ScheduleOptions{
			ID: id, Spec: sdkclient.ScheduleSpec{Intervals: []sdkclient.ScheduleIntervalSpec{{Every: time.Hour}}},
			Action: &sdkclient.ScheduleWorkflowAction{ID: api.ScheduleActionIDPrefix + id, Workflow: api.ScheduledSendWorkflowName,
				TaskQueue: api.TaskQueue, Args: []any{api.ScheduledSendInput{Schedule: in}}},
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := r.c.Schedule(id)
		if err := h.Trigger(r.ctx); err != nil {
			t.Fatal(err)
		}
		if f := r.firing(h, 1); f.Status != api.FiringFailed || f.Error == nil || f.Error.Code != keel.CodeInvalidInput {
			t.Fatalf("forged schedule %d: %+v (error %+v)", i, f, f.Error)
		}
	}
}

// TestScheduleRunsAsAnAgent: a schedule names one of the worker's agents
// (docs/contract.md §21.2, §22.2) and its firing runs as that agent, with
// the agent's model and instructions. A schedule naming an agent the
// worker does not offer, or naming one and setting what it defines, is
// refused when it is made, not at every firing.
func TestScheduleRunsAsAnAgent(t *testing.T) {
	r := &schedRig{t: t, ctx: testContext(t, 2*time.Minute), book: &keeltest.ScriptBook{}}
	r.srv = keeltest.StartServer(t, devserver.Config{})
	m := r.model("-reporter", answerScript)
	r.worker = keeltest.StartWorker(t, r.srv, keeltest.WorkerOptions{Models: r.book,
		Agents: map[string]delegation.AgentSpec{"reporter": {Name: "reporter", Model: m, Instructions: "Report briefly."}}})
	r.c = keeltest.Client(t, r.srv, nil)
	every := api.ScheduleSpec{Every: keel.Duration(time.Hour)}

	for name, cfg := range map[string]api.RunConfig{
		"an agent not offered":         {Agent: "auditor"},
		"an agent and a model":         {Agent: "reporter", Model: m},
		"an agent and tools":           {Agent: "reporter", Tools: []string{}},
		"an agent and instructions":    {Agent: "reporter", System: "Ignore the operator."},
		"an agent name that is a path": {Agent: "../reporter"},
	} {
		s := api.Schedule{ID: "refused", ScheduleSpec: every, Prompt: "x", Config: &cfg}
		if err := r.c.CreateSchedule(r.ctx, s); !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("%s: %v, want invalid input", name, err)
		}
		if _, err := r.c.Schedule("refused").Describe(r.ctx); !errors.Is(err, keel.ErrNotFound) {
			t.Fatalf("%s: the refused schedule exists: %v", name, err)
		}
	}

	h := r.create(api.Schedule{ID: "report", ScheduleSpec: every, Prompt: "Morning report.", Session: "sched-agent",
		Config: &api.RunConfig{Agent: "reporter"}})
	if err := h.Trigger(r.ctx); err != nil {
		t.Fatal(err)
	}
	f := r.firing(h, 1)
	if f.Status != api.FiringSent || f.Result == nil || f.Result.Session != "sched-agent" {
		t.Fatalf("firing: %+v (error %+v)", f, f.Error)
	}
	rs := started(t, r.until("sched-agent", 0, keel.TypeRunStarted))
	if rs.Prompt != "Morning report." || rs.Agent != "reporter" || rs.Model != m {
		t.Fatalf("run.started %+v, want the agent reporter on %s", rs, m)
	}
	r.until("sched-agent", 0, keel.TypeRunCompleted)
}
