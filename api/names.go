package api

import "go.temporal.io/sdk/temporal"

// Search attributes keel sets on its workflows, so sessions can be listed
// (for example in the Web UI: KeelSessionID = "demo"). KeelSessionID and
// KeelParent are set when a session starts. KeelState, KeelRunNumber and
// KeelModel are upserted only by executions without ShapeLean (started by
// keel v0.1.0's clients), and the execution after theirs keeps their last
// values: a session's state is its QueryState answer.
var (
	AttrSessionID = temporal.NewSearchAttributeKeyKeyword("KeelSessionID")
	AttrState     = temporal.NewSearchAttributeKeyKeyword("KeelState")
	AttrRunNumber = temporal.NewSearchAttributeKeyInt64("KeelRunNumber")
	AttrModel     = temporal.NewSearchAttributeKeyKeyword("KeelModel")
	// AttrParent is set on a fork's session: the session it was forked
	// from, so a session's forks can be listed (docs/contract.md §19).
	AttrParent = temporal.NewSearchAttributeKeyKeyword("KeelParent")
)

// TaskQueue is the task queue keel's workers poll.
const TaskQueue = "keel"

// SessionPriority is the task priority, on Temporal's scale of 1 (first)
// to 5, that keel's clients start sessions with (their activities inherit
// it), and the rate-limit workflows take.
const SessionPriority = 1

// Workflow, update, signal and query names: stable surfaces that the
// temporal CLI and other clients rely on.
const (
	SessionWorkflowName = "Session"

	UpdateSend            = "send"
	UpdateSteer           = "steer"
	UpdateRetractSteering = "retract_steering"
	UpdateRespond         = "respond"
	// UpdateOutcome waits for a run of the session to be committed and
	// answers its keel.Outcome (OutcomeRequest).
	UpdateOutcome  = "outcome"
	SignalCancel   = "cancel"
	SignalShutdown = "shutdown"
	// SignalMove makes an idle session continue as new at once, so
	// that its next execution starts on the deployment's current build
	// (keel upgrade). A session running a run moves after it anyway.
	SignalMove = "move"

	QueryState   = "state"
	QueryHistory = "history"
	QueryEvents  = "events"
)

// ErrTypeMoved is the error type of an "outcome" update that the session's
// execution could not answer because it continues as new first: the same
// update, sent again, reaches the next execution.
const ErrTypeMoved = "keel.SessionMoved"
