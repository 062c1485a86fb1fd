// Package keel holds the domain types of keel, a durable runtime for LLM
// agents on Temporal: messages and tool calls, the events a run emits and
// their JSON envelope, session states, usage, and typed errors.
//
// The runtime itself lives in subpackages: workflows (the Session workflow and its helpers),
// activities (model turns and tool calls), client (the Go SDK), worker,
// server/provider/... (model backends), tool (the tool interface and built-ins),
// live (the channel for ephemeral deltas) and devserver (an embedded
// Temporal server).
//
// Events are matched with a type switch that always has a default arm,
// because new event types are added over time:
//
//	switch ev := env.Event().(type) {
//	case keel.TextDelta:
//		fmt.Print(ev.Text)
//	case keel.RunCompleted:
//		fmt.Println("done at revision", ev.Revision)
//	default:
//	}
package keel
