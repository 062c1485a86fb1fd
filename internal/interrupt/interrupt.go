// Package interrupt gives a command's main a context that the first SIGINT
// or SIGTERM cancels, so the command shuts down cleanly; a second signal
// exits at once, for when a clean shutdown hangs.
package interrupt

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Context returns a context cancelled by the first SIGINT or SIGTERM and a
// function that stops listening. After the first signal, a second one
// prints "NAME: interrupted again, exiting now" on stderr and exits with
// status code.
func Context(name string, code int) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		cancel()
		<-sigs
		fmt.Fprintf(os.Stderr, "\n%s: interrupted again, exiting now\n", name)
		os.Exit(code)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}
