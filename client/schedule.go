package client

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/schedreg"
)

// Schedules (docs/contract.md §22). A keel schedule is a Temporal
// Schedule whose ID is the schedule's and whose action starts a
// ScheduledSend workflow on a keel worker, which sends the prompt through
// the session's "send" update. It shows, and can be paused, triggered or
// deleted, in the Temporal Web UI and with `temporal schedule` too.

// CheckTimeout bounds the check a keel worker makes of a schedule at
// create and update: without a worker, the call fails after it.
const CheckTimeout = time.Minute

// Schedule is a handle on one schedule. No call is made until a method
// is called.
type Schedule struct {
	c  *Client
	id string
}

// Schedule returns a handle on the schedule with this ID.
func (c *Client) Schedule(id string) *Schedule { return &Schedule{c: c, id: id} }

// ID returns the schedule's ID.
func (h *Schedule) ID() string { return h.id }

// CreateScheduleOption tunes one CreateSchedule.
type CreateScheduleOption func(*api.ScheduledSendInput)

// OwnedBy counts the schedule against prefix's quota as well as the
// namespace's (schedreg.ScheduleLimits.PerPrefix): the gateway passes the
// prefix of the API key that creates it. Without it, only the
// namespace's quota applies.
func OwnedBy(prefix string) CreateScheduleOption {
	return func(in *api.ScheduledSendInput) { in.Owner = prefix }
}

// CreateSchedule creates a schedule. It checks the definition
// (api.Schedule.Validate), then has a keel worker check what only the
// worker knows (the models and tools it offers, its limits and its budget
// ceilings) and take the schedule's place in the namespace's registry
// (docs/contract.md §22.11), then creates the Temporal Schedule. An ID in
// use is keel.InvalidInput; past a quota of the worker's
// (schedreg.ScheduleLimits), keel.TooMany.
func (c *Client) CreateSchedule(ctx context.Context, s api.Schedule, opts ...CreateScheduleOption) error {
	if err := s.Validate(api.Limits{}); err != nil {
		return err
	}
	in := api.ScheduledSendInput{Schedule: s, Check: true, Reserve: true}
	for _, o := range opts {
		o(&in)
	}
	// From here the place may be taken: the caller leaving must not stop
	// the create halfway, or the place would stay taken for nothing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CheckTimeout)
	defer cancel()
	if err := c.checkSchedule(ctx, in); err != nil {
		return err
	}
	_, err := c.tc.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:                    s.ID,
		Spec:                  temporalSpec(s.ScheduleSpec),
		Action:                scheduleAction(s),
		Overlap:               enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
		CatchupWindow:         s.CatchupOrDefault().Std(),
		PauseOnFailure:        s.PauseOnFailure,
		Note:                  "created with keel",
		TypedSearchAttributes: scheduleAttributes(s),
	})
	switch {
	case errors.Is(err, temporal.ErrScheduleAlreadyRunning):
		// A schedule the registry did not count (made outside keel):
		// its place stays taken, as it exists.
		return keel.Errorf(keel.CodeInvalidInput, "a schedule with ID %s exists", s.ID)
	case err != nil && !timedOut(err):
		// Not created: the place goes back. (One that timed out may
		// have been created, and keeps it; keel schedule delete frees
		// it.)
		if rerr := c.releaseSchedule(ctx, s.ID); rerr != nil {
			return errors.Join(scheduleError(err, s.ID), rerr)
		}
	}
	return scheduleError(err, s.ID)
}

// scheduleAttributes index a schedule by where its firings send
// (api.AttrSessionID): its session, or, for a new session each firing,
// its ID, which starts each of those sessions' IDs. A list filters on it
// without reading each schedule.
func scheduleAttributes(s api.Schedule) temporal.SearchAttributes {
	target := s.Target()
	if target == "" {
		target = s.ID
	}
	return temporal.NewSearchAttributes(api.AttrSessionID.ValueSet(target))
}

// releaseSchedule gives a schedule's place in the registry back. A
// registry that does not exist holds no place.
func (c *Client) releaseSchedule(ctx context.Context, id string) error {
	h, err := c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: schedreg.ScheduleRegistryID,
		UpdateName: schedreg.UpdateReleaseSchedule, Args: []any{id}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return fromTemporal(err, "the schedule registry")
}

// The Temporal side of a schedule. Every firing may start while another
// runs (ALLOW_ALL): what a firing does while a run is active is keel's
// choice (Schedule.Overlap), made at the send.

func temporalSpec(sp api.ScheduleSpec) client.ScheduleSpec {
	spec := client.ScheduleSpec{TimeZoneName: sp.Timezone, Jitter: sp.Jitter.Std()}
	if sp.Cron != "" {
		spec.CronExpressions = []string{sp.Cron}
	}
	if sp.Every > 0 {
		spec.Intervals = []client.ScheduleIntervalSpec{{Every: sp.Every.Std()}}
	}
	return spec
}

