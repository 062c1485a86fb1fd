package api

import (
	"time"

	"github.com/keelrun/keel"
)

// Names of the schedule surfaces (docs/contract.md §22). A keel schedule is
// a Temporal Schedule whose ID is the schedule's ID and whose action starts
// a ScheduledSend workflow on TaskQueue; that workflow sends the prompt
// through the session's "send" update, as any client does.
const (
	// ScheduledSendWorkflowName is the workflow type a schedule's action
	// starts (ScheduledSendInput): one execution per firing.
	ScheduledSendWorkflowName = "ScheduledSend"
	// ScheduleActionIDPrefix starts the workflow ID of every firing:
	// "keel-schedule:ID", to which Temporal appends the firing's time. A
	// ':' never occurs in a session ID, so no firing takes a session's ID.
	ScheduleActionIDPrefix = "keel-schedule:"
	// ScheduleCheckIDPrefix starts the workflow ID of the check that
	// create and update run on a worker (ScheduledSendInput.Check).
	ScheduleCheckIDPrefix = "keel-schedule-check:"
)

// Limits of a schedule's definition (docs/contract.md §22.2). Over one,
// create and update answer keel.InvalidInput (keel.TooLarge for sizes).
const (
	// MaxScheduleIDLength bounds a schedule's ID, so that the session ID
	// of a firing of --new-session (ScheduledSessionID) stays within
	// keel.MaxIDLength.
	MaxScheduleIDLength = keel.MaxIDLength - len("-20060102T150405Z")
	// MaxCronBytes bounds a cron expression.
	MaxCronBytes = 256
	// MaxTimezoneBytes bounds a time-zone name.
	MaxTimezoneBytes = 64
	// MinScheduleEvery is the shortest interval of Every.
	MinScheduleEvery = keel.Duration(time.Second)
	// MaxScheduleJitter bounds Jitter.
	MaxScheduleJitter = keel.Duration(24 * time.Hour)
	// DefaultCatchupWindow is how late a firing missed while the server
	// was down may still be taken when it is back; older ones are
	// dropped (counted in ScheduleStatus.Missed). Temporal's own default
	// is a year; ten minutes covers a restart or a deploy without sending
	// a burst of stale prompts after a long outage.
	DefaultCatchupWindow = keel.Duration(10 * time.Minute)
	// MinCatchupWindow and MaxCatchupWindow bound CatchupWindow
	// (Temporal's minimum is ten seconds).
	MinCatchupWindow = keel.Duration(10 * time.Second)
	MaxCatchupWindow = keel.Duration(365 * 24 * time.Hour)
	// MaxScheduleTools bounds the tool names of a schedule's config, and
	// MaxToolNameBytes each name.
	MaxScheduleTools = 128
	MaxToolNameBytes = 128
	// MaxModelSpecBytes bounds a schedule's model spec.
	MaxModelSpecBytes = 256
	// MaxScheduleNoteBytes bounds the note of a pause or unpause.
	MaxScheduleNoteBytes = 1024
)

// Overlap says what a firing does while a run is active in the schedule's
// session: skip the firing, queue the prompt as the next run, or steer the
// active run with it (IfActive reject, queue, and the client's OrSteer).
type Overlap string

// The choices of Overlap.
const (
	OverlapSkip  Overlap = "skip"
	OverlapQueue Overlap = "queue"
	OverlapSteer Overlap = "steer"
)

// ScheduleSpec says when a schedule fires: at the times of Cron, every
// Every, or both, in Timezone, each firing delayed by a random amount up
// to Jitter.
type ScheduleSpec struct {
	// Cron is a cron expression of 5 to 7 fields ("0 9 * * 1-5"), as
	// Temporal reads them, or a shorthand such as "@hourly".
	Cron string `json:"cron,omitempty"`
	// Every fires at every multiple of this interval since the epoch.
	Every keel.Duration `json:"every,omitempty"`
	// Timezone is an IANA time-zone name for Cron. Default UTC.
	Timezone string `json:"timezone,omitempty"`
	// Jitter delays each firing by a random amount up to it. Default 0.
	Jitter keel.Duration `json:"jitter,omitempty"`
}

