package gateway_test

import (
	"context"
	"log"
	"net/http"

	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/gateway"
)

// Serve keel's HTTP API on this machine, with API keys from
// $KEEL_API_KEYS, and mount one more route on the same handler.
func Example() {
	ctx := context.Background()
	nc, err := live.DialNATS("nats://127.0.0.1:4222", live.NATSOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	kc, err := client.Dial(ctx, client.Options{HostPort: "localhost:7233", Live: nc})
	if err != nil {
		log.Fatal(err)
	}
	defer kc.Close()
	keys, err := gateway.LoadAPIKeys("")
	if err != nil {
		log.Fatal(err)
	}
	const addr = "127.0.0.1:7280"
	if err := gateway.CheckListen(addr, len(keys) > 0); err != nil {
		log.Fatal(err)
	}
	gw, err := gateway.New(kc, gateway.Options{Keys: keys})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
	// Another handler shares the keys, CORS policy and body limit.
	gw.Handle(http.MethodGet, "/v1/hello", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello\n"))
	}))
	log.Fatal(http.ListenAndServe(addr, gw))
}
