package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// hookScript makes one tally call, which the guard hook rewrites
// (guardHook), then answers; the call holds in the worker process of the
// generation the script is made with.
const hookScript = `{"turns":[
  {"tool_calls":[{"id":"count","name":"tally","arguments":{"label":"a","hold_ms":600000,"hold_gen":%d}}]},
  {"text":["counted"]}
]}`

func hookConfig() client.SendOption {
	return client.WithConfig(api.RunConfig{Tools: []string{"tally"}, Hooks: []string{"guard"},
		HeartbeatAfter: keel.Duration(2 * time.Second)})
}

// phases lists the tally lines as phase:label:generation.
func phases(lines []tallyLine) []string {
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%s:%s:%d", l.Phase, l.Label, l.Generation))
	}
	return out
}

// docs/contract.md §23.4: a worker killed (kill -9) after a hook made its
// effect and before its answer was recorded: the new worker calls it
// again under the same key, the hook makes no second effect, and the run
// uses its answer. A worker killed after the answer was recorded and
// before the run used it (the rewritten call in flight): the new worker
// never calls the hook again, and runs the call as the hook rewrote it.
func TestHookAnswerSurvivesKill(t *testing.T) {
	t.Run("after the hook's effect", func(t *testing.T) {
		ctx := testContext(t, 2*time.Minute)
		s := newKillStack(t, fmt.Sprintf(hookScript, 9)) // no process 9: the call never holds
		s.spec.HookHold = true
		first := s.startWorker()
		sess := s.client.Session("hook-kill-effect")
		run, err := sess.Send(ctx, "count", hookConfig())
		require.NoError(t, err)
		waitTally(t, ctx, s, "hook")
		first.kill()
		s.spec.HookHold = false
		s.startWorker()

		out, err := run.Outcome(ctx)
		require.NoError(t, err)
		require.Equal(t, "counted", out.Text)
		require.Equal(t, []string{"hook:a-guarded:1", "hook-again:a-guarded:2", "start:a-guarded:2", "end:a-guarded:2"},
			phases(s.tally()))
		lines := s.tally()
		require.Equal(t, lines[0].Key, lines[1].Key, "the call asked again carries its key")
	})
	t.Run("after the answer was recorded", func(t *testing.T) {
		ctx := testContext(t, 2*time.Minute)
		s := newKillStack(t, fmt.Sprintf(hookScript, 1))
		first := s.startWorker()
		sess := s.client.Session("hook-kill-use")
		run, err := sess.Send(ctx, "count", hookConfig())
		require.NoError(t, err)
		waitTally(t, ctx, s, "start")
		first.kill()
		s.startWorker()

		out, err := run.Outcome(ctx)
		require.NoError(t, err)
		require.Equal(t, "counted", out.Text)
		require.Equal(t, []string{"hook:a-guarded:1", "start:a-guarded:1", "start:a-guarded:2", "end:a-guarded:2"},
			phases(s.tally()), "the hook ran once; the call ran as it rewrote it")
		log, err := sess.EventsAfter(ctx, 0)
		require.NoError(t, err)
		requireSessionLog(t, log)
		var decided []keel.HookDecided
		for _, ev := range log {
			if ev.Type == keel.TypeHookDecided {
				decided = append(decided, decode[keel.HookDecided](ev))
			}
		}
		require.Len(t, decided, 1)
		require.Equal(t, keel.HookReplace, decided[0].Action)
	})
}

// waitTally waits until the tally log has a line of phase.
func waitTally(t *testing.T, ctx context.Context, s *killStack, phase string) {
	t.Helper()
	for {
		for _, l := range s.tally() {
			if l.Phase == phase {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %s line in the tally log", phase)
		case <-time.After(20 * time.Millisecond): // a file another process writes: nothing to wait on
		}
	}
}
