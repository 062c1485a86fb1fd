package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/internal/schedreg"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/workflows"
)

// schedules are the activities of a schedule's firing (docs/contract.md
// §22): they check a schedule against this worker's rules, send its
// prompt through keel's own send path (the session's "send" update, with
// the validation every send gets), and wait for the run's outcome.
type schedules struct {
	keel  *client.Client
	tc    sdkclient.Client
	rules scheduleRules
	tools *tool.Registry
}

// scheduleRules are the worker's rules that a schedule's firing applies:
// those of its sessions' send validators (scheduleRulesOf).
type scheduleRules struct {
	admitModel               func(spec string) bool
	modelOffer               func() string
	checkReasoning           func(spec string, r keel.Reasoning) error
	limits                   api.Limits
	runBudget, sessionBudget *api.Budget
	// checkAgent refuses an agent the worker does not offer, or a
	// config that sets what its agent defines.
	checkAgent func(api.RunConfig) error
	// checkHooks refuses a hook the worker does not offer.
	checkHooks func(api.RunConfig) error
	// quota bounds the namespace's schedules and their firings.
	quota schedreg.ScheduleLimits
}

// newSchedules returns the activities of schedules over c, the worker's
// Temporal client.
func newSchedules(c sdkclient.Client, opts Options, rules scheduleRules, tools *tool.Registry) (*schedules, error) {
	if err := rules.quota.Validate(); err != nil {
		return nil, fmt.Errorf("worker: schedule limits: %w", err)
	}
	dc := opts.DataConverter
	if dc == nil && opts.Codec != nil {
		dc = store.NewDataConverter(opts.Codec)
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	kc, err := client.Dial(context.Background(), client.Options{Temporal: c, Namespace: opts.Namespace, DataConverter: dc})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return &schedules{keel: kc, tc: c, rules: rules, tools: tools}, nil
}

// awaitHeartbeat is how often AwaitScheduledRun heartbeats while it waits
// (its heartbeat timeout is a minute).
const awaitHeartbeat = 20 * time.Second

// Check applies the worker's rules to a schedule: its definition
// (api.Schedule.Validate under the worker's limits), the model, agent and
// tools it names (offered by this worker), and its budgets (within the
// operator's ceilings).
func (s *schedules) Check(_ context.Context, sc api.Schedule) error {
	return activityError(s.check(sc))
}

func (s *schedules) check(sc api.Schedule) error {
	if err := sc.Validate(s.rules.limits); err != nil {
		return err
	}
	if err := schedreg.CheckPace(sc, s.rules.quota); err != nil {
		return err
	}
	cfg := sc.Config
	if cfg == nil {
		return nil
	}
	if cfg.Model != "" && s.rules.admitModel != nil && !s.rules.admitModel(cfg.Model) {
		// As the session answers a send: the same words whatever the
		// spec, which it never repeats.
		msg := "model: not offered by this worker"
		if s.rules.modelOffer != nil {
			msg += "; it offers " + s.rules.modelOffer()
		}
		return &keel.Error{Code: keel.CodeInvalidInput, Message: msg}
	}
	if cfg.Model != "" && cfg.Reasoning != nil && s.rules.checkReasoning != nil {
		if err := s.rules.checkReasoning(cfg.Model, *cfg.Reasoning); err != nil {
			return err
		}
	}
	if s.rules.checkAgent != nil {
		if err := s.rules.checkAgent(*cfg); err != nil {
			return err
		}
	}
	if s.rules.checkHooks != nil {
		if err := s.rules.checkHooks(*cfg); err != nil {
			return err
		}
	}
	// As a send's validator would refuse each firing's.
	if err := workflows.CheckOutputSchema(cfg.OutputSchema); err != nil {
		return err
	}
	for i, name := range cfg.Tools {
		if _, ok := s.tools.Lookup(name); !ok {
			return keel.Errorf(keel.CodeInvalidInput, "tools: tool %d of the list is not offered by this worker", i+1)
		}
	}
	if err := cfg.Budget.Within(s.rules.runBudget, "budget"); err != nil {
		return err
	}
	return cfg.SessionBudget.Within(s.rules.sessionBudget, "session_budget")
}

// Send checks the schedule again (the worker's configuration may have
// changed since it was made) and sends its prompt, under the firing's
// update ID so that a retried attempt is applied once.
func (s *schedules) Send(ctx context.Context, req schedreg.ScheduledSendRequest) (api.ScheduledSendResult, error) {
	sc := req.Schedule
	if err := s.check(sc); err != nil {
		return api.ScheduledSendResult{}, activityError(err)
	}
	id := sc.Target()
	if id == "" {
		id = api.ScheduledSessionID(sc.ID, req.At)
	}
	var opts []client.SendOption
	if sc.Config != nil {
		opts = append(opts, client.WithConfig(*sc.Config))
	}
	overlap := sc.OverlapOrDefault()
	switch {
	case sc.NewSession:
		// Two firings in one second name the same session: the second
		// runs after the first.
		opts = append(opts, client.Queue())
	case overlap == api.OverlapQueue:
		opts = append(opts, client.Queue())
	case overlap == api.OverlapSteer:
		opts = append(opts, client.OrSteer())
	}
	res := api.ScheduledSendResult{Session: id}
	if refused, err := s.admit(ctx, req); err != nil || refused != nil {
		res.Refused = refused
		return res, err
	}
	sess := s.keel.Session(id)
	run, err := sess.SendOnce(ctx, req.UpdateID, sc.Prompt, opts...)
	if errors.Is(err, keel.ErrRunActive) && overlap == api.OverlapSkip && !sc.NewSession {
		res.Skipped = true
		if active, aerr := sess.ActiveRun(ctx); aerr == nil && active != nil {
			res.RunID, res.Number = active.ID, active.Number
		}
		return res, nil
	}
	if err != nil {
		return res, activityError(err)
	}
	res.RunID, res.Number, res.Queued, res.SteeringID = run.ID, run.Number, run.Queued, run.SteeringID
	return res, nil
}

// admit asks the registry whether the firing may send; a refusal is
// counted in keel_schedule_firings_refused_total.
func (s *schedules) admit(ctx context.Context, req schedreg.ScheduledSendRequest) (*keel.Error, error) {
	var v schedreg.FiringVerdict
	err := s.updateRegistry(ctx, req.UpdateID+"/admit", schedreg.UpdateAdmitFiring, schedreg.FiringAdmission{Schedule: req.Schedule.ID,
		Firing: req.UpdateID, At: req.At, NewSession: req.Schedule.NewSession, Limits: s.rules.quota}, &v)
	if err != nil {
		return nil, activityError(scheduleRegistryError(err))
	}
	if v.Refused != nil {
		instrument.ScheduleFiringRefused(activity.GetMetricsHandler(ctx), v.Reason)
	}
	return v.Refused, nil
}

// Reserve takes the place of a schedule about to be created in the
// registry, under this worker's limits (docs/contract.md §22.11).
func (s *schedules) Reserve(ctx context.Context, r schedreg.ScheduleReservation) error {
	r.Limits = s.rules.quota
	// One update ID for every attempt: a retried attempt whose first
	// took the place is answered as that one was.
	id := activity.GetInfo(ctx).WorkflowExecution.ID + "/reserve"
	return activityError(scheduleRegistryError(s.updateRegistry(ctx, id, schedreg.UpdateReserveSchedule, r, nil)))
}

// updateRegistry sends an update to the namespace's ScheduleRegistry,
// starting it if it is not running, under update ID id (one per
// request, so that Temporal applies a retried request once).
func (s *schedules) updateRegistry(ctx context.Context, id, name string, arg, out any) error {
	start := s.tc.NewWithStartWorkflowOperation(sdkclient.StartWorkflowOptions{
		ID:                       schedreg.ScheduleRegistryID,
		TaskQueue:                api.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "keel schedules: quotas and the pace of firings",
	}, schedreg.ScheduleRegistryWorkflowName, schedreg.ScheduleRegistryState{})
	h, err := s.tc.UpdateWithStartWorkflow(ctx, sdkclient.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: sdkclient.UpdateWorkflowOptions{UpdateID: id, UpdateName: name, Args: []any{arg},
			WaitForStage: sdkclient.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// scheduleRegistryError returns the keel error the registry answered
// with, from Temporal's wrapping of it.
func scheduleRegistryError(err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		var ke keel.Error
		if appErr.HasDetails() && appErr.Details(&ke) == nil && ke.Code != "" {
			return &ke
		}
	}
	return err
}

// Await waits for the run's outcome, heartbeating. A run that failed,
// was cancelled or was lost with its session is an outcome, not an error:
// the firing decides what it means.
func (s *schedules) Await(ctx context.Context, ref schedreg.ScheduledRunRef) (keel.Outcome, error) {
	if err := keel.ValidateSessionID(ref.Session); err != nil || ref.Number < 1 {
		return keel.Outcome{}, activityError(keel.Errorf(keel.CodeInvalidInput, "not a run of a session"))
	}
	defer heartbeat(ctx, awaitHeartbeat)()
	run := s.keel.Session(ref.Session).Run(ref.Number)
	o, err := run.Outcome(ctx)
	if err == nil || o.Status != "" {
		return o, nil
	}
	var ke *keel.Error
	if errors.As(err, &ke) && ctx.Err() == nil {
		return keel.Outcome{RunID: run.ID, Number: ref.Number, Status: keel.StatusFailed, Error: ke}, nil
	}
	return keel.Outcome{}, err
}

// Pause pauses the schedule of a failed firing, with a note saying why.
func (s *schedules) Pause(ctx context.Context, p schedreg.SchedulePause) error {
	return activityError(s.keel.Schedule(p.ID).Pause(ctx, p.Note))
}

// activityError hands a keel error to Temporal as an ApplicationError of
// its code, with the error as its details; one the same call may get past
// later (keel.TooMany) stays retryable.
func activityError(err error) error {
	var ke *keel.Error
	if err == nil || !errors.As(err, &ke) {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(ke.Message, string(ke.Code),
		temporal.ApplicationErrorOptions{NonRetryable: !ke.Retryable, Details: []any{ke}})
}

// registerSchedules registers the activities of schedules on r.
func registerSchedules(r Registrar, s *schedules) {
	r.RegisterActivityWithOptions(s.Check, activity.RegisterOptions{Name: schedreg.CheckScheduleActivity})
	r.RegisterActivityWithOptions(s.Send, activity.RegisterOptions{Name: schedreg.SendScheduledActivity})
	r.RegisterActivityWithOptions(s.Await, activity.RegisterOptions{Name: schedreg.AwaitScheduledRunActivity})
	r.RegisterActivityWithOptions(s.Pause, activity.RegisterOptions{Name: schedreg.PauseScheduleActivity})
	r.RegisterActivityWithOptions(s.Reserve, activity.RegisterOptions{Name: schedreg.ReserveScheduleActivity})
}
