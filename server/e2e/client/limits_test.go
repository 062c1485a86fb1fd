package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// Over a real server the workflows' limit errors reach the SDK typed: a
// prompt over api.MaxPromptBytes and a steer beyond api.MaxStagedSteers
// (docs/contract.md §18), and neither changes the session: the prompt
// never ran, the run staged only what it accepted.
func TestLimitErrorsAreTyped(t *testing.T) {
	ctx := testCtx(t)
	// The shared worker has no content store, so this client keeps every
	// value in Temporal too.
	c, err := client.Dial(ctx, client.Options{Temporal: shared.tc, Live: shared.live})
	require.NoError(t, err)
	_, err = c.Session("limits-big-prompt").Send(ctx, strings.Repeat("x", api.MaxPromptBytes+1))
	require.ErrorIs(t, err, keel.ErrTooLarge)
	require.ErrorIs(t, err, keel.ErrInvalidInput, "an over-size prompt is still invalid input")

	sess := c.Session("limits-steer")
	run, err := sess.Send(ctx, "sleep", cfg(t, `{"turns":[
	  {"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}]},{"text":["woke"]}]}`, "sleep"))
	require.NoError(t, err)
	for range api.MaxStagedSteers {
		require.NoError(t, run.Steer(ctx, "more"))
	}
	err = run.Steer(ctx, "one too many")
	require.ErrorIs(t, err, keel.ErrTooMany)
	var ke *keel.Error
	require.True(t, errors.As(err, &ke))
	require.True(t, ke.Retryable)
	st, err := run.State(ctx)
	require.NoError(t, err)
	require.Len(t, st.Staged, api.MaxStagedSteers)
	require.NoError(t, run.Cancel(ctx))
	_, err = run.Outcome(ctx)
	require.ErrorIs(t, err, keel.ErrCancelled)
}
