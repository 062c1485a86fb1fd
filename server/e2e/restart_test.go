package e2e_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

const restartScript = `{"turns":[
  {"text":["First run."]},
  {"text":["Sleeping."],"tool_calls":[{"id":"nap","name":"sleep","arguments":{"seconds":4}}]},
  {"text":["Slept through a restart."]},
  {"text":["Third run."]}
]}`

// TestServerRestartMidSession stops the embedded server while run 2 of a
// session waits in a durable sleep, starts it again on the same SQLite file
// and ports, and checks the session goes on as if nothing happened: run 2
// completes, run 3 is accepted, and revision, transcript and the durable
// sequence continue. The worker process stays up across the restart and
// reconnects by itself, as a deployed worker would; the client is a new one,
// resuming its follow from the last sequence it saw.
func TestServerRestartMidSession(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	s := newKillStackOn(t, devserver.Config{DataDir: t.TempDir()}, restartScript)
	s.startWorker()
	sess := s.client.Session("restart")

	run1, err := sess.Send(ctx, "first")
	require.NoError(t, err)
	out1, err := run1.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "First run.", out1.Text)

	// Outcome returns once the session committed the run, so the next
	// prompt is taken at once.
	run2, err := sess.Send(ctx, "sleep through a restart",
		client.WithConfig(api.RunConfig{Tools: []string{"sleep"}}))
	require.NoError(t, err)
	f := followRun(ctx, run2)
	f.waitFor(t, ctx, "tool.started of the sleep", sawToolStarted("sleep"))
	// The client goes away with the server; it keeps what it saw.
	before := durable(f.stop())
	lastSeen := before[len(before)-1].Seq

	require.NoError(t, s.srv.Stop())
	stopped := time.Now()
	restartCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(restartCtx, s.srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	require.Equal(t, s.srv.Address(), srv.Address())
	t.Logf("server down for %v", time.Since(stopped).Round(time.Millisecond))

	// A new client, as after a client restart, resumes from its cursor.
	c2 := keeltest.Client(t, srv, s.live)
	sess = c2.Session("restart")
	after := follow(ctx, func(ctx context.Context) iter.Seq2[keel.Envelope, error] {
		return sess.EventsFrom(ctx, lastSeen)
	})
	out2, err := sess.Run(2).Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "Slept through a restart.", out2.Text)
	t.Logf("run 2 completed %v after the server stopped", time.Since(stopped).Round(time.Millisecond))

	run3, err := sess.Send(ctx, "third")
	require.NoError(t, err)
	require.Equal(t, 3, run3.Number)
	out3, err := run3.Outcome(ctx)
	require.NoError(t, err)
	require.Equal(t, "Third run.", out3.Text)
	require.Equal(t, int64(3), out3.Revision)

	log, err := sess.EventsAfter(ctx, 0)
	require.NoError(t, err)
	requireSessionLog(t, log)
	followed := after.waitFor(t, ctx, "run 3's terminal event", func(seen []keel.Envelope) bool {
		return len(seen) > 0 && seen[len(seen)-1].Seq >= int64(len(log))
	})
	after.stop()
	// Run 2's events before the restart and the resumed follow together are
	// the log from run 2 on, each once.
	requireSameEvents(t, log[run2.BaseSeq:], append(before, durable(followed)...))
	for _, r := range []*client.Run{run1, run2, run3} {
		evs := runEvents(log, r.ID)
		require.Equal(t, keel.TypeRunCompleted, evs[len(evs)-1].Type, "run %s", r.ID)
	}

	st, err := sess.State(ctx)
	require.NoError(t, err)
	require.Equal(t, keel.StateCompleted, st.State)
	require.Equal(t, int64(3), st.Revision)
	require.Equal(t, 3, st.Runs)
	require.Equal(t, int64(len(log)), st.LastSeq)
	requireTranscript(t, ctx, sess, []transcriptShape{
		{Role: keel.RoleUser, Content: "first"},
		{Role: keel.RoleAssistant, Content: "First run."},
		{Role: keel.RoleUser, Content: "sleep through a restart"},
		{Role: keel.RoleAssistant, Content: "Sleeping.", Calls: []string{"nap:sleep"}},
		{Role: keel.RoleTool, Content: "slept 4s", Tool: "nap", Status: keel.ToolOK},
		{Role: keel.RoleAssistant, Content: "Slept through a restart."},
		{Role: keel.RoleUser, Content: "third"},
		{Role: keel.RoleAssistant, Content: "Third run."},
	})
	page, err := sess.History(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), page.Revision)
}
