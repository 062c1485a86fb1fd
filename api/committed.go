package api

// Committed is the value of the marker Session and Run workflows record
// in their history whenever their log grew: the last durable sequence of
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
type Committed struct {
	KeelSeq int64 `json:"keel_seq"`
}
