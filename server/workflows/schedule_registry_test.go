package workflows_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/worker"
)

// TestScheduleRegistryRules: the registry's quotas and pace on the
// simulated clock (docs/contract.md §22.11): a prefix's quota and the
// namespace's, a place given back, the least interval between firings by
// their nominal times (a retried firing admitted again), and a bucket of
// new sessions refilled over the hour.
func TestScheduleRegistryRules(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	worker.Register(env, &activities.Activities{})
	start := time.Unix(1_700_000_000, 0).UTC()
	env.SetStartTime(start)
	quota := schedreg.ScheduleLimits{Schedules: 3, PerPrefix: 2}
	pace := schedreg.ScheduleLimits{MinInterval: keel.Duration(time.Minute), SessionsPerHour: 2}

	var got []string
	step := 0
	send := func(name string, arg any) {
		step++
		id := fmt.Sprintf("u%d", step)
		env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { got = append(got, "rejected "+errorType(err)) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				switch {
				case err != nil:
					got = append(got, errorType(err))
				case v != nil && v.(schedreg.FiringVerdict).Refused != nil:
					got = append(got, "refused "+v.(schedreg.FiringVerdict).Reason)
				default:
					got = append(got, "ok")
				}
			},
		}, arg)
	}
	reserve := func(id, owner string) {
		send(schedreg.UpdateReserveSchedule, schedreg.ScheduleReservation{ID: id, Owner: owner, Limits: quota})
	}
	fire := func(firing string, at time.Duration, newSession bool) {
		send(schedreg.UpdateAdmitFiring, schedreg.FiringAdmission{Schedule: "s", Firing: firing, At: start.Add(at),
			NewSession: newSession, Limits: pace})
	}
	env.RegisterDelayedCallback(func() {
		reserve("a1", "a-")
		reserve("a2", "a-")
		reserve("a3", "a-") // the prefix's quota
		reserve("a1", "b-") // taken
		reserve("x1", "")   // the namespace's last place
		reserve("b1", "b-") // the namespace's quota
		send(schedreg.UpdateReleaseSchedule, "a1")
		reserve("a3", "a-") // the place given back
		send(schedreg.UpdateReserveSchedule, schedreg.ScheduleReservation{ID: "../x", Limits: quota})
		fire("f1", 0, true)
		fire("f1", 0, true)              // its retry
		fire("f2", 30*time.Second, true) // within the interval
		fire("f3", time.Minute, true)    // the bucket's second session
		fire("f4", 2*time.Minute, true)  // the bucket is empty
		fire("f5", 3*time.Minute, false) // no session to spend
		fire("f6", 33*time.Minute, true) // half an hour refilled one
	}, time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(schedreg.ScheduleRegistryWorkflowName, schedreg.ScheduleRegistryState{})

	want := []string{"ok", "ok", "keel.TooMany", "keel.InvalidInput", "ok", "keel.TooMany", "ok", "ok",
		"rejected keel.InvalidInput",
		"ok", "ok", "refused interval", "ok", "refused sessions", "ok", "ok"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers:\n got %q\nwant %q", got, want)
	}
}

// errorType is the type of the ApplicationError err holds, or its text.
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return err.Error()
}
