// Package workflows holds keel's Temporal workflows.
//
// Session (workflow ID = session ID) is one per session and the authority
// for it: its transcript, revision, state, durable event log and usage.
// Each run of the session is one execution of that workflow: the
// execution waits for a prompt (the "send" update, sent with
// update-with-start so that the first prompt creates the session), runs it
// (model turns, the tool calls they ask for, and so on until the model
// ends its turn), commits it, and continues as new with the session's
// state (carry.SessionCarry). A prompt sent with if_active "queue" while a
// run is active waits and runs in a later execution; any other is
// refused. The same workflow serves forks and rewinds (fork.go) and, as a
// child workflow started with SessionInput.Delegated, an agent's
// delegated task (child.go, delegate.go).
//
// A run is made of parts with narrow interfaces (run.go): the journal of
// durable events, the transcript, steering, host input, tools, model turns
// and compaction. The session's handlers (handlers.go) route steering,
// answers and cancellation to the active run (commands.go), under the
// worker's Rules (rules.go).
//
// Runtime holds keel's shutdown state, RateLimit the pace of one rate
// limit shared by all workers, ScheduledSend one firing of a schedule,
// and ScheduleRegistry the count of a namespace's schedules and the pace
// of their firings.
//
// All of them are deterministic: time comes from workflow.Now, concurrency
// from workflow.Go, and all I/O happens in activities.
package workflows
