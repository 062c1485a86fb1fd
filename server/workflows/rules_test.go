package workflows_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/worker"
	"github.com/keelrun/keel/server/workflows"
)

// countingModels records every spec the activities resolve.
type countingModels struct {
	p        provider.Provider
	mu       sync.Mutex
	resolved []string
}

func (m *countingModels) Resolve(spec string) (provider.Provider, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resolved = append(m.resolved, spec)
	return m.p, "test-model", nil
}

// The attack: sends naming files, paths, devices and models the worker
// does not offer, as the run's model or as the session's own default
// (SessionInput.Config, which a client sets at update-with-start). The
// worker's rules refuse each in the send's validator, with invalid_input
// and one message whatever the spec; no run starts and nothing is
// resolved. A send naming an offered model over the bad default runs.
func TestSendRefusesModelsTheWorkerDoesNotOffer(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	mem := live.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	models := &countingModels{p: scriptedProvider(t, `{"repeat":true,"turns":[{"text":["ok"]}]}`)}
	acts := &activities.Activities{Models: models, Tools: testTools(t), Live: mem}
	var asked []string
	rules := workflows.Rules{
		AdmitModel: func(spec string) bool {
			asked = append(asked, spec)
			return spec == "scripted:ok"
		},
		ModelOffer: func() string { return "scripted:ok" },
	}
	worker.RegisterWithRules(env, acts, rules)

	hostile := []string{"scripted:/etc/shadow", "scripted:../x", "scripted:/dev/zero", "scripted:/tmp/fifo",
		"openai:invented", "gpt", ""} // "" is the session's bad default below
	var messages []string
	var state api.SessionStatus
	send := func(model string, then func(err error)) {
		req := api.SendRequest{Prompt: "x"}
		if model != "" {
			req.Config = &api.RunConfig{Model: model}
		}
		env.UpdateWorkflow(api.UpdateSend, "send-"+model, &testsuite.TestUpdateCallback{
			OnReject:   then,
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, req)
	}
	env.RegisterDelayedCallback(func() {
		for _, model := range hostile {
			send(model, func(err error) {
				var appErr *temporal.ApplicationError
				require.True(t, errors.As(err, &appErr), "send %q: %v", model, err)
				require.Equal(t, string(keel.CodeInvalidInput), appErr.Type(), "send %q", model)
				messages = append(messages, appErr.Message())
			})
		}
	}, 0)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(api.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&state))
		send("scripted:ok", func(err error) { t.Errorf("an offered model was refused: %v", err) })
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{Model: "scripted:/etc/shadow"}))

	require.Len(t, messages, len(hostile))
	for _, m := range messages {
		require.Equal(t, messages[0], m, "the refusal depends on the spec")
	}
	require.Equal(t, "model: not offered by this worker; it offers scripted:ok", messages[0])
	require.Equal(t, 0, state.Runs, "a refused send started a run")
	// The rules saw the merged config: the session's default where the
	// send named no model.
	require.Contains(t, asked, "scripted:/etc/shadow")
	models.mu.Lock()
	defer models.mu.Unlock()
	require.NotEmpty(t, models.resolved, "the offered model's run never reached a model turn")
	for _, spec := range models.resolved {
		require.Equal(t, "scripted:ok", spec, "a refused spec reached the model resolver")
	}
}
