package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
)

// A whole exchange: send a prompt, print the streamed text as it comes and
// the tool calls as they end, then read the authoritative outcome.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Options{HostPort: "localhost:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	run, err := c.Session("demo").Send(ctx, "Summarize the workspace")
	if err != nil {
		log.Fatal(err)
	}
	for env, err := range run.Events(ctx) {
		if err != nil {
			log.Print(err) // a lag report from the live channel; the stream goes on
			continue
		}
		switch ev, _ := env.Event(); ev := ev.(type) {
		case keel.TextDelta:
			fmt.Print(ev.Text)
		case keel.ToolFinished:
			fmt.Printf("\n[%s: %s]\n", ev.Name, ev.Status)
		}
	}
	outcome, err := run.Outcome(ctx)
	if errors.Is(err, keel.ErrCancelled) {
		fmt.Println("cancelled")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\n", outcome.Usage)
}
