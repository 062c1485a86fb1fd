package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/schedreg"
)

// ScheduleRegistryWorkflow counts a namespace's schedules and paces their
// firings (docs/contract.md §22.11). Its updates run one at a time and
// never block, so a count read and the place taken are one step: no two
// creates, from however many gateways and workers, both take the last
// place. It continues as new after schedreg.ScheduleRegistryUpdatesPerRun
// updates, or when Temporal suggests it, once its handlers finished,
// dropping what it remembers of the firings of schedules that are gone.
func ScheduleRegistryWorkflow(ctx workflow.Context, st schedreg.ScheduleRegistryState) error {
	reg := scheduleRegistry{st: st}
	if reg.st.Schedules == nil {
		reg.st.Schedules = map[string]schedreg.ScheduleEntry{}
	}
	updates := 0
	handlers := []struct {
		name string
		fn   any
		v    any
	}{
		{schedreg.UpdateReserveSchedule, func(ctx workflow.Context, r schedreg.ScheduleReservation) error {
			updates++
			return reg.reserve(r)
		}, func(r schedreg.ScheduleReservation) error { return validated(r.Validate()) }},
		{schedreg.UpdateReleaseSchedule, func(ctx workflow.Context, id string) error {
			updates++
			reg.release(id)
			return nil
		}, func(id string) error { return validated(api.ValidateScheduleID(id)) }},
		{schedreg.UpdateAdmitFiring, func(ctx workflow.Context, a schedreg.FiringAdmission) (schedreg.FiringVerdict, error) {
			updates++
			return reg.admit(a), nil
		}, func(a schedreg.FiringAdmission) error { return validated(a.Validate()) }},
	}
	for _, h := range handlers {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.fn, workflow.UpdateHandlerOptions{Validator: h.v}); err != nil {
			return err
		}
	}
	if err := workflow.Await(ctx, func() bool {
		return updates >= schedreg.ScheduleRegistryUpdatesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	reg.forget(workflow.Now(ctx))
	return workflow.NewContinueAsNewError(ctx, schedreg.ScheduleRegistryWorkflowName, reg.st)
}

// validated hands a validation's keel error to the caller.
func validated(err error) error {
	if err == nil {
		return nil
	}
	return wireError(asKeelError(err))
}

// scheduleRegistry is the registry's state and its rules.
type scheduleRegistry struct {
	st schedreg.ScheduleRegistryState
}

// reserve takes a place for r.ID if it is free and both quotas allow it.
func (g *scheduleRegistry) reserve(r schedreg.ScheduleReservation) error {
	lim := r.Limits.WithDefaults()
	e := g.st.Schedules[r.ID]
	if e.Held {
		return wireError(keel.Errorf(keel.CodeInvalidInput, "a schedule with ID %s exists", r.ID))
	}
	total, owned := 0, 0
	for _, o := range g.st.Schedules {
		if o.Held {
			total++
			if o.Owner == r.Owner {
				owned++
			}
		}
	}
	switch {
	case total >= lim.Schedules:
		// Not the count: a key limited to a prefix learns nothing of
		// the schedules outside it.
		return wireError(keel.Errorf(keel.CodeTooMany, "the namespace holds the most schedules it may: %d", lim.Schedules))
	case r.Owner != "" && owned >= lim.PerPrefix:
		return wireError(keel.Errorf(keel.CodeTooMany, "this key's prefix holds %d schedules; the limit is %d", owned, lim.PerPrefix))
	}
	e.Held, e.Owner = true, r.Owner
	g.st.Schedules[r.ID] = e
	return nil
}

// release gives a schedule's place back. What it remembers of its
// firings stays until forget: a schedule deleted and made again under
// the same ID keeps its pace.
func (g *scheduleRegistry) release(id string) {
	if e, ok := g.st.Schedules[id]; ok {
		e.Held, e.Owner = false, ""
		g.st.Schedules[id] = e
	}
}

// admit decides whether a firing may send: not within MinInterval of the
// last admitted firing (by nominal times, so a schedule that fires every
// MinInterval passes however late its firings start), and, when it makes
// a session, not past the schedule's sessions. A firing already admitted
// (a retried attempt) is admitted again.
func (g *scheduleRegistry) admit(a schedreg.FiringAdmission) schedreg.FiringVerdict {
	lim := a.Limits.WithDefaults()
	e := g.st.Schedules[a.Schedule]
	if e.Firing == a.Firing {
		return schedreg.FiringVerdict{}
	}
	if !e.Last.IsZero() && absDuration(a.At.Sub(e.Last)) < lim.MinInterval.Std() {
		return schedreg.FiringVerdict{Reason: schedreg.RefusedInterval, Refused: keel.Errorf(keel.CodeTooMany,
			"the schedule fired less than %s before (its firing of %s); the limit is one a %s", lim.MinInterval,
			e.Last.UTC().Format(time.RFC3339), lim.MinInterval)}
	}
	if a.NewSession {
		// A bucket of SessionsPerHour sessions, refilled at that rate.
		capacity := float64(lim.SessionsPerHour)
		have := capacity
		if !e.SessionsAt.IsZero() {
			have = min(capacity, e.Sessions+a.At.Sub(e.SessionsAt).Hours()*capacity)
		}
		if have < 1 {
			return schedreg.FiringVerdict{Reason: schedreg.RefusedSessions, Refused: keel.Errorf(keel.CodeTooMany,
				"the schedule made its %d new sessions of the hour; the limit is %d an hour", lim.SessionsPerHour, lim.SessionsPerHour)}
		}
		e.Sessions, e.SessionsAt = have-1, a.At
	}
	e.Firing = a.Firing
	if a.At.After(e.Last) {
		e.Last = a.At
	}
	g.st.Schedules[a.Schedule] = e
	return schedreg.FiringVerdict{}
}

// forgetAfter is how long the registry remembers the firings of a
// schedule that is gone: past the longest interval and a full bucket.
const forgetAfter = time.Duration(schedreg.MaxScheduleMinInterval) + time.Hour

// forget drops the schedules that are gone and fired long ago.
func (g *scheduleRegistry) forget(now time.Time) {
	for id, e := range g.st.Schedules {
		if !e.Held && now.Sub(e.Last) > forgetAfter {
			delete(g.st.Schedules, id)
		}
	}
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
