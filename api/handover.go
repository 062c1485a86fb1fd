package api

import "github.com/keelrun/keel"

// HandOverLimits bound what a session hands from one execution to the
// next (docs/contract.md, sessions without end). Zero fields take the
// defaults below.
type HandOverLimits struct {
	// TailBytes is how many bytes of durable events the session keeps in
	// memory before it moves them to the content store as a segment.
	// Default DefaultHandOverTailBytes.
	TailBytes int `json:"tail_bytes,omitempty"`
}

// DefaultHandOverTailBytes is the default of HandOverLimits.TailBytes.
const DefaultHandOverTailBytes = 1 << 20

// WithDefaults returns l with its unset fields set to the defaults.
func (l HandOverLimits) WithDefaults() HandOverLimits {
	if l.TailBytes <= 0 {
		l.TailBytes = DefaultHandOverTailBytes
	}
	return l
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
	// OutcomesRemembered, newest last, as the outcome update answers them
	// (OutcomeRequest).
	Last      *keel.Outcome     `json:"last_outcome,omitempty"`
	Outcomes  []keel.Outcome    `json:"outcomes,omitempty"`
	State     keel.SessionState `json:"state"`
	Shutdown  bool              `json:"shutdown,omitempty"`
	HandOvers int               `json:"hand_overs"`
	// Transcript is the committed conversation.
	Transcript []keel.Message `json:"transcript,omitempty"`
	// Segments index the durable events 1..Seq that live in the content
	// store, in order; Tail holds the events after the last segment (all
	// of them on a worker without a content store).
	Segments []EventSegment  `json:"segments,omitempty"`
	Tail     []keel.Envelope `json:"tail,omitempty"`
	// Queue holds the prompts accepted with IfActiveQueue and not
	// started.
	Queue []SendRequest `json:"queue,omitempty"`
	// Marks locate the committed runs in Transcript, in order (fork and
	// rewind points).
	Marks []RunMark `json:"marks,omitempty"`
	// Origin is where the session was forked from, nil for no fork.
	Origin *ForkOrigin `json:"origin,omitempty"`
	// Delegations counts the session's delegations so far
	// (docs/contract.md §21.3).
	Delegations int `json:"delegations,omitempty"`
	// Once are the keys of the sends taken under one (SendRequest.Once),
	// at most OnceRemembered, newest last.
	Once []OnceSent `json:"once,omitempty"`
}

// EventSegment is a run of a session's durable events, First..Last, kept as
// one immutable value in the content store under Key. The session's state
// holds only these references, so its memory and its continue-as-new input
// stay small however long the session lives; readers fetch a segment's
// events through their data converter (docs/contract.md, durable replay).
type EventSegment struct {
	First int64  `json:"first"`
	Last  int64  `json:"last"`
	Key   string `json:"key"`
	// Size is the stored value's size in bytes.
	Size int `json:"size"`
}
