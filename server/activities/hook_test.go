package activities_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/hook"
)

// docs/contract.md §23.3, §23.4: what a webhook answers is checked on the
// worker before the run records it, against the run's limits: a decision
// the point does not take, or input over the prompt limit, fails the call
// with a typed error that is not retried and holds neither the URL, the
// secret nor the answer.
func TestHookActivityChecksTheDecision(t *testing.T) {
	const secret = "hook-secret-value"
	for _, tc := range []struct {
		name, body string
		point      keel.HookPoint
		code       keel.Code
		msg        string
	}{
		{"input over the run's limit", `{"input":["` + strings.Repeat("y", 101) + `"]}`, keel.HookBeforeStep,
			keel.CodeTooLarge, "input[0]: 101 bytes, over the limit of 100"},
		{"deny at run_end", `{"action":"deny"}`, keel.HookRunEnd, keel.CodeInvalidInput, "deny is for before_tool"},
		{"replace without arguments", `{"action":"replace"}`, keel.HookBeforeTool, keel.CodeInvalidInput, "replace needs arguments"},
		{"input at a tool point", `{"input":["x"]}`, keel.HookAfterTool, keel.CodeInvalidInput, "boundary input is for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			wh, err := hook.NewWebhook(hook.WebhookConfig{URL: srv.URL + "/keel", Secret: []byte(secret),
				Spec: hook.Spec{Points: keel.HookPoints}})
			require.NoError(t, err)
			acts := &activities.Activities{Hooks: map[string]hook.Hook{"audit": wh}}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivityWithOptions(acts.Hook, activity.RegisterOptions{Name: activities.HookName})
			call := hook.Call{Hook: "audit", Point: tc.point, Key: "s1/run-1/x/1/audit", SessionID: "s1", RunID: "s1/run-1"}
			if tc.point == keel.HookBeforeTool || tc.point == keel.HookAfterTool {
				call.Tool = &keel.ToolCall{ID: "c1", Name: "echo", Arguments: []byte(`{}`)}
			}
			_, err = env.ExecuteActivity(activities.HookName, activities.HookInput{Call: call, MaxInput: 100})
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.True(t, appErr.NonRetryable())
			require.Equal(t, string(tc.code), appErr.Type())
			var ke keel.Error
			require.NoError(t, appErr.Details(&ke))
			require.Contains(t, ke.Message, tc.msg)
			for _, leak := range []string{secret, srv.URL, "yyyy"} {
				require.NotContains(t, err.Error(), leak)
			}
		})
	}
}
