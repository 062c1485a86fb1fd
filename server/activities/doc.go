// Package activities holds keel's Temporal activities: ModelTurn, which
// streams one provider request, publishes its deltas to the live channel,
// heartbeats on every chunk and returns one normalized response; Tool, which
// runs one tool call; Compact, which summarizes a transcript; and the
// session's helpers (the runtime's state, event segments, rate limits).
//
// Their inputs never carry secrets: a model is named by its spec
// ("openai:gpt-4o") and resolved to a provider, with its keys, on the worker.
//
//	acts := &activities.Activities{Models: models, Tools: registry, Live: ch, Runs: reader}
//	w.RegisterActivity(acts)
package activities
