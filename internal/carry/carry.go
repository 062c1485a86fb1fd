// Package carry holds what only the Session workflow reads: its own input,
// which adds to the input clients send (api.SessionInput) the state that
// one execution of a session hands the next when it continues as new
// (SessionCarry) and a child's delegation; the marks of its committed
// runs; the sends it took under a key; and the query keel's activities
// ask it for a transcript.
//
// None of it is for callers: clients send api.SessionInput, whose fields
// are SessionInput's less Carry and Delegated, in the same order, so both
// encode a client's input to the same JSON.
package carry

import (
	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/delegation"
)

// SessionInput starts an execution of a Session workflow: api.SessionInput
// and what keel's own workflows add to it. Its fields, their order and
// their JSON are api.SessionInput's with Carry and Delegated in between,
// so that the payloads of recorded histories stay byte for byte what they
// were when both lived in one type.
type SessionInput struct {
	SessionID string `json:"session_id"`
	// Config holds the session's defaults (api.SessionInput.Config).
	Config api.RunConfig `json:"config"`
	// HandOver bounds each execution of the session before it continues
	// as new (api.SessionInput.HandOver).
	HandOver api.HandOverLimits `json:"hand_over,omitempty"`
	// Carry is what the previous execution of the session handed over when
	// it continued as new; nil for a new session.
	Carry *SessionCarry `json:"carry,omitempty"`
	// Fork starts the session as a fork of another (api.SessionInput.Fork).
	Fork *api.ForkInput `json:"fork,omitempty"`
	// Conversation starts the session with a transcript
	// (api.SessionInput.Conversation).
	Conversation []keel.Message `json:"conversation,omitempty"`
	// Delegated starts the session as a child of another: it runs the
	// delegation's prompt as its one run and returns its outcome to the
	// parent (docs/contract.md §21.3). Nil for every other session.
	Delegated *api.Delegation `json:"delegated,omitempty"`
	// Shape is api.SessionInput.Shape.
	Shape int `json:"shape,omitempty"`
}

// SessionCarry is the state one execution of a session hands to the next
// when it continues as new: small values, and references for the rest.
// Large values in it (the transcript) reach history as content-store
// references through the payload codec.
type SessionCarry struct {
	Revision int64      `json:"revision"`
	Seq      int64      `json:"seq"`
	Runs     int        `json:"runs"`
	Usage    keel.Usage `json:"usage"`
	// Last is the latest run's outcome; Outcomes are the last
	// api.OutcomesRemembered, newest last, as the outcome update answers
	// them (api.OutcomeRequest).
	Last     *keel.Outcome     `json:"last_outcome,omitempty"`
	Outcomes []keel.Outcome    `json:"outcomes,omitempty"`
	State    keel.SessionState `json:"state"`
	Shutdown bool              `json:"shutdown,omitempty"`
	// Unchecked says no model turn of the session has asked yet whether
	// keel is shut down (api.ShapeLean; ModelTurnInput.CheckRuntime).
	Unchecked bool `json:"unchecked,omitempty"`
	HandOvers int  `json:"hand_overs"`
	// Transcript is the committed conversation.
	Transcript []keel.Message `json:"transcript,omitempty"`
	// Segments index the durable events 1..Seq that live in the content
	// store, in order; Tail holds the events after the last segment (all
	// of them on a worker without a content store).
	Segments []api.EventSegment `json:"segments,omitempty"`
	Tail     []keel.Envelope    `json:"tail,omitempty"`
	// Queue holds the prompts accepted with api.IfActiveQueue and not
	// started.
	Queue []api.SendRequest `json:"queue,omitempty"`
	// Marks locate the committed runs in Transcript, in order (fork and
	// rewind points).
	Marks []RunMark `json:"marks,omitempty"`
	// Origin is where the session was forked from, nil for no fork.
	Origin *api.ForkOrigin `json:"origin,omitempty"`
	// Delegations counts the session's delegations so far
	// (docs/contract.md §21.3).
	Delegations int `json:"delegations,omitempty"`
	// Once are the keys of the sends taken under one
	// (api.SendRequest.Once), at most api.OnceRemembered, newest last.
	Once []OnceSent `json:"once,omitempty"`
	// Sinks are, by event sink, the sequence of the session's log each
	// has received up to (docs/contract.md §23.6); SinkLogs the logs of
	// ended children that the session goes on delivering.
	Sinks    map[string]int64     `json:"sinks,omitempty"`
	SinkLogs []delegation.SinkLog `json:"sink_logs,omitempty"`
	// SinkNames are the sinks the worker last named to the session
	// (api.ShapeLean: a model turn's result), which the next execution
	// delivers to from its start.
	SinkNames []string `json:"sink_names,omitempty"`
}

// RunMark records where a committed run's messages are in the session's
// transcript, Start..End, with the session's revision and last sequence
// before (BaseRevision, BaseSeq) and after it (Revision, Seq). A fork or a
// rewind finds its point by these marks; Start is -1 when a compaction in
// the run replaced the transcript before it (no step point in it).
type RunMark struct {
	Run          int   `json:"run"`
	Start        int   `json:"start"`
	End          int   `json:"end"`
	BaseRevision int64 `json:"base_revision"`
	BaseSeq      int64 `json:"base_seq"`
	Revision     int64 `json:"revision"`
	Seq          int64 `json:"seq"`
}

// OnceSent is a send a session took under a key (api.SendRequest.Once),
// and what it answered.
type OnceSent struct {
	Key    string         `json:"key"`
	Result api.SendResult `json:"result"`
}

// QueryTranscript is the session's query for its active run's transcript,
// which keel's activities ask when a worker's transcript cache misses. It
// takes the number of messages wanted.
const QueryTranscript = "transcript"
