//go:build nodev

package main

import (
	"context"
	"fmt"
	"io"
)

// cmdDev of the production build (-tags nodev): that build leaves out the
// embedded Temporal server, its Web UI and the embedded NATS server, which
// only `keel dev` runs, so a worker's or a gateway's binary does not carry
// them (docs/ARCHITECTURE.md, "Binaries").
func cmdDev(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "keel dev: this keel is the production build (-tags nodev), without the embedded Temporal server, Web UI and NATS server; use a keel built without the tag (make build)")
	return exitFailed
}
