package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordHookHistory records a run with hooks at every point (the specs
// recorded as it starts, a Hook activity at each point, boundary input
// before the first step, a tool call's arguments replaced), for
// server/workflows/replay_test.go. It writes session_hooks.json.
func TestRecordHookHistory(t *testing.T) {
	inbox := hook.Func(hook.Spec{Points: keel.HookPoints}, func(_ context.Context, c hook.Call) (hook.Decision, error) {
		switch {
		case c.Point == keel.HookBeforeStep && c.Step == 1:
			return hook.Decision{Input: []string{"new mail: notes moved"}}, nil
		case c.Point == keel.HookBeforeTool:
			return hook.Decision{Action: keel.HookReplace, Arguments: []byte(`{}`)}, nil
		}
		return hook.Decision{}, nil
	})
	r := recordStack(t, 3*time.Minute, devserver.Config{DataDir: t.TempDir()}, keeltest.WorkerOptions{Tools: notesTools(t),
		Hooks: map[string]hook.Hook{"inbox": inbox}, Script: `{"turns":[
	  {"text":["Let me look."],"tool_calls":[{"id":"ls","name":"list_files","arguments":{"path":"."}}]},
	  {"text":["notes.txt"]}]}`})
	ctx, c := r.ctx, r.c
	run, err := c.Session("replay-hooks").Send(ctx, "What is there?",
		client.WithConfig(api.RunConfig{Tools: []string{"list_files"}, Hooks: []string{"inbox"}}))
	require.NoError(t, err)
	out, err := run.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "notes.txt", out.Text)
	writeRunExecution(t, ctx, c.Temporal(), run, r.data, "session_hooks.json")
}
