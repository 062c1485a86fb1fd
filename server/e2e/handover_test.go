package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
)

// readScript reads big.txt in every run and answers (repeating, so one
// script plays a whole session).
const readScript = `{"repeat":true,"turns":[
  {"tool_calls":[{"id":"read","name":"read_file","arguments":{"path":"big.txt"}}],"usage":{"input_tokens":10,"output_tokens":2}},
  {"text":["read it"],"usage":{"input_tokens":20,"output_tokens":3}}
]}`

// readStack is a server and a worker whose workspace holds a 64 KiB
// big.txt, and a client of them.
func readStack(t *testing.T, cfg devserver.Config) (*client.Client, string) {
	t.Helper()
	srv := keeltest.StartServer(t, cfg)
	workspace := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "big.txt"), []byte(big), 0o600))
	tools, err := tool.Builtins(workspace)
	require.NoError(t, err)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: readScript, Tools: tools})
	c, err := client.Dial(context.Background(), client.Options{Temporal: keeltest.Dial(t, srv),
		DataConverter: store.NewDataConverter(keeltest.Codec(t, srv)),
		Config:        api.RunConfig{Tools: []string{"read_file"}}})
	require.NoError(t, err)
	return c, big
}

// A session hands over several times while prompts keep arriving: queued
// ones sent all at once, and sends that arrive the moment the previous run
// committed, which is when the session hands over. Every prompt runs
// exactly once, in order; the log stays dense from seq 1 across the
// executions and reads the same through EventsAfter and EventsFrom.
func TestSessionHandOverLosesNothing(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	c, big := readStack(t, devserver.Config{})
	sess := c.Session("hand-over")

	const queued, direct = 8, 6
	var prompts []string
	// Queued prompts, sent concurrently: each is accepted at once and runs
	// in turn, some carried across hand-overs.
	var wg sync.WaitGroup
	runs := make([]*client.Run, queued)
	first, err := sess.Send(ctx, "prompt q0")
	require.NoError(t, err)
	runs[0] = first
	prompts = append(prompts, "prompt q0")
	for i := 1; i < queued; i++ {
		prompts = append(prompts, fmt.Sprintf("prompt q%d", i))
	}
	errs := make(chan error, queued)
	for i := 1; i < queued; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := sess.Send(ctx, fmt.Sprintf("prompt q%d", i), client.Queue())
			runs[i] = run
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, run := range runs {
		_, err := run.Outcome(ctx)
		require.NoError(t, err)
	}
	// Sends that arrive as the previous run commits: Outcome returns once
	// the session committed the run, which is when it hands over.
	for i := range direct {
		p := fmt.Sprintf("prompt d%d", i)
		prompts = append(prompts, p)
		run, err := sess.Send(ctx, p)
		require.NoError(t, err)
		out, err := run.Outcome(ctx)
		require.NoError(t, err)
		require.Equal(t, "read it", out.Text)
	}

	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, queued+direct, st.Runs)
	require.GreaterOrEqual(t, st.HandOvers, 3, "the session handed over several times")
	require.Equal(t, keel.StateCompleted, st.State)

	log, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	require.Equal(t, st.LastSeq, log[len(log)-1].Seq)
	var started []string
	for _, ev := range log {
		if ev.Type == keel.TypeRunStarted {
			rs := decode[keel.RunStarted](ev)
			require.Equal(t, len(started)+1, rs.Number, "runs are numbered in order")
			started = append(started, rs.Prompt)
		}
		if ev.Type == keel.TypeToolFinished {
			require.Equal(t, big, decode[keel.ToolFinished](ev).Output, "the tool's output reads back whole")
		}
	}
	require.ElementsMatch(t, prompts, started, "every prompt ran exactly once")

	// The same log, followed from seq 1 across all executions.
	var followed []keel.Envelope
	for ev, err := range sess.EventsFrom(ctx, 0) {
		require.NoError(t, err)
		if !ev.Durable() {
			continue
		}
		followed = append(followed, ev)
		if ev.Seq == st.LastSeq {
			break
		}
	}
	requireSameEvents(t, log, followed)

	// From the middle of a stored segment.
	mid := log[len(log)/3].Seq
	tail, err := sess.EventsAfter(ctx, mid)
	require.NoError(t, err)
	requireSameEvents(t, log[mid:], tail)
}