func scheduleAction(s api.Schedule) *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{
		ID:            api.ScheduleActionIDPrefix + s.ID,
		Workflow:      api.ScheduledSendWorkflowName,
		Args:          []any{api.ScheduledSendInput{Schedule: s}},
		TaskQueue:     api.TaskQueue,
		StaticSummary: "keel schedule " + s.ID,
	}
}

func schedulePolicies(s api.Schedule) *client.SchedulePolicies {
	return &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
		CatchupWindow: s.CatchupOrDefault().Std(), PauseOnFailure: s.PauseOnFailure}
}

// checkSchedule has a keel worker check in.Schedule (and, with
// in.Reserve, take its place): a ScheduledSend workflow in check mode,
// which sends nothing.
func (c *Client) checkSchedule(ctx context.Context, in api.ScheduledSendInput) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	s := in.Schedule
	run, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       api.ScheduleCheckIDPrefix + s.ID + ":" + newID(),
		TaskQueue:                api.TaskQueue,
		WorkflowExecutionTimeout: CheckTimeout,
		StaticSummary:            "keel: check schedule " + s.ID,
	}, api.ScheduledSendWorkflowName, in)
	if err == nil {
		err = run.Get(ctx, nil)
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("keel: no keel worker checked schedule %s within %s: is a worker running? %w",
			s.ID, CheckTimeout, context.DeadlineExceeded)
	}
	return fromTemporal(err, "schedule "+s.ID)
}

// eachSchedule calls f with each keel schedule Temporal's visibility
// lists, until f returns false.
func (c *Client) eachSchedule(ctx context.Context, f func(*client.ScheduleListEntry) bool) error {
	it, err := c.tc.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 500})
	if err != nil {
		return scheduleError(err, "")
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return scheduleError(err, "")
		}
		if e.WorkflowType.Name != api.ScheduledSendWorkflowName {
			continue // not keel's
		}
		if !f(e) {
			return nil
		}
	}
	return nil
}

// definition reads the schedule's keel definition from its Temporal
// Schedule; a schedule that is not keel's is keel.NotFound.
func (h *Schedule) definition(ctx context.Context) (*client.ScheduleDescription, api.Schedule, error) {
	if err := api.ValidateScheduleID(h.id); err != nil {
		return nil, api.Schedule{}, err
	}
	d, err := h.c.describeSchedule(ctx, h.id)
	if err != nil {
		return nil, api.Schedule{}, scheduleError(err, h.id)
	}
	s, err := h.c.keelSchedule(d.Schedule)
	if err != nil {
		return nil, api.Schedule{}, err
	}
	s.ID = h.id
	return d, s, nil
}

// describeTries bounds the attempts of describeSchedule.
const describeTries = 3

// describeSchedule describes a Temporal Schedule, asking again when a call
// times out: Temporal answers from the schedule's own workflow, which a
// busy server (catching up on firings after an outage, say) may answer
// later than one call's 10 seconds. It only reads, so asking again is
// safe.
func (c *Client) describeSchedule(ctx context.Context, id string) (*client.ScheduleDescription, error) {
	var err error
	for range describeTries {
		var d *client.ScheduleDescription
		if d, err = c.tc.ScheduleClient().GetHandle(ctx, id).Describe(ctx); err == nil || ctx.Err() != nil || !timedOut(err) {
			return d, err
		}
	}
	return nil, err
}

// timedOut reports whether a call failed for want of time rather than
// for what it asked.
func timedOut(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded)
}

// keelSchedule decodes a Temporal Schedule's keel definition: its
// action's input.
func (c *Client) keelSchedule(s client.Schedule) (api.Schedule, error) {
	act, ok := s.Action.(*client.ScheduleWorkflowAction)
	if !ok || actionType(act) != api.ScheduledSendWorkflowName || len(act.Args) != 1 {
		return api.Schedule{}, keel.Errorf(keel.CodeNotFound, "schedule not found (it is not a keel schedule)")
	}
	p, ok := act.Args[0].(*commonpb.Payload)
	if !ok {
		return api.Schedule{}, keel.Errorf(keel.CodeInternal, "schedule's input is not a payload")
	}
	var in api.ScheduledSendInput
	if err := c.dc.FromPayload(p, &in); err != nil {
		return api.Schedule{}, fmt.Errorf("keel: read the schedule's definition: %w", err)
	}
	return in.Schedule, nil
}

func actionType(act *client.ScheduleWorkflowAction) string {
	name, _ := act.Workflow.(string)
	return name
}

