package keel

import (
	"encoding/json"
	"fmt"
	"time"
)

// This file holds the wire form of events: the Event interface, the JSON
// envelope, sealing and opening, the registry of event types that opening
// decodes to, the IDs an envelope names, and the JSON form of durations in
// event payloads (docs/contract.md §1).

// Event is one fact about a run. Durable events get a dense per-session
// sequence number and survive restarts; ephemeral ones (deltas) only travel
// through the live channel. Match events with a type switch that has a
// default arm: new types are added over time.
type Event interface {
	// EventType is the event's wire name, such as "tool.started".
	EventType() string
}

// Envelope is the JSON form of an event: {seq, type, session_id, run_id, at,
// data}. Seq is set on durable events only; ephemeral events carry AfterSeq,
// the last durable sequence before them, so a reader can merge both streams.
type Envelope struct {
	Seq       int64     `json:"seq,omitempty"`
	Type      string    `json:"type"`
	SessionID string    `json:"session_id"`
	RunID     string    `json:"run_id,omitempty"`
	At        time.Time `json:"at"`
	AfterSeq  int64     `json:"after_seq,omitempty"`
	// Path is set on a delta relayed from a child session
	// (docs/contract.md §21.4): the child's path from SessionID, such as
	// "researcher-3" or "researcher-3/coder-1". Ephemeral events only.
	Path string          `json:"path,omitempty"`
	Data json.RawMessage `json:"data"`
}

// Size estimates the bytes of the envelope's JSON form, for paging by
// size: its data plus the envelope's own fields.
func (e Envelope) Size() int {
	return len(e.Data) + len(e.Type) + len(e.SessionID) + len(e.RunID) + len(e.Path) + envelopeOverhead
}

// envelopeOverhead bounds the JSON of the envelope's names, numbers and
// time.
const envelopeOverhead = 120

// Durable reports whether the envelope is a durable event.
func (e Envelope) Durable() bool { return e.Seq > 0 }

// Terminal reports whether the envelope ends its run.
func (e Envelope) Terminal() bool {
	switch e.Type {
	case TypeRunCompleted, TypeRunCancelled, TypeRunFailed:
		return true
	}
	return false
}

// Seal wraps ev in an envelope. It fails only if ev cannot be encoded.
func Seal(ev Event, sessionID, runID string, at time.Time) (Envelope, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return Envelope{}, fmt.Errorf("keel: encode %s: %w", ev.EventType(), err)
	}
	return Envelope{Type: ev.EventType(), SessionID: sessionID, RunID: runID, At: at.UTC(), Data: data}, nil
}

// Event decodes the envelope's data into its typed event. An unknown type
// decodes to Unknown, so nothing is lost.
func (e Envelope) Event() (Event, error) {
	mk, ok := eventTypes[e.Type]
	if !ok {
		return Unknown{Type: e.Type, Data: e.Data}, nil
	}
	ev, err := mk(e.Data)
	if err != nil {
		return nil, fmt.Errorf("keel: decode %s event: %w", e.Type, err)
	}
	return ev, nil
}

// Unknown is an event of a type this version does not know.
type Unknown struct {
	Type string
	Data json.RawMessage
}

// EventType returns the unknown event's wire name.
func (u Unknown) EventType() string { return u.Type }

// eventTypes maps each wire name registered in events.go to a decoder of
// its data.
var eventTypes = map[string]func(json.RawMessage) (Event, error){}

func register[E Event](name string) {
	eventTypes[name] = func(data json.RawMessage) (Event, error) {
		var ev E
		if len(data) > 0 {
			if err := json.Unmarshal(data, &ev); err != nil {
				return nil, err
			}
		}
		return ev, nil
	}
}

// MaxIDLength bounds session IDs.
const MaxIDLength = 128

// ValidateSessionID checks that id can name a session: 1 to 128 characters
// of letters, digits, '-' and '_'. The limit keeps IDs usable as Temporal
// workflow IDs and as NATS subject tokens.
func ValidateSessionID(id string) error {
	if id == "" || len(id) > MaxIDLength {
		return Errorf(CodeInvalidInput, "session ID must be 1 to %d characters, got %d", MaxIDLength, len(id))
	}
	for i, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return Errorf(CodeInvalidInput, "session ID %q has %q at byte %d; use letters, digits, '-' and '_'", id, r, i)
		}
	}
	return nil
}

// RunID returns the ID of run number n of a session, which is also the Run
// workflow's ID.
func RunID(sessionID string, n int) string { return fmt.Sprintf("%s/run-%d", sessionID, n) }

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1.5s", "250ms"), so event payloads stay readable in the Web UI.
// It also accepts a JSON number of milliseconds.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("keel: bad duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("keel: duration must be a string like \"1.5s\" or milliseconds: %s", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}
