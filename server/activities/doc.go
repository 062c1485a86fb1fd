// Package activities holds keel's Temporal activities: ModelTurn, which
// streams one provider request, publishes its deltas to the live channel,
// heartbeats every HeartbeatEvery (5 s by default) and returns one
// normalized response; Tool, which runs one tool call; Compact, which
// summarizes a transcript; and the session's helpers: Shutdown and
// RuntimeState for the Runtime workflow, StoreEvents for event segments,
// RateGiveBack for rate limits. The worker's policy (approvals, limits),
// budgets and the transcript cache act inside them.
//
// Their inputs never carry secrets: a model is named by its spec
// ("openai:gpt-4o") and resolved to a provider, with its keys, on the worker.
//
//	acts := &activities.Activities{Models: models, Tools: registry, Live: ch, Runs: reader}
//	worker.Register(w, acts) // with keel's workflows, under their names
package activities
