package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// TestKillDevDuringFork kills -9 the whole `keel dev` at the points where a
// fork or a rewind could be left half done, held there by the test's
// pause points (devpause_test.go) rather than by timing, then starts it
// again on the same data directory and port, so the calls cut off by the
// kill go on against the new server as a client's retries would
// (docs/contract.md §19.4):
//
//   - a fork whose fork_point query was answered, before its start: no
//     session under its ID at the kill; the call, resumed, makes it;
//   - a fork whose workflow start the server accepted (its caller not
//     told) and whose first workflow task a worker took but never
//     completed, checked in the fork's history: the fork is whole after
//     the restart, and the call, resumed, and the same fork asked again
//     answer that one session;
//   - a rewind whose update a worker took in a workflow task it never
//     completed: not in the log at the kill; the call, resumed, applies
//     it once;
//   - a rewind that returned, then a kill: once;
//   - a rewind whose update completed, its caller not told: the call,
//     resumed under its update ID, answers it without applying it again.
//
// Each fork's log is one session.forked at seq 1 and its history the
// source's; the source's log stays dense with one session.rewound per
// rewind; the fork runs on; every object in the store is intact.
func TestKillDevDuringFork(t *testing.T) {
	rig := newDevKillRig(t, 6*time.Minute)
	ctx := rig.ctx
	rig.samePort()
	p := rig.start("query:" + api.QueryForkPoint)
	// One client for the whole test: the calls a kill cuts off go on on
	// it against the restarted server, on the same port.
	c := rig.dial(p)
	defer c.Close()
	src := c.Session("fork-kill-src")
	for i := 1; i <= 2; i++ {
		run, err := src.Send(ctx, fmt.Sprintf("prompt %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Outcome(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before, err := src.History(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// events lists the events of the current execution of workflow id
	// in Temporal's history (no worker involved).
	events := func(id string) []enumspb.EventType {
		t.Helper()
		var out []enumspb.EventType
		it := c.Temporal().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s: %v", id, err)
			}
			out = append(out, ev.GetEventType())
		}
		return out
	}
	count := func(evs []enumspb.EventType, typ enumspb.EventType) (n int) {
		for _, e := range evs {
			if e == typ {
				n++
			}
		}
		return n
	}
	// restart kills keel dev where it holds a call and starts it again
	// with pauses armed.
	restart := func(pauses ...string) {
		t.Helper()
		p.kill()
		p = rig.start(pauses...)
	}
	// retried asks for the fork into id again, as its caller would after
	// the kill, and checks there is one session under id, whole: its
	// parent the source at run 2, its log one session.forked at seq 1,
	// its history the source's.
	retried := func(id string) {
		t.Helper()
		fork, origin, err := src.Fork(ctx, api.Point{Run: 2}, id)
		if err != nil || origin.Source != src.ID() || origin.Run != 2 {
			t.Fatalf("the fork into %s again: %+v (%v)", id, origin, err)
		}
		st, err := fork.State(ctx)
		if err != nil || st.Parent == nil || *st.Parent != origin {
			t.Fatalf("%s: parent %+v (%v), want %+v", id, st, err, origin)
		}
		log, err := fork.EventsAfter(ctx, 0)
		if err != nil || len(log) != 1 || log[0].Type != keel.TypeSessionForked || log[0].Seq != 1 {
			t.Fatalf("%s's log: %v (%v); want one session.forked", id, log, err)
		}
		hist, err := fork.History(ctx, 0, 0)
		if err != nil || fmt.Sprint(hist.Messages) != fmt.Sprint(before.Messages) || hist.Revision != before.Revision {
			t.Fatalf("%s's history (%v) is not the source's", id, err)
		}
	}
	type forked struct {
		origin api.ForkOrigin
		err    error
	}
	fork := func(id string) chan forked {
		done := make(chan forked, 1)
		go func() {
			_, origin, err := src.Fork(ctx, api.Point{Run: 2}, id)
			done <- forked{origin, err}
		}()
		return done
	}
	// cutOff waits for the call the kill cut off. The client asks again
	// within its call's own deadline, which a restart can outlast: then
	// the call fails, and the caller's retry (retried) decides.
	cutOff := func(what string, done chan forked) bool {
		t.Helper()
		got := <-done
		if got.err != nil {
			t.Logf("%s: the call cut off by the kill failed: %v", what, got.err)
			return false
		}
		if got.origin.Source != src.ID() || got.origin.Run != 2 {
			t.Fatalf("%s: the call cut off by the kill answered %+v", what, got.origin)
		}
		t.Logf("%s: the call cut off by the kill went on after the restart and answered", what)
		return true
	}

	// 1. The fork's point read, its start not sent: not at all.
	done := fork("fork-kill-query")
	p.waitPaused(t, ctx, "query:"+api.QueryForkPoint)
	if _, err := c.Temporal().DescribeWorkflowExecution(ctx, "fork-kill-query", ""); !errors.As(err, new(*serviceerror.NotFound)) {
		t.Fatalf("fork-kill-query exists at the kill: %v", err)
	}
	restart("start:fork-kill-start", "first-task:fork-kill-start")
	if !cutOff("fork killed before its start", done) {
		if _, err := c.Session("fork-kill-query").State(ctx); !errors.Is(err, keel.ErrNotFound) {
			t.Fatalf("fork-kill-query after the restart: %v; want none", err)
		}
	}
	retried("fork-kill-query")

	// 2. The fork's start accepted, its caller not told, its first
	// workflow task taken and never completed: whole after the restart,
	// by itself.
	done = fork("fork-kill-start")
	p.waitPaused(t, ctx, "start:fork-kill-start")
	p.waitPaused(t, ctx, "first-task:fork-kill-start")
	if evs := events("fork-kill-start"); evs[0] != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED ||
		count(evs, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) != 0 {
		t.Fatalf("fork-kill-start at the kill: %v; want started, no workflow task completed", evs)
	}
	restart("update-task:" + api.UpdateRewind)
	cutOff("fork killed before its first task completed", done)
	if st, err := c.Session("fork-kill-start").State(ctx); err != nil || st.Parent == nil || st.Parent.Source != src.ID() {
		t.Fatalf("fork-kill-start after the restart, before any retry: %+v (%v)", st, err)
	}
	retried("fork-kill-start")

	// rewinds counts the source's session.rewound events, checking its
	// log is dense.
	rewinds := func() int {
		t.Helper()
		log, err := src.EventsAfter(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, ev := range log {
			if ev.Seq != int64(i+1) {
				t.Fatalf("the source's log is not dense at %d: seq %d", i, ev.Seq)
			}
			if ev.Type == keel.TypeSessionRewound {
				n++
			}
		}
		return n
	}
	type rewound struct {
		res api.RewindResult
		err error
	}
	rewind := func(to int) chan rewound {
		done := make(chan rewound, 1)
		go func() {
			res, err := src.Rewind(ctx, api.Point{Run: to})
			done <- rewound{res, err}
		}()
		return done
	}

	// 3. A rewind (to run 2, where the session is) taken by a worker in a
	// workflow task that never completes: not in history at the kill.
	r3 := rewind(2)
	p.waitPaused(t, ctx, "update-task:"+api.UpdateRewind)
	if n := count(events(src.ID()), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED); n != 0 {
		t.Fatalf("%d updates accepted before the rewind's task completed", n)
	}
	restart()
	if got := <-r3; got.err != nil || got.res.FromRun != 2 || got.res.Revision != before.Revision+1 {
		t.Fatalf("the rewind killed in its task, resumed: %+v", got)
	}
	if n := rewinds(); n != 1 {
		t.Fatalf("%d session.rewound after one rewind killed in its task", n)
	}
	// Killed right after: still once.
	restart("update-done:" + api.UpdateRewind)
	if n := rewinds(); n != 1 {
		t.Fatalf("%d session.rewound after a kill that followed one rewind", n)
	}

	// 4. A rewind (to run 1) completed, its caller not told: the call,
	// resumed under its update ID, is not applied again.
	r4 := rewind(1)
	p.waitPaused(t, ctx, "update-done:"+api.UpdateRewind)
	evs := events(src.ID())
	if count(evs, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) != 2 || count(evs, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED) != 2 {
		t.Fatalf("the source's history at the kill: %v; want both rewinds completed", evs)
	}
	restart()
	got := <-r4
	if got.err != nil || got.res.FromRun != 2 || got.res.Revision != before.Revision+2 ||
		got.res.Messages <= 0 || got.res.Messages >= len(before.Messages) {
		t.Fatalf("the rewind killed before its answer, resumed: %+v", got)
	}
	if n := rewinds(); n != 2 {
		t.Fatalf("%d session.rewound after two rewinds", n)
	}
	after, err := src.History(ctx, 0, 0)
	if err != nil || fmt.Sprint(after.Messages) != fmt.Sprint(before.Messages[:got.res.Messages]) || after.Revision != before.Revision+2 {
		t.Fatalf("the source's history after the rewinds: %+v (%v)", after, err)
	}

	// A fork runs on after the restarts.
	run, err := c.Session("fork-kill-start").Send(ctx, "on the fork")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Outcome(ctx); err != nil || out.Status != keel.StatusCompleted {
		t.Fatalf("the fork's run: %+v, %v", out, err)
	}
	checkStoreIntact(t, ctx, rig.st, rig.storeDir)
}
