package live_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

func Example() {
	ctx := context.Background()
	ch := live.NewMemory() // across processes: live.DialNATS(url, live.NATSOptions{})
	defer ch.Close()

	sub, err := ch.Subscribe(ctx, "s1", live.SubscribeOptions{Buffer: 2})
	if err != nil {
		panic(err)
	}
	defer sub.Close()

	// The run publishes and never waits, even though nobody reads yet.
	for _, text := range []string{"Hel", "lo, ", "wor", "ld"} {
		env, _ := keel.Seal(keel.TextDelta{Step: 1, Text: text}, "s1", "s1/run-1", time.Now())
		if err := ch.Publish(ctx, env); err != nil {
			panic(err)
		}
	}

	for range 3 {
		env, err := sub.Next(ctx)
		var lagged *live.LaggedError
		if errors.As(err, &lagged) {
			// The live view has a hole: re-read durable events from the
			// last sequence seen (the client SDK's EventsFrom).
			fmt.Println("missed", lagged.Missed)
			continue
		}
		ev, _ := env.Event()
		fmt.Printf("%q\n", ev.(keel.TextDelta).Text)
	}
	// Output:
	// missed 2
	// "wor"
	// "ld"
}
