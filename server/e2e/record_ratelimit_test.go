package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/ratelimit"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestRecordRateLimitHistory records a RateLimit workflow (docs/contract.md
// §20.5) for server/workflows/replay_test.go:
//
//	KEEL_RECORD=1 go test -run TestRecordRateLimitHistory ./server/e2e
//
// It writes rate_limit.json: the limit started by the first rate update
// (update-with-start, as workers send it), reservations of requests and
// tokens, a reservation given back before it was sent, two settled to what
// their requests used (less and more than reserved), a reservation asked
// again, a give-back of what the limit never held, and an update the
// validator refused (which leaves no trace).
func TestRecordRateLimitHistory(t *testing.T) {
	r := recordStack(t, 2*time.Minute, devserver.Config{}, keeltest.WorkerOptions{Script: `{"turns":[{"text":["unused"]}]}`})
	ctx, tc := r.ctx, r.c.Temporal()
	const key = "scripted:recorded"
	limit := ratelimit.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000}
	rate := func(id string, req ratelimit.RateRequest) (ratelimit.RateGrant, error) {
		start := tc.NewWithStartWorkflowOperation(sdkclient.StartWorkflowOptions{
			ID: ratelimit.RateLimitWorkflowID(key), TaskQueue: api.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, ratelimit.RateLimitWorkflowName, ratelimit.RateLimitInput{Key: key})
		var grant ratelimit.RateGrant
		h, err := tc.UpdateWithStartWorkflow(ctx, sdkclient.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
			UpdateOptions: sdkclient.UpdateWorkflowOptions{UpdateID: id, UpdateName: ratelimit.UpdateRate, Args: []any{req},
				WaitForStage: sdkclient.WorkflowUpdateStageCompleted}})
		if err == nil {
			err = h.Get(ctx, &grant)
		}
		return grant, err
	}
	g, err := rate("u1", ratelimit.RateRequest{Limit: limit, Reserve: []ratelimit.RateReservation{{ID: "a", Tokens: 1000}, {ID: "b", Tokens: 1000}, {ID: "c", Tokens: 5000}}})
	require.NoError(t, err)
	require.Len(t, g.Waits, 3)
	_, err = rate("u2", ratelimit.RateRequest{Limit: limit, GiveBack: []ratelimit.RateGiveBack{{ID: "b"}}, Reserve: []ratelimit.RateReservation{{ID: "d", Tokens: 100}}})
	require.NoError(t, err)
	_, err = rate("u3", ratelimit.RateRequest{Limit: limit, GiveBack: []ratelimit.RateGiveBack{{ID: "a", Sent: true, Used: 200}, {ID: "c", Sent: true, Used: 9000}, {ID: "nobody"}},
		Reserve: []ratelimit.RateReservation{{ID: "d", Tokens: 100}}})
	require.NoError(t, err)
	_, err = rate("refused", ratelimit.RateRequest{Limit: limit, Reserve: []ratelimit.RateReservation{{ID: ""}}})
	require.Error(t, err, "an empty reservation ID is refused")
	v, err := tc.QueryWorkflow(ctx, ratelimit.RateLimitWorkflowID(key), "", api.QueryState)
	require.NoError(t, err)
	var st ratelimit.RateLimitStatus
	require.NoError(t, v.Get(&st))
	require.Equal(t, 3, st.Updates)
	writeHistory(t, ctx, tc, ratelimit.RateLimitWorkflowID(key), filepath.Join("..", "workflows", "testdata", "rate_limit.json"))
}
