package main

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
)

// Example_goSDK sends a run to the stack `make run` starts, prints its
// streamed text and tool calls as they come, then its outcome.
func Example_goSDK() {
	ctx := context.Background()
	// Streamed text is optional; keel dev's NATS wants the NKey it keeps
	// in its data directory.
	nkey, err := nats.NkeyOptionFromSeed(".keel/nats.nk")
	if err != nil {
		log.Fatal(err)
	}
	deltas, err := live.DialNATS("nats://127.0.0.1:4222", live.NATSOptions{Dial: []nats.Option{nkey}})
	if err != nil {
		log.Fatal(err)
	}
	defer deltas.Close()
	c, err := client.Dial(ctx, client.Options{HostPort: "localhost:7233", Live: deltas})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	run, err := c.Session("support-42").Send(ctx, "Give me a tour",
		client.WithConfig(api.RunConfig{
			Model: "scripted:demo", // or openai:gpt-4o-mini with OPENAI_API_KEY set where the worker runs
			Tools: []string{"list_files", "read_file", "sleep", "write_file"},
		}))
	if errors.Is(err, keel.ErrRunActive) {
		log.Fatal("a run is already active; steer it or queue with client.Queue()")
	} else if err != nil {
		log.Fatal(err)
	}

	for env, err := range run.Events(ctx) { // durable events and live deltas, in order
		if err != nil {
			log.Print(err) // a *live.LaggedError is not fatal
			continue
		}
		ev, _ := env.Event()
		switch e := ev.(type) {
		case keel.TextDelta:
			fmt.Print(e.Text)
		case keel.ToolStarted:
			fmt.Printf("\n[%s]\n", e.Name)
		case keel.HostInputRequested:
			_ = run.Respond(ctx, e.RequestID, "yes")
		}
	}
	outcome, err := run.Outcome(ctx) // authoritative, from any process
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\n", outcome.Status, outcome.Usage.OutputTokens, "output tokens")
}
