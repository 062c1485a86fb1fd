// Package keel holds the domain types of keel, a durable runtime for LLM
// agents on Temporal: messages and tool calls, the events a run emits and
// their JSON envelope, session states, outcomes, usage, costs and prices,
// and typed errors.
//
// The rest of the client side is in this module (api, the wire contract;
// client, the Go SDK; live, the channel for ephemeral deltas; transcript,
// crypt, claimcheck, connect, logging); everything that runs keel (the
// workflows, activities, worker, providers, tools, the embedded Temporal
// server) is in the module github.com/keelrun/keel/server.
//
// Events are matched with a type switch that always has a default arm,
// because new event types are added over time:
//
//	ev, err := env.Event()
//	if err != nil {
//		return err
//	}
//	switch ev := ev.(type) {
//	case keel.TextDelta:
//		fmt.Print(ev.Text)
//	case keel.RunCompleted:
//		fmt.Println("done at revision", ev.Revision)
//	default:
//	}
package keel