// Schedule is a keel schedule: a prompt sent on a schedule, through the
// same send path as any prompt (docs/contract.md §22). Its fields are
// what a client may send: model and tool names the worker offers, never a
// file, a URL or a command.
type Schedule struct {
	// ID names the schedule (and its Temporal Schedule): 1 to
	// MaxScheduleIDLength letters, digits, '-' and '_'.
	ID string `json:"id"`
	ScheduleSpec
	// Prompt is what each firing sends.
	Prompt string `json:"prompt"`
	// Session is the session each firing sends to. Default: the session
	// named ID, unless NewSession.
	Session string `json:"session,omitempty"`
	// NewSession gives each firing a new session, named by
	// ScheduledSessionID. It cannot go with Session or Overlap.
	NewSession bool `json:"new_session,omitempty"`
	// Config is the run's configuration (model, tools, system prompt,
	// limits, budgets), for that run only, as a send's WithConfig.
	// Optional: the session's defaults.
	Config *RunConfig `json:"config,omitempty"`
	// Overlap says what a firing does while a run is active in Session.
	// Default OverlapSkip.
	Overlap Overlap `json:"overlap,omitempty"`
	// PauseOnFailure pauses the schedule when a firing fails: its send
	// was refused, or the run it started failed. A firing then waits for
	// its run's outcome, and pauses the schedule itself when it fails.
	PauseOnFailure bool `json:"pause_on_failure,omitempty"`
	// CatchupWindow is how late a missed firing may still be taken.
	// Default DefaultCatchupWindow.
	CatchupWindow keel.Duration `json:"catchup_window,omitempty"`
}

// Target returns the session the schedule's firings send to, "" when
// each firing gets a new one.
func (s Schedule) Target() string {
	switch {
	case s.NewSession:
		return ""
	case s.Session != "":
		return s.Session
	}
	return s.ID
}

// OverlapOrDefault returns Overlap with its default filled in.
func (s Schedule) OverlapOrDefault() Overlap {
	if s.Overlap == "" {
		return OverlapSkip
	}
	return s.Overlap
}

// CatchupOrDefault returns CatchupWindow with its default filled in.
func (s Schedule) CatchupOrDefault() keel.Duration {
	if s.CatchupWindow == 0 {
		return DefaultCatchupWindow
	}
	return s.CatchupWindow
}

// ScheduledSessionID is the session of the firing at at of a schedule with
// NewSession: "ID-20060102T150405Z", the firing's nominal time in UTC.
func ScheduledSessionID(scheduleID string, at time.Time) string {
	return scheduleID + "-" + at.UTC().Format("20060102T150405Z")
}

// ScheduledSendInput is the input of a ScheduledSend workflow: the
// schedule as its action holds it. With Check set, the workflow only
// checks the schedule against the worker's rules and sends nothing.
type ScheduledSendInput struct {
	Schedule Schedule `json:"schedule"`
	Check    bool     `json:"check,omitempty"`
	// Reserve, with Check, also takes the schedule's place in the
	// registry (create does), counted against
	// Owner's quota and the namespace's.
	Reserve bool   `json:"reserve,omitempty"`
	Owner   string `json:"owner,omitempty"`
}

// PausedByFailureNote starts the note of a schedule that a failed firing
// paused (Schedule.PauseOnFailure); the firing's workflow ID and why it
// failed follow.
const PausedByFailureNote = "paused after a failed firing: "

// ScheduledSendResult is what a firing did: the ScheduledSend workflow's
// result, and the details of its failure when it failed.
type ScheduledSendResult struct {
	// Session is the session the firing sent to (refused, the one it
	// would have; a new one was not made).
	Session string `json:"session"`
	// RunID and Number name the run that carries the prompt: the run it
	// started or queued, or, when it steered, the active run it steered.
	RunID  string `json:"run_id,omitempty"`
	Number int    `json:"number,omitempty"`
	Queued bool   `json:"queued,omitempty"`
	// SteeringID is set when the prompt became steering (OverlapSteer).
	SteeringID string `json:"steering_id,omitempty"`
	// Skipped says a run was active and the firing sent nothing
	// (OverlapSkip); RunID names that run.
	Skipped bool `json:"skipped,omitempty"`
	// Outcome is the run's outcome, when the firing waited for it
	// (Schedule.PauseOnFailure).
	Outcome *keel.Outcome `json:"outcome,omitempty"`
	// Refused says a limit of the worker refused the firing (keel.yaml's
	// schedule limits: its interval, or the sessions it may make), and
	// why: it sent nothing.
	Refused *keel.Error `json:"refused,omitempty"`
}

// FiringFailure is the detail of a failed ScheduledSend workflow: why it
// failed and, when the run it started failed, what it had done.
type FiringFailure struct {
	Error  keel.Error           `json:"error"`
	Result *ScheduledSendResult `json:"result,omitempty"`
}

// ScheduleState says whether a schedule fires.
type ScheduleState struct {
	Paused bool `json:"paused"`
	// Note is why: the note of the last pause or unpause, or Temporal's
	// when a failure paused the schedule.
	Note string `json:"note,omitempty"`
}

