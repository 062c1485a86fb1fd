package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

const sendDesc = `Sends PROMPT to a session (a new one with a random ID unless --session
is given) and prints {"session_id", "run_id", "number", "revision"} as JSON
once the run has started, without waiting for it to end. While a run is
active in the session the prompt is rejected, unless --queue makes it the
next run ("queued": true). Follow the run with "keel events SESSION
--follow". --model, --tools, --attach and --set-default work as in "keel
run".`

// sendResult is what send prints; its field names are a stable interface
// for scripts.
type sendResult struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	Number    int    `json:"number"`
	Revision  int64  `json:"revision"`
	Queued    bool   `json:"queued,omitempty"`
}

func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("send", "keel send [flags] PROMPT", sendDesc)
	var p promptFlags
	var conn connFlags
	p.register(fs)
	conn.register(fs, false)
	queue := fs.Bool("queue", false, "queue the prompt as the next run if a run is active")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, -1)
	if !ok {
		return code
	}
	prompt := strings.Join(pos, " ")
	if code, ok := p.validate(fs, stderr, prompt); !ok {
		return code
	}
	// As in run: the flags configure this run, not the session.
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "send", err)
	}
	defer kc.close()
	var opts []client.SendOption
	if *queue {
		opts = append(opts, client.Queue())
	}
	sess := p.sessionOf(kc)
	run, err := p.send(ctx, kc, sess, prompt, opts...)
	if err != nil {
		return fail(stderr, "send", fmt.Errorf("send to session %s: %w", sess.ID(), err))
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(sendResult{SessionID: sess.ID(), RunID: run.ID, Number: run.Number, Revision: run.Revision, Queued: run.Queued})
	return exitOK
}
