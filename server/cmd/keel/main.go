// Command keel runs and drives durable LLM agents on Temporal: `keel dev`
// brings up a whole local stack, `keel worker` runs agents against a
// cluster, and the other commands send prompts and inspect sessions.
//
// Every command is a function of (ctx, args, stdout, stderr) returning an
// exit status, so tests call them directly.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/keelrun/keel/internal/interrupt"
)

// Exit statuses. A run's outcome maps to the first three; they are part of
// the CLI's contract (docs/cli.md), so scripts can branch on them.
const (
	exitOK        = 0   // success; a run completed
	exitFailed    = 1   // a run failed, or the command could not do its job
	exitCancelled = 2   // a run was cancelled
	exitUsage     = 64  // bad flags or arguments (sysexits EX_USAGE)
	exitDetached  = 130 // interrupted while following a run; the run goes on
)

// command is one `keel` subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// runGroup runs a command that groups others (keel schedule, keel eval):
// args[0] names one of them. usage is the group's usage line, desc what
// its help says above the list.
func runGroup(ctx context.Context, name, usage, desc string, group []command, args []string, stdout, stderr io.Writer) int {
	printUsage := func(w io.Writer) {
		width := 0
		for _, c := range group {
			width = max(width, len(c.name))
		}
		fmt.Fprintf(w, "Usage: keel %s %s\n\n%s\n\nCommands:\n", name, usage, wrap(desc, 76))
		for _, c := range group {
			fmt.Fprintf(w, "  %-*s %s\n", width+1, c.name, c.summary)
		}
		fmt.Fprintf(w, "\nRun \"keel %s COMMAND --help\" for a command's flags.\n", name)
	}
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		printUsage(stdout)
		return exitOK
	}
	for _, c := range group {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "keel %s: unknown command %q\n\n", name, args[0])
	printUsage(stderr)
	return exitUsage
}

// commands in the order `keel help` lists them.
var commands = []command{
	{"dev", "run a local Temporal server, Web UI, NATS and worker in one process", cmdDev},
	{"worker", "run a keel worker against a Temporal server", cmdWorker},
	{"serve", "serve keel's HTTP API (JSON and Server-Sent Events) against a Temporal server", cmdServe},
	{"codec", "serve the content store's codec endpoint for a Web UI and the temporal CLI", cmdCodec},
	{"store", "maintain the content store: keel store gc deletes what nothing references", cmdStore},
	{"run", "send a prompt and render the run live until it ends", cmdRun},
	{"send", "send a prompt and print the run's IDs without waiting", cmdSend},
	{"events", "print a session's durable events, or follow them live", cmdEvents},
	{"state", "print a session's (or a run's) state as JSON", cmdState},
	{"history", "print a session's transcript", cmdHistory},
	{"fork", "make a new session from a session's conversation at a run or step", cmdFork},
	{"rewind", "make a session go on from an earlier run or step", cmdRewind},
	{"rerun", "run a run again in a fork, with the same or another model and tools", cmdRerun},
	{"compare", "show two runs side by side: text, tool calls, steps, usage, duration", cmdCompare},
	{"eval", "run evals over datasets and recorded sessions: scored, compared, fit for CI", cmdEval},
	{"steer", "send more input to a running run", cmdSteer},
	{"retract", "withdraw steering that has not been applied yet", cmdRetract},
	{"respond", "answer a tool's question to the host, or list open ones", cmdRespond},
	{"cancel", "cancel a session's active run, or a given run", cmdCancel},
	{"schedule", "send prompts on a schedule: create, list, describe, pause, unpause, trigger, update, delete", cmdSchedule},
	{"shutdown", "cancel every active run and refuse new ones (namespace-wide)", cmdShutdown},
	{"upgrade", "move idle sessions onto the deployment's current build", cmdUpgrade},
}

func main() {
	ctx, stop := interrupt.Context("keel", exitDetached)
	defer stop()
	os.Exit(dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0].
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printMainUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			// `keel help run` is `keel run --help`.
			return dispatch(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		printMainUsage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "keel: unknown command %q\n\n", args[0])
	printMainUsage(stderr)
	return exitUsage
}

func printMainUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: keel COMMAND [flags] [args]

keel is a durable runtime for LLM agents on Temporal. Start a local stack
with "keel dev", then try "keel run \"Give me a tour\"" in another terminal.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "keel COMMAND --help" for a command's flags.
Exit status: 0 ok, 1 failure, 2 run cancelled, 64 usage error, 130 interrupted.
`)
}
