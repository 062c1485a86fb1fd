// Package livetest holds what the tests of the live channel share: test
// events, the steps a subscription yields, the forged envelopes no
// subscriber may receive, and the behaviour every Channel must have
// (RunChannelTests), run on the in-process channel by live's own tests
// and on NATS by the server module's (docs/ARCHITECTURE.md, "Modules").
package livetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

// Guard bounds every wait in these tests. It only turns a hang into a
// failure; no test waits for it to pass.
const Guard = 10 * time.Second

// GuardCtx is the test's context bounded by Guard.
func GuardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Guard)
	t.Cleanup(cancel)
	return ctx
}

// Delta returns the i-th test event of a session: a text delta whose text
// is i.
func Delta(sessionID string, i int) keel.Envelope {
	return PaddedDelta(sessionID, i, 0)
}

// PaddedDelta is Delta with pad bytes of text after the index.
func PaddedDelta(sessionID string, i, pad int) keel.Envelope {
	data, err := json.Marshal(keel.TextDelta{Step: 1, Text: strconv.Itoa(i) + strings.Repeat(" ", pad)})
	if err != nil {
		panic(err)
	}
	return keel.Envelope{
		Type:      keel.TypeTextDelta,
		SessionID: sessionID,
		RunID:     keel.RunID(sessionID, 1),
		At:        time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		AfterSeq:  7,
		Data:      data,
	}
}

// IndexOf returns the index of a Delta or PaddedDelta.
func IndexOf(env keel.Envelope) (int, error) {
	var d keel.TextDelta
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimRight(d.Text, " "))
}

// Step is what one Next call returned, in a comparable form: the event's
// index, or the number of events a *live.LaggedError reported, or the
// error.
type Step struct {
	Event  int
	Missed int
	Err    string
}

// StepOf is the Step of a Next call's result.
func StepOf(t testing.TB, env keel.Envelope, err error) Step {
	t.Helper()
	var lagged *live.LaggedError
	switch {
	case errors.As(err, &lagged):
		return Step{Missed: lagged.Missed}
	case err != nil:
		return Step{Err: err.Error()}
	}
	i, perr := IndexOf(env)
	if perr != nil {
		t.Fatalf("event data %q is not an index", env.Data)
	}
	return Step{Event: i}
}

// Drain reads n steps, failing the test if any read waits longer than
// Guard.
func Drain(t testing.TB, next func(context.Context) (keel.Envelope, error), n int) []Step {
	t.Helper()
	var got []Step
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), Guard)
		env, err := next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next: no event after %v; got so far %v", Guard, got)
		}
		got = append(got, StepOf(t, env, err))
	}
	return got
}

// Events are the steps of events from to to.
func Events(from, to int) []Step {
	var s []Step
	for i := from; i <= to; i++ {
		s = append(s, Step{Event: i})
	}
	return s
}

// Lag is the step of a report of n lost events.
func Lag(n int) Step { return Step{Missed: n} }

// Closed is the step of live.ErrClosed.
func Closed() Step { return Step{Err: live.ErrClosed.Error()} }

// Concat joins steps.
func Concat(parts ...[]Step) []Step {
	var s []Step
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

// Subscribe subscribes to sessionID for the rest of the test.
func Subscribe(t testing.TB, ch live.Channel, sessionID string, buffer int) live.Subscription {
	t.Helper()
	sub, err := ch.Subscribe(t.Context(), sessionID, live.SubscribeOptions{Buffer: buffer})
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", sessionID, err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

// Publish publishes the events from to to of sessionID.
func Publish(t testing.TB, p live.Publisher, sessionID string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := p.Publish(t.Context(), Delta(sessionID, i)); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
}

// PublishUnblocked publishes from another goroutine and fails the test if
// the publisher does not finish: it must never wait for a subscriber.
func PublishUnblocked(t testing.TB, p live.Publisher, sessionID string, from, to int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for i := from; i <= to; i++ {
			if err := p.Publish(context.Background(), Delta(sessionID, i)); err != nil {
				done <- fmt.Errorf("Publish %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(Guard):
		t.Fatalf("publisher blocked: %d publishes did not finish while the subscriber read nothing", to-from+1)
	}
}

// Expect reads len(want) steps from sub and compares them with want.
func Expect(t testing.TB, sub live.Subscription, want []Step) {
	t.Helper()
	got := Drain(t, sub.Next, len(want))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// ExpectNothing asserts that no event is waiting. It can only be trusted
// once the subscriber has handled everything sent to it (Rig.Settle).
func ExpectNothing(t testing.TB, sub live.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if env, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next = %+v, %v; want nothing", env, err)
	}
}

// Wait receives from c, failing the test if nothing comes within Guard.
func Wait[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(Guard):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
