package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

const respondDesc = `Answers a question a tool asked the host (a host_input.requested event, as
"keel run" shows it) in the active run of SESSION, or run number --run.
ANSWER is read as JSON when it parses ({"approved": true}, 42, "text"), and
sent as a JSON string otherwise, so a plain word needs no quotes; --string
always sends it as a string. The run checks the answer against the request's
schema and delivers it exactly once. Without REQUEST_ID and ANSWER, the
command lists the run's open requests instead.`

func cmdRespond(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("respond", "keel respond [flags] SESSION [REQUEST_ID ANSWER]", respondDesc)
	var target runTarget
	target.register(fs, "answer in")
	asString := fs.Bool("string", false, "send ANSWER as a JSON string even if it parses as JSON")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, 3)
	if !ok {
		return code
	}
	if len(pos) == 2 {
		return fs.usageError(stderr, "missing argument ANSWER")
	}
	if code, ok := target.check(fs, stderr, pos[0]); !ok {
		return code
	}
	kc, run, err := target.open(ctx, stderr, pos[0])
	if err != nil {
		return fail(stderr, "respond", err)
	}
	defer kc.close()
	if len(pos) == 1 {
		reqs, err := run.Requests(ctx)
		if err != nil {
			return fail(stderr, "respond", err)
		}
		if len(reqs) == 0 {
			fmt.Fprintf(stdout, "%s has no open requests\n", run.ID)
		}
		for _, r := range reqs {
			fmt.Fprintf(stdout, "%s  %s", sanitizeLine(r.RequestID), sanitizeLine(r.Prompt))
			if r.Path != "" {
				// A child session's request (docs/contract.md §21.4).
				fmt.Fprintf(stdout, "  [agent %s · session %s]", sanitizeLine(r.Path), sanitizeLine(r.SessionID))
			}
			if len(r.Schema) > 0 {
				fmt.Fprintf(stdout, "  schema %s", compactArgs(r.Schema))
			}
			fmt.Fprintln(stdout)
		}
		return exitOK
	}
	if err := run.Respond(ctx, pos[1], answerJSON(pos[2], *asString)); err != nil {
		return fail(stderr, "respond", err)
	}
	fmt.Fprintf(stdout, "answer to %s delivered to %s\n", pos[1], run.ID)
	return exitOK
}

// answerJSON reads an answer typed on the command line: JSON if it parses,
// else (or with asString) the text as a JSON string.
func answerJSON(s string, asString bool) json.RawMessage {
	if !asString && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s) // a string always encodes
	return b
}
