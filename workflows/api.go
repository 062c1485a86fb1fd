package workflows

import "github.com/keelrun/keel/api"

// The wire contract lives in package api, which clients import without
// pulling in workflow, activity or provider code. These aliases keep the
// workflow code (and existing callers) reading as before.

type (
	RunConfig      = api.RunConfig
	Approval       = api.Approval
	SessionInput   = api.SessionInput
	HandOverLimits = api.HandOverLimits
	SessionCarry   = api.SessionCarry
	EventSegment   = api.EventSegment
	IfActive       = api.IfActive
	SendRequest    = api.SendRequest
	SendResult     = api.SendResult
	RunInput       = api.RunInput
	RunResult      = api.RunResult
	EventsQuery    = api.EventsQuery
	EventsPage     = api.EventsPage
	RunRef         = api.RunRef
	OutcomeRequest = api.OutcomeRequest
	CancelRequest  = api.CancelRequest
	SessionStatus  = api.SessionStatus
	ClosedSession  = api.ClosedSession
	RunStatus      = api.RunStatus
	HistoryQuery   = api.HistoryQuery
	HistoryPage    = api.HistoryPage
	SteerRequest   = api.SteerRequest
	SteerResult    = api.SteerResult
	RetractRequest = api.RetractRequest
	Retraction     = api.Retraction
	RetractResult  = api.RetractResult
	RespondRequest = api.RespondRequest
	HostRequest    = api.HostRequest
	ShutdownResult = api.ShutdownResult
	RuntimeStatus  = api.RuntimeStatus
	Committed      = api.Committed
)

const (
	ApprovalAllow = api.ApprovalAllow
	ApprovalAsk   = api.ApprovalAsk
	ApprovalDeny  = api.ApprovalDeny

	DefaultModel          = api.DefaultModel
	DefaultMaxSteps       = api.DefaultMaxSteps
	DefaultModelTimeout   = api.DefaultModelTimeout
	DefaultHeartbeatAfter = api.DefaultHeartbeatAfter
	DefaultCompactAt      = api.DefaultCompactAt

	DefaultHandOverEvents    = api.DefaultHandOverEvents
	DefaultHandOverBytes     = api.DefaultHandOverBytes
	DefaultHandOverTailBytes = api.DefaultHandOverTailBytes

	IfActiveReject = api.IfActiveReject
	IfActiveQueue  = api.IfActiveQueue

	Retracted      = api.Retracted
	AlreadyApplied = api.AlreadyApplied
	NotFound       = api.NotFound

	MaxPromptBytes      = api.MaxPromptBytes
	DefaultEventsLimit  = api.DefaultEventsLimit
	DefaultHistoryLimit = api.DefaultHistoryLimit
	MaxPageBytes        = api.MaxPageBytes

	TaskQueue           = api.TaskQueue
	SessionWorkflowName = api.SessionWorkflowName
	RunWorkflowName     = api.RunWorkflowName
	RuntimeWorkflowName = api.RuntimeWorkflowName
	RuntimeWorkflowID   = api.RuntimeWorkflowID
	RunPriority         = api.RunPriority

	UpdateSend            = api.UpdateSend
	UpdateSteer           = api.UpdateSteer
	UpdateRetractSteering = api.UpdateRetractSteering
	UpdateRespond         = api.UpdateRespond
	UpdateOutcome         = api.UpdateOutcome
	UpdateShutdown        = api.UpdateShutdown
	SignalCancel          = api.SignalCancel
	SignalShutdown        = api.SignalShutdown
	SignalMove            = api.SignalMove
	QueryState            = api.QueryState
	QueryHistory          = api.QueryHistory
	QueryEvents           = api.QueryEvents
)

// Search attributes keel sets (see api).
var (
	AttrSessionID = api.AttrSessionID
	AttrState     = api.AttrState
	AttrRunNumber = api.AttrRunNumber
	AttrModel     = api.AttrModel
)
