package client_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
)

// natsStack is a server whose worker publishes deltas to NATS on its own
// connection; clients subscribe on theirs.
func natsStack(t *testing.T, script string, tools ...string) (srv *devserver.Server, url string, opt client.SendOption) {
	srv = keeltest.StartServer(t, devserver.Config{})
	ns := keeltest.StartNATSServer(t)
	book := &keeltest.ScriptBook{}
	model := book.Add(t, "s", script)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book, Tools: controlTools(),
		Live: keeltest.DialNATS(t, ns.ClientURL(), live.NATSOptions{})})
	return srv, ns.ClientURL(), client.WithConfig(api.RunConfig{Model: model, Tools: tools})
}

func natsClient(t *testing.T, srv *devserver.Server, url string, buffer int) *client.Client {
	c, err := client.Dial(context.Background(), client.Options{Temporal: keeltest.Dial(t, srv),
		Live: keeltest.DialNATS(t, url, live.NATSOptions{}), LiveBuffer: buffer,
		DataConverter: store.NewDataConverter(keeltest.Codec(t, srv))})
	require.NoError(t, err)
	return c
}

const streamScript = `{"chunk_delay":"2ms","turns":[
  {"text":["t1 ","t2 ","t3 ","t4 ","t5 ","t6 ","t7 ","t8 ","t9 ","t10 "],
   "tool_calls":[{"id":"e","name":"echo","arguments":{"prompt":"x"}}]},
  {"text":["u1 ","u2 ","u3 ","u4 ","u5 ","u6 ","u7 ","u8 ","u9 ","u10 "]}]}`

// Deltas cross from the worker's NATS connection to the client's, ordered
// after the durable event they follow.
func TestDeltasAcrossConnections(t *testing.T) {
	srv, url, opt := natsStack(t, streamScript, "echo")
	c := natsClient(t, srv, url, 0)
	ctx := testCtx(t)
	run, err := c.Session("nats-deltas").Send(ctx, "go", opt)
	require.NoError(t, err)
	var last int64
	deltas := 0
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		if ev.Durable() {
			require.Equal(t, last+1, ev.Seq)
			last = ev.Seq
			continue
		}
		deltas++
		require.LessOrEqual(t, ev.AfterSeq, last, "a delta came before the durable event it follows")
	}
	// The first deltas may precede the subscription; most arrive.
	require.Greater(t, deltas, 10)
}

// A client that disconnects mid-run and resumes with EventsFrom(last seen)
// sees every durable event exactly once.
func TestResumeWithEventsFrom(t *testing.T) {
	srv, url, opt := natsStack(t, `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"resume"}}]},{"text":["done"]}]}`, "gate")
	ctx := testCtx(t)
	first := natsClient(t, srv, url, 0)
	sess := first.Session("resume")
	_, err := sess.Send(ctx, "go", opt)
	require.NoError(t, err)

	var seen []int64
	for ev, err := range sess.EventsFrom(ctx, 0) {
		require.NoError(t, err)
		if ev.Durable() {
			seen = append(seen, ev.Seq)
		}
		if ev.Type == keel.TypeToolStarted {
			break // the client goes away here
		}
	}
	first.Close()
	shared.gates.open("resume")

	second := natsClient(t, srv, url, 0)
	for ev, err := range second.Session("resume").EventsFrom(ctx, seen[len(seen)-1]) {
		require.NoError(t, err)
		if ev.Durable() {
			seen = append(seen, ev.Seq)
		}
		if ev.Terminal() {
			break
		}
	}
	for i, s := range seen {
		require.Equal(t, int64(i+1), s, "durable events skipped or repeated: %v", seen)
	}
	all, err := second.Session("resume").EventsAfter(ctx, 0)
	require.NoError(t, err)
	require.Len(t, seen, len(all))
}

// A reader that stops reading never slows the run; when it resumes, Lagged
// reports exactly the deltas it lost, and durable events are all there.
func TestSlowSubscriberLagsExactly(t *testing.T) {
	// The deltas come after a gate, so the subscription exists before the
	// first one is published and every loss is counted.
	srv, url, opt := natsStack(t, `{"turns":[
	  {"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"slow"}}]},
	  {"text":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17","18","19","20"]}]}`, "gate")
	const buffer, total = 4, 20
	slow := natsClient(t, srv, url, buffer)
	other := natsClient(t, srv, url, 0)
	ctx := testCtx(t)
	run, err := slow.Session("slow").Send(ctx, "go", opt)
	require.NoError(t, err)

	next, stop := iter.Pull2(run.Events(ctx))
	defer stop()
	durable := 0
	for {
		ev, err, ok := next()
		require.True(t, ok)
		require.NoError(t, err)
		if ev.Durable() {
			durable++
		}
		if ev.Type == keel.TypeToolStarted {
			break
		}
	}
	// Stall: the run streams all its deltas and ends while this reader
	// reads nothing.
	shared.gates.open("slow")
	out, err := other.Session("slow").Run(run.Number).Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StatusCompleted, out.Status)

	received, missed := 0, 0
	for {
		ev, err, ok := next()
		if !ok {
			break
		}
		var lag *live.LaggedError
		if errors.As(err, &lag) {
			missed += lag.Missed
			continue
		}
		require.NoError(t, err)
		switch {
		case ev.Durable():
			durable++
		case ev.Type == keel.TypeTextDelta:
			received++
		}
	}
	require.Positive(t, missed, "a stalled reader with a %d-delta buffer must lag", buffer)
	require.Equal(t, total, received+missed, "every delta is either received or counted missed")
	all, err := other.Session("slow").EventsAfter(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, len(all), durable, "every durable event still arrives")
}

// The events up to a hand-over are read from the state the closed
// execution handed on, in history, without asking a worker: the next
// execution's first task may wait a second (Temporal's minimum
// continue-as-new interval) or, here, never come. A follower that was
// there when the run ended and one that comes after the worker stopped
// both get the whole run (docs/contract.md §14.2).
func TestRunEndIsReadFromTheHandOver(t *testing.T) {
	srv := keeltest.StartServer(t, devserver.Config{})
	w := keeltest.StartWorker(t, srv, keeltest.WorkerOptions{
		Script: `{"chunk_delay":"20ms","turns":[{"text":["a","b","c","d","e","f","g","h","i","j"]}]}`})
	c := keeltest.Client(t, srv, nil)
	ctx := testCtx(t)
	run, err := c.Session("handed-on").Send(ctx, "go")
	require.NoError(t, err)
	types := func() ([]string, error) {
		// Without a worker, a query waits until this context ends.
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var out []string
		for ev, err := range run.Events(ctx) {
			if err != nil {
				return out, err
			}
			out = append(out, ev.Type)
		}
		return out, nil
	}
	type result struct {
		types []string
		err   error
	}
	followed := make(chan result, 1)
	go func() {
		got, err := types()
		followed <- result{got, err}
	}()
	o, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "abcdefghij", o.Text)
	w.Stop()

	want := []string{keel.TypeRunStarted, keel.TypeStepStarted, keel.TypeUsageUpdated, keel.TypeModelCallCompleted, keel.TypeRunCompleted}
	r := <-followed
	require.NoError(t, r.err, "the follower that was there")
	require.Equal(t, want, r.types, "the follower that was there")
	got, err := types()
	require.NoError(t, err, "a follower after the worker stopped")
	require.Equal(t, want, got, "a follower after the worker stopped")
}
