package keel

import (
	"encoding/json"
	"fmt"
	"time"
)

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
	Seq       int64           `json:"seq,omitempty"`
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	RunID     string          `json:"run_id,omitempty"`
	At        time.Time       `json:"at"`
	AfterSeq  int64           `json:"after_seq,omitempty"`
	Data      json.RawMessage `json:"data"`
}

// Size estimates the bytes of the envelope's JSON form, for paging by
// size: its data plus the envelope's own fields.
func (e Envelope) Size() int {
	return len(e.Data) + len(e.Type) + len(e.SessionID) + len(e.RunID) + envelopeOverhead
}

// envelopeOverhead bounds the JSON of the envelope's names, numbers and
// time.
const envelopeOverhead = 120

// Durable reports whether the envelope is a durable event.
func (e Envelope) Durable() bool { return e.Seq > 0 }

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

// Terminal reports whether the envelope ends its run.
func (e Envelope) Terminal() bool {
	switch e.Type {
	case TypeRunCompleted, TypeRunCancelled, TypeRunFailed:
		return true
	}
	return false
}

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
