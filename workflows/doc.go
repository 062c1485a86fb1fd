// Package workflows holds keel's two Temporal workflows.
//
// Session (workflow ID = session ID) is the authority for a conversation:
// its transcript, revision, state, durable event log, run index and usage.
// The "send" update (sent with update-with-start, so the first prompt
// creates the session) starts one Run child workflow per prompt.
//
// Run (workflow ID "<session>/run-<n>") is one run's loop: a model turn,
// the tool calls it asked for, and so on until the model ends its turn or
// the step limit is reached. It numbers its durable events from the
// sequence the session handed it, so the session's log stays dense, and
// returns its messages, events and outcome to the session.
//
// Both are deterministic: time comes from workflow.Now, concurrency from
// workflow.Go, and all I/O happens in activities.
package workflows
