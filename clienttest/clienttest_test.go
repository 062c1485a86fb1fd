package clienttest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/clienttest"
)

// The client reads the fake as it reads a session: the run's events end
// with its terminal event, state, history and the log agree, and a second
// run continues the sequence.
func TestRunsReadAsASessionsRuns(t *testing.T) {
	ctx := t.Context()
	fake := clienttest.New(clienttest.Text("All done."))
	c := fake.Client()
	defer c.Close()
	s := c.Session("s1")
	run, err := s.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: "scripted:x"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "s1/run-1" || run.BaseSeq != 0 {
		t.Fatalf("run %s from %d", run.ID, run.BaseSeq)
	}
	var types []string
	for ev, err := range run.Events(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	want := []string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeRunCompleted}
	if len(types) != len(want) || types[0] != want[0] || types[2] != want[2] {
		t.Fatalf("events %v, want %v", types, want)
	}
	out, err := run.Outcome(ctx)
	if err != nil || out.Text != "All done." || out.Seq != 3 {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	st, err := s.State(ctx)
	if err != nil || st.State != keel.StateCompleted || st.LastSeq != 3 || st.Runs != 1 || st.Revision != 1 {
		t.Fatalf("state %+v, %v", st, err)
	}
	hist, err := s.History(ctx, 0, 0)
	if err != nil || hist.Total != 2 || hist.Messages[1].Content != "All done." {
		t.Fatalf("history %+v, %v", hist, err)
	}
	run2, err := s.Send(ctx, "again")
	if err != nil || run2.Number != 2 || run2.BaseSeq != 3 {
		t.Fatalf("second run %+v, %v", run2, err)
	}
	all, err := s.EventsAfter(ctx, 0)
	if err != nil || len(all) != 6 {
		t.Fatalf("log of %d events, %v", len(all), err)
	}
	// The first run's outcome is read from the log once a later run ran.
	if out, err := s.Run(1).Outcome(ctx); err != nil || out.Text != "All done." {
		t.Fatalf("first run's outcome %+v, %v", out, err)
	}
	if p := fake.Prompts(); len(p) != 2 || p[0].Config.Model != "scripted:x" || p[1].Config.Model != api.DefaultModel {
		t.Fatalf("prompts %+v", p)
	}
}

// A session's follower started before a send sees the run's events.
func TestSessionEventsFollowLaterRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := clienttest.New(clienttest.Text("ok")).Client()
	s := c.Session("s2")
	if _, err := s.Send(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	seen := make(chan keel.Envelope)
	go func() {
		for ev, err := range s.EventsFrom(ctx, 3) {
			if err != nil {
				return
			}
			seen <- ev
		}
	}()
	if _, err := s.Send(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	for want := int64(4); want <= 6; want++ {
		if ev := <-seen; ev.Seq != want {
			t.Fatalf("event %d, want %d", ev.Seq, want)
		}
	}
}

// Failures and refusals are the client's typed errors.
func TestErrors(t *testing.T) {
	ctx := t.Context()
	fake := clienttest.New(func(p clienttest.Prompt) clienttest.Reply {
		if p.Text == "stop" {
			return clienttest.Reply{Err: keel.ErrCancelled}
		}
		return clienttest.Reply{Err: &keel.Error{Code: keel.CodeMaxSteps, Message: "too many steps"}}
	})
	c := fake.Client()
	s := c.Session("s3")
	if _, err := s.Send(ctx, ""); !errors.Is(err, keel.ErrInvalidInput) {
		t.Errorf("empty prompt: %v", err)
	}
	if _, err := c.Session("p--researcher-1-0123456789abcdef").Send(ctx, "hi"); !errors.Is(err, keel.ErrNotAccepting) {
		t.Errorf("child ID: %v", err)
	}
	run, err := s.Send(ctx, "go")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Outcome(ctx); !errors.Is(err, keel.ErrMaxSteps) {
		t.Errorf("failed run: %v", err)
	}
	run, err = s.Send(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Outcome(ctx); !errors.Is(err, keel.ErrCancelled) {
		t.Errorf("cancelled run: %v", err)
	}
	if err := run.Steer(ctx, "more"); !errors.Is(err, keel.ErrNotAccepting) {
		t.Errorf("steer: %v", err)
	}
	if err := run.Cancel(ctx); err != nil {
		t.Errorf("cancel: %v", err)
	}
	if _, err := c.Session("nobody").State(ctx); !errors.Is(err, keel.ErrNotFound) {
		t.Errorf("state of no session: %v", err)
	}
	if _, _, err := s.Fork(ctx, api.Point{Run: 1}, "f1"); !errors.Is(err, clienttest.ErrUnsupported) {
		t.Errorf("fork: %v", err)
	}
}

// SendOnce under a key taken before starts nothing and answers that
// send's run.
func TestSendOnce(t *testing.T) {
	ctx := t.Context()
	fake := clienttest.New(clienttest.Text("ok"))
	s := fake.Client().Session("s4")
	first, err := s.SendOnce(ctx, "k1", "hello")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.SendOnce(ctx, "k1", "hello")
	if err != nil || !again.Repeated || again.Number != first.Number {
		t.Fatalf("again: %+v, %v", again, err)
	}
	if n := len(fake.Prompts()); n != 1 {
		t.Fatalf("%d prompts", n)
	}
}

// What the fake does not stand in for fails with ErrUnsupported; nothing
// panics.
func TestUnsupported(t *testing.T) {
	ctx := t.Context()
	c := clienttest.New(clienttest.Text("ok")).Client()
	s := c.Session("s5")
	if _, err := s.Send(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	sched := api.Schedule{ID: "daily", ScheduleSpec: api.ScheduleSpec{Cron: "0 9 * * *"}, Prompt: "hi"}
	for name, call := range map[string]func() error{
		"Fork":             func() error { _, _, err := s.Fork(ctx, api.Point{Run: 1}, "f1"); return err },
		"Rewind":           func() error { _, err := s.Rewind(ctx, api.Point{Run: 1}); return err },
		"Forks":            func() error { _, err := s.Forks(ctx); return err },
		"Shutdown":         func() error { _, err := c.Shutdown(ctx); return err },
		"MoveIdleSessions": func() error { _, err := c.MoveIdleSessions(ctx); return err },
		"CreateSchedule":   func() error { return c.CreateSchedule(ctx, sched) },
		"Schedules":        func() error { _, _, err := c.Schedules(ctx, client.ScheduleListOptions{}); return err },
		"Schedule.Get":     func() error { _, err := c.Schedule("daily").Get(ctx); return err },
		"Schedule.Describe": func() error {
			_, err := c.Schedule("daily").Describe(ctx)
			return err
		},
		"Schedule.Pause":   func() error { return c.Schedule("daily").Pause(ctx, "") },
		"Schedule.Trigger": func() error { return c.Schedule("daily").Trigger(ctx) },
		"Schedule.Delete":  func() error { return c.Schedule("daily").Delete(ctx) },
	} {
		if err := call(); !errors.Is(err, clienttest.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
}
