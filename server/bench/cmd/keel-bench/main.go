// Command keel-bench measures keel on this machine: its overheads against
// bare Temporal round trips taken on the same embedded server in the same
// run (keel-bench), and many concurrent streaming sessions against bare
// Temporal (keel-bench concurrency). It starts its own servers and
// workers; its worker processes are this binary re-executed (keel-bench
// worker, keel-bench baseline-worker), built as `keel worker` builds its
// own (package server/internal/stack). It is apart from the keel binary, which
// links none of the measurement code.
//
// Every command is a function of (ctx, args, stdout, stderr) returning an
// exit status, so tests call them directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/keelrun/keel/internal/interrupt"
)

// Exit statuses, as keel's.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 64
	exitStopped = 130 // interrupted twice
)

// command is one keel-bench subcommand; "" is the default one.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	hidden  bool // started by keel-bench itself
}

var commands = []command{
	{"", "measure keel's overheads against bare Temporal round trips (the default)", cmdLatency, false},
	{"concurrency", "measure many concurrent streaming sessions against bare Temporal", cmdConcurrency, false},
	{"delegation", "measure what delegating to a child session costs against the same turns in one session", cmdDelegation, false},
	{"worker", "run a keel worker for keel-bench's measurements", cmdWorker, true},
	{"baseline-worker", "run the bare Temporal worker of the concurrency baseline", cmdBaselineWorker, true},
}

func main() {
	ctx, stop := interrupt.Context("keel-bench", exitStopped)
	defer stop()
	os.Exit(dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0], or the default one when
// args start with a flag or are empty.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		printMainUsage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "keel-bench: unknown command %q\n\n", name)
	printMainUsage(stderr)
	return exitUsage
}

func printMainUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: keel-bench [flags] | keel-bench COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		if !c.hidden && c.name != "" {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, "\nRun \"keel-bench --help\" or \"keel-bench COMMAND --help\" for the flags.\n")
}

// flagSet is a subcommand's flags with a usage line and a description,
// printed by --help (on stdout, exit 0) and after a usage error (on
// stderr, exit 64).
type flagSet struct {
	*flag.FlagSet
	usage, desc string
}

func newFlagSet(name, usage, desc string) *flagSet {
	fs := flag.NewFlagSet(strings.TrimSpace("keel-bench "+name), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, usage: usage, desc: desc}
}

func (f *flagSet) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", f.usage, f.desc)
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// parse parses args, which may hold flags only. With ok false the
// command returns code: --help was asked for, or the flags are wrong.
func (f *flagSet) parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := f.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.printUsage(stdout)
		return exitOK, false
	case err != nil:
		return f.usageError(stderr, "%v", err), false
	case f.NArg() > 0:
		return f.usageError(stderr, "unexpected argument %q", f.Arg(0)), false
	}
	return exitOK, true
}

// usageError prints a usage error and the usage, and returns exitUsage.
func (f *flagSet) usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n\n", f.Name(), fmt.Sprintf(format, args...))
	f.printUsage(stderr)
	return exitUsage
}

// fail prints err for command name and returns exitFailed.
func fail(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "%s: %s\n", strings.TrimSpace("keel-bench "+name), err)
	return exitFailed
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
