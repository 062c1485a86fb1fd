package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/crypt"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// The plaintext markers an attacker without the keys writes to Temporal.
const (
	forgedSteer  = "FORGED-STEER-2b7e"
	forgedAnswer = "FORGED-ANSWER-9c4d"
	forgedPrompt = "FORGED-PROMPT-51aa"
)

// The attack: whoever can write to Temporal but holds no key hands an
// encrypting worker input of their own, in the clear, as the temporal CLI
// sends it (`temporal workflow signal --input '{"text":"..."}'`, `temporal
// workflow update execute --name send`). With encryption on, the worker's
// codec refuses every payload that is not ciphertext (crypt.ErrPlaintext):
// the send update is rejected before history, the steer and respond
// signals are dropped when the session running the run decodes them, and
// nothing of them
// reaches the run's log or transcript; the keyed client's own steer and
// answer still work. With --encryption-allow-plaintext (the migration
// setting) the same payloads are taken, which is what every encrypting
// worker did before.
func TestPlaintextInputIsRefused(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	st, err := store.Open(ctx, "mem://")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	keys := mustKeys(t, writeKeyFile(t, map[string]string{}, "k1"))
	plain, err := srv.Dial(ctx, sdkclient.Options{})
	require.NoError(t, err)
	t.Cleanup(plain.Close)

	for _, tc := range []struct {
		name  string
		opts  []crypt.Option
		taken bool
	}{
		{"strict", nil, false},
		{"allow-plaintext", []crypt.Option{crypt.AllowPlaintext()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			codec := store.NewCodec(st, store.CodecOptions{Encryption: crypt.NewCodec(keys, tc.opts...)})
			dc := store.NewDataConverter(codec)
			tc2, err := srv.Dial(ctx, sdkclient.Options{DataConverter: dc})
			require.NoError(t, err)
			defer tc2.Close()
			tools, err := tool.NewRegistry(tool.AskUser())
			require.NoError(t, err)
			w, err := worker.New(tc2, worker.Options{Tools: tools, Codec: codec, StopTimeout: time.Second,
				Models: keeltest.ScriptModels(t, `{"turns":[
				  {"tool_calls":[{"id":"c1","name":"ask_user","arguments":{"question":"Name?"}}]},
				  {"text":["Thanks."]}]}`)})
			require.NoError(t, err)
			require.NoError(t, w.Start())
			defer w.Stop()
			c, err := client.Dial(ctx, client.Options{Temporal: tc2, DataConverter: dc,
				Config: api.RunConfig{Tools: []string{"ask_user"}}})
			require.NoError(t, err)
			sess := c.Session("plaintext-" + tc.name)
			run, err := sess.Send(ctx, "ask me")
			require.NoError(t, err)
			followRun(ctx, run).waitFor(t, ctx, "host_input.requested", func(seen []keel.Envelope) bool {
				for _, ev := range seen {
					if ev.Type == keel.TypeHostInputRequested {
						return true
					}
				}
				return false
			})

			// A query in the clear is answered (queries change nothing and
			// never enter history; readers without keys send them so),
			// and its answer is ciphertext.
			v, err := plain.QueryWorkflow(ctx, sess.ID(), "", api.QueryEvents, api.EventsQuery{After: 0})
			require.NoError(t, err, "a plaintext query")
			var page api.EventsPage
			require.Error(t, v.Get(&page), "the answer is encrypted")

			// A send in the clear, queued behind the active run.
			h, err := plain.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: sess.ID(),
				UpdateName: api.UpdateSend, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
				Args: []any{api.SendRequest{Prompt: forgedPrompt, IfActive: api.IfActiveQueue}}})
			if err == nil {
				err = h.Get(ctx, nil)
			}
			if tc.taken {
				require.NoError(t, err, "the plaintext send")
			} else {
				require.ErrorContains(t, err, "not encrypted", "the plaintext send")
			}

			// A steer signal in the clear, then one from the keyed client
			// (signals of one name arrive in order). The run executes in
			// its session's workflow (an inline session): the signals go
			// to the session, which hands them to its active run.
			require.NoError(t, plain.SignalWorkflow(ctx, sess.ID(), "", api.UpdateSteer, api.SteerRequest{Text: forgedSteer}))
			require.NoError(t, tc2.SignalWorkflow(ctx, sess.ID(), "", api.UpdateSteer,
				api.SteerRequest{Text: "keyed steer", RunID: run.ID}))
			// An answer in the clear.
			require.NoError(t, plain.SignalWorkflow(ctx, sess.ID(), "", api.UpdateRespond,
				api.RespondRequest{RequestID: "c1/ask_user", Answer: []byte(`"` + forgedAnswer + `"`)}))
			// With plaintext taken, the plaintext answer is the only one
			// the run gets: its outcome below says it was delivered. (The
			// run's state is not asked then: the queued forged prompt may
			// have run already, and the session answers for its latest run.)
			if !tc.taken {
				state, err := run.State(ctx) // a query sees the signals applied
				require.NoError(t, err)
				require.Equal(t, []string{"steer-1"}, state.Staged, "only the keyed steer was staged")
				require.Len(t, state.Requests, 1, "the plaintext answer was dropped")
				require.NoError(t, run.Respond(ctx, "c1/ask_user", "Ann"))
			}
			out, err := run.Outcome(ctx)
			require.NoError(t, err)
			require.Equal(t, "Thanks.", out.Text)

			log, err := sess.EventsAfter(ctx, 0)
			require.NoError(t, err)
			var all strings.Builder
			for _, ev := range log {
				all.Write(ev.Data)
			}
			hist, err := sess.History(ctx, 0, 0)
			require.NoError(t, err)
			for _, m := range hist.Messages {
				all.WriteString(m.Content)
			}
			for _, m := range []string{forgedSteer, forgedAnswer} {
				require.Equal(t, tc.taken, strings.Contains(all.String(), m), "%s in the log or transcript", m)
			}
			require.Contains(t, all.String(), "keyed steer")
			if !tc.taken {
				// A session started in the clear fails at once: its input
				// does not decode.
				forged, err := plain.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: "forged-session",
					TaskQueue: api.TaskQueue}, api.SessionWorkflowName, api.SessionInput{SessionID: "forged-session"})
				require.NoError(t, err)
				require.ErrorContains(t, forged.Get(ctx, nil), "not encrypted")

				require.Contains(t, all.String(), "Ann")
				st, err := sess.State(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, st.Runs+st.Queued, "the plaintext prompt was never queued")
			}
		})
	}
}