// ScheduleStatus is a schedule's description (describe).
type ScheduleStatus struct {
	Schedule Schedule `json:"schedule"`
	ScheduleState
	// PausedByFailure says a failed firing paused the schedule
	// (PauseOnFailure); Failure is that firing's error.
	PausedByFailure bool        `json:"paused_by_failure,omitempty"`
	Failure         *keel.Error `json:"failure,omitempty"`
	// Next are the next firing times (up to 10), none while paused.
	Next []time.Time `json:"next"`
	// Recent are the latest firings (up to 10), oldest first.
	Recent []ScheduleFiring `json:"recent"`
	// Fired counts the firings so far; Missed those dropped because they
	// were later than the catch-up window.
	Fired  int `json:"fired"`
	Missed int `json:"missed,omitempty"`
	// Created and Updated are when the schedule was created and last
	// changed.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated,omitzero"`
}

// The statuses of a ScheduleFiring.
const (
	// FiringSending: the firing's workflow is still sending the prompt.
	FiringSending = "sending"
	// FiringSent: the prompt reached its session (RunStatus says how the
	// run is doing).
	FiringSent = "sent"
	// FiringSkipped: a run was active and the schedule skips.
	FiringSkipped = "skipped"
	// FiringFailed: the send was refused, or, with PauseOnFailure, the
	// run failed; Error says why.
	FiringFailed = "failed"
	// FiringRefused: a limit refused the firing (keel.yaml's schedule
	// limits); it sent nothing, and Error says which.
	FiringRefused = "refused"
)

// ScheduleFiring is one firing of a schedule.
type ScheduleFiring struct {
	// ScheduledAt is the firing's time (with jitter), StartedAt when its
	// workflow started.
	ScheduledAt time.Time `json:"scheduled_at"`
	StartedAt   time.Time `json:"started_at"`
	// WorkflowID is the firing's ScheduledSend workflow.
	WorkflowID string `json:"workflow_id"`
	// Status is FiringSending, FiringSent, FiringSkipped, FiringFailed
	// or FiringRefused.
	Status string `json:"status"`
	// Result is what the firing did, once it sent (or skipped).
	Result *ScheduledSendResult `json:"result,omitempty"`
	// Run is the state of the run the firing started or queued: active,
	// completed, failed or cancelled ("" when unknown).
	Run keel.RunStatus `json:"run,omitempty"`
	// Error is why the firing failed.
	Error *keel.Error `json:"error,omitempty"`
}

// ScheduleSummary is a schedule as a list shows it.
type ScheduleSummary struct {
	ID string `json:"id"`
	ScheduleState
	// Next is the next firing time, absent while paused.
	Next *time.Time `json:"next,omitempty"`
	// Last is the latest firing's time, absent before the first.
	Last *time.Time `json:"last,omitempty"`
}

// ScheduleChange changes a schedule (update): each field that is set
// replaces the schedule's. Config replaces the whole config.
type ScheduleChange struct {
	Cron           *string        `json:"cron,omitempty"`
	Every          *keel.Duration `json:"every,omitempty"`
	Timezone       *string        `json:"timezone,omitempty"`
	Jitter         *keel.Duration `json:"jitter,omitempty"`
	Prompt         *string        `json:"prompt,omitempty"`
	Session        *string        `json:"session,omitempty"`
	NewSession     *bool          `json:"new_session,omitempty"`
	Config         *RunConfig     `json:"config,omitempty"`
	Overlap        *Overlap       `json:"overlap,omitempty"`
	PauseOnFailure *bool          `json:"pause_on_failure,omitempty"`
	CatchupWindow  *keel.Duration `json:"catchup_window,omitempty"`
}

// Apply returns s with the change's set fields. Setting Session clears
// NewSession, and setting NewSession clears Session and Overlap, so a
// change from one to the other needs only the field it is about.
func (c ScheduleChange) Apply(s Schedule) Schedule {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setD := func(dst *keel.Duration, v *keel.Duration) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Cron, c.Cron)
	setD(&s.Every, c.Every)
	set(&s.Timezone, c.Timezone)
	setD(&s.Jitter, c.Jitter)
	set(&s.Prompt, c.Prompt)
	if c.Session != nil {
		s.Session, s.NewSession = *c.Session, false
	}
	if c.NewSession != nil {
		s.NewSession = *c.NewSession
		if s.NewSession {
			s.Session, s.Overlap = "", ""
		}
	}
	if c.Config != nil {
		cfg := *c.Config
		s.Config = &cfg
	}
	if c.Overlap != nil {
		s.Overlap = *c.Overlap
	}
	if c.PauseOnFailure != nil {
		s.PauseOnFailure = *c.PauseOnFailure
	}
	setD(&s.CatchupWindow, c.CatchupWindow)
	return s
}
