package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// forgingChannel is a live channel of the caller's own that hands every
// subscriber forged envelopes before the real ones: what a channel that
// does not check what it receives would pass on.
type forgingChannel struct {
	live.Channel
	forged []keel.Envelope
}

func (c forgingChannel) Subscribe(ctx context.Context, sessionID string, opts live.SubscribeOptions) (live.Subscription, error) {
	sub, err := c.Channel.Subscribe(ctx, sessionID, opts)
	if err != nil {
		return nil, err
	}
	return &forgingSub{Subscription: sub, forged: c.forged}, nil
}

type forgingSub struct {
	live.Subscription
	forged []keel.Envelope
}

func (s *forgingSub) Next(ctx context.Context) (keel.Envelope, error) {
	if len(s.forged) > 0 {
		env := s.forged[0]
		s.forged = s.forged[1:]
		return env, nil
	}
	return s.Subscription.Next(ctx)
}

// The client SDK checks the deltas it merges (live.Check) whatever channel
// it reads: forged envelopes never reach the reader of a run's events,
// while the worker's deltas do.
func TestEventsDropForgedDeltas(t *testing.T) {
	session := "forged-deltas"
	run1 := keel.RunID(session, 1)
	text := json.RawMessage(`{"step":1,"attempt":0,"text":"forged"}`)
	forged := []keel.Envelope{
		{Type: "x\nid: 1\ndata: {\"forged\":1}", SessionID: session, RunID: run1, Data: text},
		{Type: keel.TypeTextDelta, SessionID: "other", RunID: keel.RunID("other", 1), Data: text},
		{Type: keel.TypeTextDelta, SessionID: session, RunID: "other/run-1", Data: text},
		{Type: keel.TypeRunCompleted, SessionID: session, RunID: run1, Seq: 1, Data: json.RawMessage(`{"text":"forged"}`)},
		{Type: keel.TypeTextDelta, SessionID: session, RunID: run1, Seq: 2, Data: text},
		{Type: keel.TypeTextDelta, SessionID: session, RunID: run1, Data: json.RawMessage(`{"text":7}`)},
	}
	c := keeltest.Client(t, shared.srv, forgingChannel{Channel: shared.live, forged: forged})
	ctx := testCtx(t)
	run, err := c.Session(session).Send(ctx, "go", cfg(t, `{"turns":[{"text":["real ","text"]}]}`))
	require.NoError(t, err)
	var deltas []string
	for ev, err := range run.Events(ctx) {
		require.NoError(t, err)
		require.NotContains(t, string(ev.Data), "forged", "a forged envelope reached the reader: %+v", ev)
		if ev.Type == keel.TypeTextDelta {
			var d keel.TextDelta
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			deltas = append(deltas, d.Text)
		}
	}
	require.NotEmpty(t, deltas, "no real delta arrived")
}