// Get returns the schedule's definition.
func (h *Schedule) Get(ctx context.Context) (api.Schedule, error) {
	_, s, err := h.definition(ctx)
	return s, err
}

// Pause stops the schedule's firings until Unpause; note says why
// (optional, at most api.MaxScheduleNoteBytes).
func (h *Schedule) Pause(ctx context.Context, note string) error {
	if err := checkNote(note); err != nil {
		return err
	}
	if _, _, err := h.definition(ctx); err != nil {
		return err
	}
	if note == "" {
		note = "paused with keel"
	}
	return scheduleError(h.c.tc.ScheduleClient().GetHandle(ctx, h.id).Pause(ctx, client.SchedulePauseOptions{Note: note}), h.id)
}

// Unpause makes a paused schedule fire again; note as for Pause.
func (h *Schedule) Unpause(ctx context.Context, note string) error {
	if err := checkNote(note); err != nil {
		return err
	}
	if _, _, err := h.definition(ctx); err != nil {
		return err
	}
	if note == "" {
		note = "unpaused with keel"
	}
	return scheduleError(h.c.tc.ScheduleClient().GetHandle(ctx, h.id).Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}), h.id)
}

func checkNote(note string) error {
	if len(note) > api.MaxScheduleNoteBytes || !utf8.ValidString(note) {
		return keel.Errorf(keel.CodeInvalidInput, "a note must be at most %d bytes of UTF-8 text", api.MaxScheduleNoteBytes)
	}
	return nil
}

// Trigger fires the schedule now, paused or not; the firing follows the
// schedule's overlap policy like any other. It returns once Temporal took
// the request: the firing's result is in Describe.
func (h *Schedule) Trigger(ctx context.Context) error {
	if _, _, err := h.definition(ctx); err != nil {
		return err
	}
	return scheduleError(h.c.tc.ScheduleClient().GetHandle(ctx, h.id).Trigger(ctx,
		client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}), h.id)
}

// Update changes the schedule as change says and returns its new
// definition, checked as CreateSchedule checks one (a keel worker
// included). Firings already started keep the definition they began
// with.
func (h *Schedule) Update(ctx context.Context, change api.ScheduleChange) (api.Schedule, error) {
	if err := api.ValidateScheduleID(h.id); err != nil {
		return api.Schedule{}, err
	}
	var updated api.Schedule
	err := h.c.tc.ScheduleClient().GetHandle(ctx, h.id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s, err := h.c.keelSchedule(in.Description.Schedule)
			if err != nil {
				return nil, err
			}
			s.ID = h.id
			s = change.Apply(s)
			if err := s.Validate(api.Limits{}); err != nil {
				return nil, err
			}
			if err := h.c.checkSchedule(ctx, api.ScheduledSendInput{Schedule: s, Check: true}); err != nil {
				return nil, err
			}
			next := in.Description.Schedule
			spec := temporalSpec(s.ScheduleSpec)
			next.Spec, next.Action, next.Policy = &spec, scheduleAction(s), schedulePolicies(s)
			updated = s
			attrs := scheduleAttributes(s)
			return &client.ScheduleUpdate{Schedule: &next, TypedSearchAttributes: &attrs}, nil
		},
	})
	if err != nil {
		return api.Schedule{}, scheduleError(err, h.id)
	}
	return updated, nil
}

// Delete deletes the schedule and gives its place in the registry back.
// Its firings' sessions, and a firing still running, stay. A schedule
// already gone (deleted outside keel) is keel.NotFound, and its place is
// given back too.
func (h *Schedule) Delete(ctx context.Context) error {
	_, _, err := h.definition(ctx)
	if err == nil {
		err = scheduleError(h.c.tc.ScheduleClient().GetHandle(ctx, h.id).Delete(ctx), h.id)
	}
	if err != nil && !errors.Is(err, keel.ErrNotFound) {
		return err
	}
	if rerr := h.c.releaseSchedule(ctx, h.id); rerr != nil {
		return rerr
	}
	return err
}

// scheduleError maps what Temporal's schedule calls returned to keel's
// typed errors: a missing schedule is keel.NotFound, a spec Temporal
// cannot read (a cron expression's fields, a time zone) keel.InvalidInput.
func scheduleError(err error, id string) error {
	if err == nil {
		return nil
	}
	var ke *keel.Error
	if errors.As(err, &ke) {
		return ke
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return keel.Errorf(keel.CodeNotFound, "schedule %s not found", id)
	}
	var bad *serviceerror.InvalidArgument
	if errors.As(err, &bad) {
		return keel.Errorf(keel.CodeInvalidInput, "Temporal refused the schedule: %s", clip(bad.Message, 200))
	}
	return err
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
