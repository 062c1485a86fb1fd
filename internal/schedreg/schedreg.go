// Package schedreg holds what only keel's own workflows and workers say
// to one another about schedules (docs/contract.md §22): the
// ScheduleRegistry workflow's names, its requests, answers and state,
// the quotas it counts (ScheduleLimits, a worker's keel.yaml limits), and
// the activities of the ScheduledSend workflow with their inputs. What
// clients create, change and describe is in package api (Schedule,
// ScheduleStatus, ScheduledSendInput...).
package schedreg

import (
	"strings"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Quotas of schedules (docs/contract.md §22.11). One ScheduleRegistry
// workflow per namespace holds them: the schedules that exist, each with
// its owner (the prefix of the API key that made it), and the recent
// firings of each. Its updates are the only place a quota is counted, so
// no two creates, from any gateway or client, both take the last place.
const (
	// ScheduleRegistryWorkflowName is the registry's workflow type, and
	// ScheduleRegistryID its one workflow's ID.
	ScheduleRegistryWorkflowName = "ScheduleRegistry"
	ScheduleRegistryID           = "keel-schedules"
	// UpdateReserveSchedule takes a place for a schedule about to be
	// created (ScheduleReservation); UpdateReleaseSchedule gives it back
	// (the schedule's ID); UpdateAdmitFiring asks whether a firing may
	// send (FiringAdmission, answered by a FiringVerdict).
	UpdateReserveSchedule = "reserve_schedule"
	UpdateReleaseSchedule = "release_schedule"
	UpdateAdmitFiring     = "admit_firing"
	// ReserveScheduleActivity reserves a place for a schedule at create,
	// under the worker's limits (ScheduleReservation).
	ReserveScheduleActivity = "ReserveSchedule"
	// ScheduleRegistryUpdatesPerRun is how many updates one execution of
	// the registry takes before it continues as new with its state.
	ScheduleRegistryUpdatesPerRun = 1000
)

// Defaults and bounds of ScheduleLimits (keel.yaml's limits: schedules,
// schedules_per_prefix, schedule_min_interval,
// schedule_sessions_per_hour; docs/config.md).
const (
	// MaxSchedules is the default of ScheduleLimits.Schedules.
	MaxSchedules = 1000
	// MaxSchedulesCeiling bounds ScheduleLimits.Schedules: the registry
	// holds every schedule in one workflow's state.
	MaxSchedulesCeiling = 2000
	// DefaultSchedulesPerPrefix is the default of PerPrefix: a tenth of
	// the namespace, so that one key cannot fill it alone.
	DefaultSchedulesPerPrefix = 100
	// DefaultScheduleMinInterval is the default of MinInterval: a
	// minute, what a cron expression without seconds fires at most.
	DefaultScheduleMinInterval = keel.Duration(time.Minute)
	// MaxScheduleMinInterval bounds MinInterval.
	MaxScheduleMinInterval = keel.Duration(24 * time.Hour)
	// DefaultScheduleSessionsPerHour is the default of SessionsPerHour.
	DefaultScheduleSessionsPerHour = 12
	// MaxScheduleSessionsPerHour bounds SessionsPerHour.
	MaxScheduleSessionsPerHour = 3600
)

// ScheduleLimits bound the schedules of a namespace and what each may
// fire. A worker holds them (keel.yaml); create and each firing ask the
// registry with the worker's values. Zero fields take the defaults.
type ScheduleLimits struct {
	// Schedules is the most schedules the namespace holds. Default
	// MaxSchedules, at most MaxSchedulesCeiling.
	Schedules int `json:"schedules,omitempty"`
	// PerPrefix is the most schedules the keys of one prefix hold
	// together. Default DefaultSchedulesPerPrefix.
	PerPrefix int `json:"per_prefix,omitempty"`
	// MinInterval is the least time between two firings of a schedule,
	// by their nominal times: every must be at least this, and a firing
	// sooner after the last (a trigger, a cron expression with seconds)
	// is refused. Default DefaultScheduleMinInterval, from
	// api.MinScheduleEvery to MaxScheduleMinInterval.
	MinInterval keel.Duration `json:"min_interval,omitempty"`
	// SessionsPerHour bounds the sessions a new_session schedule makes:
	// it may make this many at once, then earns one every hour divided by
	// this, holding at most this many. Default
	// DefaultScheduleSessionsPerHour.
	SessionsPerHour int `json:"sessions_per_hour,omitempty"`
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l ScheduleLimits) WithDefaults() ScheduleLimits {
	if l.Schedules <= 0 {
		l.Schedules = MaxSchedules
	}
	if l.PerPrefix <= 0 {
		l.PerPrefix = DefaultSchedulesPerPrefix
	}
	if l.MinInterval <= 0 {
		l.MinInterval = DefaultScheduleMinInterval
	}
	if l.SessionsPerHour <= 0 {
		l.SessionsPerHour = DefaultScheduleSessionsPerHour
	}
	return l
}

// Validate checks l's fields against their bounds (zero is the default).
func (l ScheduleLimits) Validate() error {
	switch {
	case l.Schedules < 0 || l.Schedules > MaxSchedulesCeiling:
		return keel.Errorf(keel.CodeInvalidInput, "schedules must be from 1 to %d", MaxSchedulesCeiling)
	case l.PerPrefix < 0:
		return keel.Errorf(keel.CodeInvalidInput, "schedules_per_prefix must be positive")
	case l.MinInterval != 0 && (l.MinInterval < api.MinScheduleEvery || l.MinInterval > MaxScheduleMinInterval):
		return keel.Errorf(keel.CodeInvalidInput, "schedule_min_interval must be from %s to %s", api.MinScheduleEvery, MaxScheduleMinInterval)
	case l.SessionsPerHour < 0 || l.SessionsPerHour > MaxScheduleSessionsPerHour:
		return keel.Errorf(keel.CodeInvalidInput, "schedule_sessions_per_hour must be from 1 to %d", MaxScheduleSessionsPerHour)
	}
	return nil
}

// ScheduleReservation asks the registry for a schedule's place: the
// schedule's ID and its owner, the prefix of the API key that creates it
// ("" for a key without one, or a client of Temporal's own), counted
// against Limits.
type ScheduleReservation struct {
	ID     string         `json:"id"`
	Owner  string         `json:"owner,omitempty"`
	Limits ScheduleLimits `json:"limits"`
}

// Validate checks a reservation's names and limits.
func (r ScheduleReservation) Validate() error {
	if err := api.ValidateScheduleID(r.ID); err != nil {
		return err
	}
	if r.Owner != "" {
		if err := keel.ValidateSessionID(r.Owner); err != nil {
			return keel.Errorf(keel.CodeInvalidInput, "a schedule's owner is a session prefix")
		}
	}
	return r.Limits.Validate()
}

// FiringAdmission asks the registry whether a firing may send: the
// schedule, the firing (its send's update ID, so that a retried attempt
// is admitted again), its nominal time, and whether it makes a session.
type FiringAdmission struct {
	Schedule   string         `json:"schedule"`
	Firing     string         `json:"firing"`
	At         time.Time      `json:"at"`
	NewSession bool           `json:"new_session,omitempty"`
	Limits     ScheduleLimits `json:"limits"`
}

// MaxFiringIDBytes bounds FiringAdmission.Firing.
const MaxFiringIDBytes = 512

// Validate checks an admission's names and limits.
func (a FiringAdmission) Validate() error {
	if err := api.ValidateScheduleID(a.Schedule); err != nil {
		return err
	}
	if a.Firing == "" || len(a.Firing) > MaxFiringIDBytes {
		return keel.Errorf(keel.CodeInvalidInput, "a firing's ID must be 1 to %d bytes", MaxFiringIDBytes)
	}
	return a.Limits.Validate()
}

// The reasons a firing is refused (FiringVerdict.Reason, and the label
// reason of the metric keel_schedule_firings_refused_total).
const (
	RefusedInterval = "interval"
	RefusedSessions = "sessions"
)

// FiringVerdict answers a FiringAdmission: Refused is nil when the
// firing may send, else why not (keel.TooMany), with Reason.
type FiringVerdict struct {
	Refused *keel.Error `json:"refused,omitempty"`
	Reason  string      `json:"reason,omitempty"`
}

// ScheduleRegistryState is what one execution of the registry hands the
// next: the schedules it counts, and what it remembers of each
// schedule's firings, by ID.
type ScheduleRegistryState struct {
	Schedules map[string]ScheduleEntry `json:"schedules,omitempty"`
}

// ScheduleEntry is one schedule in the registry. Held says a place is
// taken (a schedule was reserved and not released); the rest is its
// firings': the last admitted (Firing, at nominal time Last), and the
// sessions it may still make (Sessions, as of SessionsAt).
type ScheduleEntry struct {
	Held       bool      `json:"held,omitempty"`
	Owner      string    `json:"owner,omitempty"`
	Firing     string    `json:"firing,omitempty"`
	Last       time.Time `json:"last,omitzero"`
	Sessions   float64   `json:"sessions,omitempty"`
	SessionsAt time.Time `json:"sessions_at,omitzero"`
}

// CheckPace checks that s fires no more often than lim allows: every at
// least MinInterval, and, when MinInterval is a minute or more, a cron
// expression with a seconds field (7 fields) at one second of the minute
// only. A cron expression may still fire sooner than MinInterval (every
// minute, under a limit of an hour): those firings are refused as they
// come (FiringAdmission).
func CheckPace(s api.Schedule, lim ScheduleLimits) error {
	lim = lim.WithDefaults()
	if s.Every != 0 && s.Every < lim.MinInterval {
		return keel.Errorf(keel.CodeInvalidInput, "every must be at least %s (the worker's schedule_min_interval)", lim.MinInterval)
	}
	if f := strings.Fields(s.Cron); len(f) == 7 && lim.MinInterval >= keel.Duration(time.Minute) &&
		strings.TrimLeft(f[0], "0123456789") != "" {
		return keel.Errorf(keel.CodeInvalidInput,
			"cron: the seconds field must be one second: schedules fire at most once a %s (the worker's schedule_min_interval)", lim.MinInterval)
	}
	return nil
}

// The activities of the ScheduledSend workflow (api.ScheduledSendWorkflowName),
// run by keel's workers.
const (
	// CheckSchedule checks a schedule against the worker's rules,
	// SendScheduled checks it again and sends its prompt
	// (ScheduledSendRequest), and AwaitScheduledRun waits for the run's
	// outcome (ScheduledRunRef).
	CheckScheduleActivity     = "CheckSchedule"
	SendScheduledActivity     = "SendScheduled"
	AwaitScheduledRunActivity = "AwaitScheduledRun"
	// PauseScheduleActivity pauses the schedule of a failed firing
	// (api.Schedule.PauseOnFailure; SchedulePause).
	PauseScheduleActivity = "PauseSchedule"
)

// ScheduledSendRequest is the input of the SendScheduled activity: the
// schedule, the firing's nominal time, and the ID of its send update, the
// same on every attempt, so a retried attempt is applied once.
type ScheduledSendRequest struct {
	Schedule api.Schedule `json:"schedule"`
	At       time.Time    `json:"at"`
	UpdateID string       `json:"update_id"`
}

// SchedulePause is the input of the PauseSchedule activity.
type SchedulePause struct {
	ID   string `json:"id"`
	Note string `json:"note"`
}

// ScheduledRunRef is the input of the AwaitScheduledRun activity.
type ScheduledRunRef struct {
	Session string `json:"session"`
	Number  int    `json:"number"`
}
