package api

import (
	"encoding/json"

	historypb "go.temporal.io/api/history/v1"
)

// Committed is the value of the marker a Session workflow records in its
// history whenever its log grew: the last durable sequence of
// the log. A marker is part of the workflow task that emitted the events,
// so once it is visible in history the events up to that sequence are
// committed.
//
// Readers need this because a query can be answered from state that is not
// committed: a query task that reaches a worker without the workflow in its
// cache replays the whole history, including events no workflow task has
// processed yet (a timer that fired while the previous worker was dying),
// and a signal that arrives later can make the real task decide otherwise.
// The client delivers only events at or below the recorded sequence.
//
// The marker is a side effect (workflow.SideEffect) whose data is this
// struct. A marker costs one history event and nothing else; a memo or
// search attribute would add a visibility write to every step.
//
// In history it reads (this is the encoding CommittedSeq accepts, and
// the recorded histories in server/workflows/testdata pin it):
//
//	MarkerRecorded
//	  markerName: "SideEffect"
//	  details["data"]: one payload, metadata encoding "json/plain",
//	                   data {"keel_seq": N}
//
// Any program that reads histories (another SDK, the temporal CLI's JSON
// output) can find it by those fields; no SDK is needed to decode it.
// With encryption at rest (package crypt) its payload is encrypted like
// every other and CommittedSeq does not see it; such a reader decodes it
// with the codec first, as keel's client does.
type Committed struct {
	KeelSeq int64 `json:"keel_seq"`
	// KeelSinks, in the first marker of a session's execution only, are
	// the worker's event sinks the execution delivers to
	// (docs/contract.md §23.6): recorded here, on a marker the execution
	// records anyway, so that a replay delivers to the sinks the
	// execution did, and a history from before sinks (whose markers lack
	// it) delivers to none.
	KeelSinks []string `json:"keel_sinks,omitempty"`
}

// CommittedSeq reads a Committed marker: the sequence it records, and
// whether m is one. Other markers, side effects included, are not.
func CommittedSeq(m *historypb.MarkerRecordedEventAttributes) (int64, bool) {
	if m.GetMarkerName() != "SideEffect" {
		return 0, false
	}
	data := m.GetDetails()["data"].GetPayloads()
	if len(data) != 1 || string(data[0].GetMetadata()["encoding"]) != "json/plain" {
		return 0, false
	}
	var c struct {
		KeelSeq *int64 `json:"keel_seq"`
	}
	if err := json.Unmarshal(data[0].GetData(), &c); err != nil || c.KeelSeq == nil {
		return 0, false
	}
	return *c.KeelSeq, true
}
