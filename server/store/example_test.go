package store_test

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/server/store"
)

func ExampleNewCodec() {
	ctx := context.Background()
	s, err := store.Open(ctx, "mem://")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	dc := store.NewDataConverter(store.NewCodec(s, store.CodecOptions{}))

	// A large value becomes a reference in the history...
	p, err := dc.ToPayload(strings.Repeat("x", 10000))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(p.Metadata[converter.MetadataEncoding]), claimcheck.IsReference(p))

	// ...and comes back whole.
	var back string
	if err := dc.FromPayload(p, &back); err != nil {
		panic(err)
	}
	fmt.Println(len(back))
	// Output:
	// keel/claim-check true
	// 10000
}
