package bench_test

import (
	"context"
	"fmt"
	"log"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
)

// A bare activity round trip on an embedded server: the baseline a keel
// step is compared with.
func ExampleMeasureActivityRoundTrip() {
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Config{Port: devserver.AnyPort, DisableUI: true})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	c, err := srv.Dial(ctx, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	bare, err := bench.MeasureActivityRoundTrip(ctx, c, "", 50)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("p50", bare.P50(), "p99", bare.P99())
}
