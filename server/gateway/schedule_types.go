package gateway

import (
	"encoding/json"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// The bodies of the schedule routes (docs/gateway.md, "Schedules";
// docs/contract.md §22).

// ScheduleConfig is a schedule's run configuration over HTTP: the fields
// a prompt's POST .../runs may set, for each firing's run only (so not
// model_timeout, heartbeat_timeout or compact_at, as RunRequest says).
type ScheduleConfig struct {
	// Agent names one of the worker's agents (docs/contract.md §21.2):
	// it defines the model, instructions, tools and output schema, so a
	// config that names it sets none of them.
	Agent         string                  `json:"agent,omitempty"`
	Model         string                  `json:"model,omitempty"`
	Tools         []string                `json:"tools,omitempty"`
	System        string                  `json:"system,omitempty"`
	MaxSteps      int                     `json:"max_steps,omitempty"`
	MaxTokens     int                     `json:"max_tokens,omitempty"`
	Approvals     map[string]api.Approval `json:"approvals,omitempty"`
	Budget        *api.Budget             `json:"budget,omitempty"`
	SessionBudget *api.Budget             `json:"session_budget,omitempty"`
	Reasoning     *keel.Reasoning         `json:"reasoning,omitempty"`
	// Hooks names hooks the worker offers for each firing's run, as
	// RunRequest's.
	Hooks []string `json:"hooks,omitempty"`
	// OutputSchema is the JSON Schema each firing's final answer must
	// match, as RunRequest's.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

func (c *ScheduleConfig) runConfig() *api.RunConfig {
	if c == nil {
		return nil
	}
	return &api.RunConfig{Agent: c.Agent, Model: c.Model, Tools: c.Tools, System: c.System, MaxSteps: c.MaxSteps, MaxTokens: c.MaxTokens,
		Approvals: c.Approvals, Budget: c.Budget, SessionBudget: c.SessionBudget, OutputSchema: c.OutputSchema, Reasoning: c.Reasoning,
		Hooks: c.Hooks}
}

func scheduleConfigOf(c *api.RunConfig) *ScheduleConfig {
	if c == nil {
		return nil
	}
	return &ScheduleConfig{Agent: c.Agent, Model: c.Model, Tools: c.Tools, System: c.System, MaxSteps: c.MaxSteps, MaxTokens: c.MaxTokens,
		Approvals: c.Approvals, Budget: c.Budget, SessionBudget: c.SessionBudget, OutputSchema: c.OutputSchema, Reasoning: c.Reasoning,
		Hooks: c.Hooks}
}

// Schedule is a schedule's definition: the body of POST /v1/schedules and
// part of every schedule's description. Durations are Go duration
// strings ("1h30m") or numbers of milliseconds.
type Schedule struct {
	ID string `json:"id"`
	api.ScheduleSpec
	Prompt         string          `json:"prompt"`
	Session        string          `json:"session,omitempty"`
	NewSession     bool            `json:"new_session,omitempty"`
	Config         *ScheduleConfig `json:"config,omitempty"`
	Overlap        api.Overlap     `json:"overlap,omitempty"`
	PauseOnFailure bool            `json:"pause_on_failure,omitempty"`
	CatchupWindow  keel.Duration   `json:"catchup_window,omitempty"`
}

func (s Schedule) schedule() api.Schedule {
	return api.Schedule{ID: s.ID, ScheduleSpec: s.ScheduleSpec, Prompt: s.Prompt, Session: s.Session,
		NewSession: s.NewSession, Config: s.Config.runConfig(), Overlap: s.Overlap, PauseOnFailure: s.PauseOnFailure,
		CatchupWindow: s.CatchupWindow}
}

func scheduleOf(s api.Schedule) Schedule {
	return Schedule{ID: s.ID, ScheduleSpec: s.ScheduleSpec, Prompt: s.Prompt, Session: s.Session,
		NewSession: s.NewSession, Config: scheduleConfigOf(s.Config), Overlap: s.Overlap, PauseOnFailure: s.PauseOnFailure,
		CatchupWindow: s.CatchupWindow}
}

// ScheduleChange is the body of PATCH /v1/schedules/{name}: each field
// present replaces the schedule's (config as a whole); session switches
// it to that session, new_session true to a new session each firing.
type ScheduleChange struct {
	Cron           *string         `json:"cron,omitempty"`
	Every          *keel.Duration  `json:"every,omitempty"`
	Timezone       *string         `json:"timezone,omitempty"`
	Jitter         *keel.Duration  `json:"jitter,omitempty"`
	Prompt         *string         `json:"prompt,omitempty"`
	Session        *string         `json:"session,omitempty"`
	NewSession     *bool           `json:"new_session,omitempty"`
	Config         *ScheduleConfig `json:"config,omitempty"`
	Overlap        *api.Overlap    `json:"overlap,omitempty"`
	PauseOnFailure *bool           `json:"pause_on_failure,omitempty"`
	CatchupWindow  *keel.Duration  `json:"catchup_window,omitempty"`
}

func (c ScheduleChange) change() api.ScheduleChange {
	return api.ScheduleChange{Cron: c.Cron, Every: c.Every, Timezone: c.Timezone, Jitter: c.Jitter, Prompt: c.Prompt,
		Session: c.Session, NewSession: c.NewSession, Config: c.Config.runConfig(), Overlap: c.Overlap,
		PauseOnFailure: c.PauseOnFailure, CatchupWindow: c.CatchupWindow}
}

// ScheduleStatus is a schedule's description: GET /v1/schedules/{name},
// and the answer of create and update (api.ScheduleStatus).
type ScheduleStatus struct {
	Schedule Schedule `json:"schedule"`
	api.ScheduleState
	PausedByFailure bool                 `json:"paused_by_failure,omitempty"`
	Failure         *keel.Error          `json:"failure,omitempty"`
	Next            []time.Time          `json:"next"`
	Recent          []api.ScheduleFiring `json:"recent"`
	Fired           int                  `json:"fired"`
	Missed          int                  `json:"missed,omitempty"`
	Created         time.Time            `json:"created"`
	Updated         time.Time            `json:"updated,omitzero"`
}

func scheduleStatusOf(st api.ScheduleStatus) ScheduleStatus {
	return ScheduleStatus{Schedule: scheduleOf(st.Schedule), ScheduleState: st.ScheduleState,
		PausedByFailure: st.PausedByFailure, Failure: st.Failure, Next: st.Next, Recent: st.Recent, Fired: st.Fired,
		Missed: st.Missed, Created: st.Created, Updated: st.Updated}
}

// SchedulesResponse is the answer of GET /v1/schedules: the schedules,
// sorted by ID, and whether more than the limit matched.
type SchedulesResponse struct {
	Schedules []api.ScheduleSummary `json:"schedules"`
	Truncated bool                  `json:"truncated"`
}

// ScheduleNote is the optional body of POST .../pause and .../unpause.
type ScheduleNote struct {
	Note string `json:"note,omitempty"`
}
