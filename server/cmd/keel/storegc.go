package main

import (
	"context"
	"fmt"
	"io"
	"os"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/server/store"
)

const storeDesc = `Maintains the content store, where workers keep the values too large for
a Temporal history (transcripts, tool results, event segments). Its one
subcommand, "keel store gc", deletes the objects that nothing in the
namespace references any more; "keel store gc --help" says how, and why it
is safe to run while sessions write.`

const storeGCDesc = `Deletes the content store's objects that nothing references. It lists
every workflow execution of the namespace, open and closed (those Temporal
still retains), reads each one's history, and keeps every object a payload
there reaches: the values references name, the chunks and tree nodes they
are stored as, and every key written inside those values (the event
segments a session lists, the values a fork shares). It then deletes the
other objects of --store that were last written more than --grace ago, so
a value being written now, whose reference has not reached a history yet,
survives. Stopping it (or kill -9) at any point is harmless: it deletes
only what nothing references, and the next run finishes the job. With an
encrypted namespace it needs --encryption-key-file, to look inside values.
Run it against the namespace that writes to --store, and no other shares
the store. See docs/ARCHITECTURE.md ("Garbage collection").`

// cmdStore runs a `keel store` subcommand.
func cmdStore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "gc" {
		return cmdStoreGC(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("store", "keel store gc [flags]", storeDesc)
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	return fs.usageError(stderr, "name a subcommand: gc")
}

func cmdStoreGC(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("store gc", "keel store gc --store URL [flags]", storeGCDesc)
	var conn temporalFlags
	conn.register(fs)
	storeURL := fs.String("store", os.Getenv(envStore), "content store `URL` to collect: file:///DIR, s3://BUCKET?endpoint=…&region=… (default $"+envStore+")")
	var keyFile string
	registerKeyFile(fs, &keyFile)
	grace := fs.Duration("grace", store.DefaultGrace, "keep unreferenced objects younger than this (at least "+store.MinGrace.String()+")")
	dryRun := fs.Bool("dry-run", false, "count what would be deleted; delete nothing")
	if _, code, ok := fs.parse(args, stdout, stderr, 0, 0); !ok {
		return code
	}
	if *storeURL == "" {
		return fs.usageError(stderr, "--store (or $%s) is required: gc deletes from the content store", envStore)
	}
	if *grace < store.MinGrace {
		return fs.usageError(stderr, "--grace %s is under %s: a value written now could lose objects before its reference reaches a history", *grace, store.MinGrace)
	}
	enc, _, err := loadEncryption(keyFile, true)
	if err != nil {
		return fail(stderr, "store gc", err)
	}
	s, err := store.Open(ctx, *storeURL)
	if err != nil {
		return fail(stderr, "store gc", fmt.Errorf("content store: %w", err))
	}
	defer s.Close()
	if err := s.Check(ctx); err != nil {
		return fail(stderr, "store gc", fmt.Errorf("content store: %w", err))
	}
	opts := store.CollectOptions{Grace: *grace, DryRun: *dryRun}
	if enc != nil {
		opts.Decrypt = enc
	}
	// The collection starts before any history is read: what is written
	// from now on is within the grace period.
	c, err := s.NewCollector(opts)
	if err != nil {
		return fail(stderr, "store gc", err)
	}
	co, err := conn.resolve()
	if err != nil {
		return fail(stderr, "store gc", err)
	}
	// No data converter: histories are read as stored, references and all.
	tc, err := co.Dial(ctx, sdkclient.Options{Logger: (&connFlags{}).temporalLogger(stderr)}, dialTimeout)
	if err != nil {
		return fail(stderr, "store gc", withServerHint(fmt.Errorf("keel: %w", err)))
	}
	defer tc.Close()
	runs, events, err := c.MarkNamespace(ctx, tc, co.Namespace, func(runs, events int) {
		fmt.Fprintf(stderr, "keel store gc: read %d %s (%d events), %d objects reached\n",
			runs, plural(runs, "execution", "executions"), events, c.Stats().Marked)
	})
	if err != nil {
		return fail(stderr, "store gc", fmt.Errorf("reading the namespace's histories (nothing deleted): %w", err))
	}
	fmt.Fprintf(stderr, "keel store gc: read %d %s (%d events), %d objects reached; sweeping %s\n",
		runs, plural(runs, "execution", "executions"), events, c.Stats().Marked, s.URL())
	stats, err := c.Sweep(ctx, func(s store.CollectStats) {
		fmt.Fprintf(stderr, "keel store gc: listed %d objects, deleted %d\n", s.Listed, s.Deleted)
	})
	verb := "deleted"
	if *dryRun {
		verb = "would delete"
	}
	fmt.Fprintf(stdout, "scanned %d objects (%s): kept %d referenced (%s), %d younger than %s (%s); %s %d (%s); %d referenced keys missing\n",
		stats.Listed, bytesText(stats.ListedBytes), stats.Kept, bytesText(stats.KeptBytes), stats.Young, *grace,
		bytesText(stats.YoungBytes), verb, stats.Deleted, bytesText(stats.DeletedBytes), stats.Missing)
	if err != nil {
		return fail(stderr, "store gc", err)
	}
	return exitOK
}

// bytesText is n in KiB, MiB or GiB.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
