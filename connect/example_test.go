package connect_test

import (
	"context"
	"errors"
	"log"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/connect"
)

// Dial a cluster that requires client certificates; the address and the
// namespace come from TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, or the
// configuration profile.
func ExampleDial() {
	ctx := context.Background()
	c, err := connect.Dial(ctx, connect.Options{TLS: &connect.TLS{
		ServerCAFile:   "/etc/keel/ca.pem",
		ClientCertFile: "/etc/keel/client.pem",
		ClientKeyFile:  "/etc/keel/client-key.pem",
	}}, sdkclient.Options{})
	if errors.Is(err, connect.ErrClientCertRefused) {
		log.Fatal("the cluster does not trust this certificate: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}
