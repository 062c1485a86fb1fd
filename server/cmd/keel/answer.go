package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/keelrun/keel"
)

// stdinKey carries the reader a command takes the user's input from.
type stdinKey struct{}

// withStdin returns ctx with r as the user's input, for tests: commands
// read os.Stdin otherwise.
func withStdin(ctx context.Context, r io.Reader) context.Context {
	return context.WithValue(ctx, stdinKey{}, r)
}

func stdinOf(ctx context.Context) io.Reader {
	if r, ok := ctx.Value(stdinKey{}).(io.Reader); ok {
		return r
	}
	return os.Stdin
}

// isTerminalReader reports whether r is a terminal a person types into.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// prompter is where the questions of host input are put to the user: the
// renderer, or stderr next to JSON output. It keeps track of the cursor so
// questions and streamed text never share a line.
type prompter interface {
	// Note writes one whole line in a style (ignored without color).
	Note(style, format string, args ...any)
	// Prompt writes the input prompt and leaves the cursor after it.
	Prompt(text string)
	// Answered says a line was read. With echo, the line is written out:
	// input that is not a terminal does not show what was typed.
	Answered(line string, echo bool)
	// Prompting reports whether the prompt is the last thing written.
	Prompting() bool
}

// responder delivers an answer; it is Run.Respond.
type responder func(ctx context.Context, requestID string, answer json.RawMessage) error

// hostInput asks the user the questions a run's tools put to the host, one
// at a time in the order they were asked, and delivers the answers. It
// reacts to the run's events (observe) and to lines of input (answer); the
// caller multiplexes the two and reads a line only while waiting says so,
// so lines typed ahead wait for the next question.
type hostInput struct {
	respond   responder
	out       prompter
	echo      bool
	sessionID string

	// open holds the requests not answered yet, oldest first; open[0] is
	// on screen when asking is set.
	open   []keel.HostInputRequested
	asking bool
	// closed says the input ended: the rest is left to `keel respond`.
	closed bool
}

// waiting reports whether a question is on screen, waiting for a line.
func (h *hostInput) waiting() bool { return h.asking && !h.closed }

// observe follows the run's events: new requests join the queue, requests
// resolved elsewhere (another client, cancellation) leave it. Events shown
// while a question waits push its prompt up: it is shown again.
func (h *hostInput) observe(env keel.Envelope) {
	switch env.Type {
	case keel.TypeHostInputRequested, keel.TypeHostInputResolved:
	default:
		if h.waiting() && !h.out.Prompting() {
			h.out.Prompt("› ")
		}
		return
	}
	ev, err := env.Event()
	if err != nil {
		return
	}
	switch e := ev.(type) {
	case keel.HostInputRequested:
		if slices.ContainsFunc(h.open, func(r keel.HostInputRequested) bool { return r.RequestID == e.RequestID }) {
			return
		}
		h.open = append(h.open, e)
		if h.closed {
			h.hint(e)
		}
		h.next()
	case keel.HostInputResolved:
		i := slices.IndexFunc(h.open, func(r keel.HostInputRequested) bool { return r.RequestID == e.RequestID })
		if i < 0 {
			return // answered here
		}
		h.open = slices.Delete(h.open, i, i+1)
		if i == 0 && h.asking {
			// The question on screen was settled by someone else.
			h.asking = false
			how := "answered elsewhere"
			if e.Interrupted {
				how = "closed unanswered"
			}
			h.out.Note(styleDim, "  (%s; no answer needed)", how)
			h.next()
		}
	}
}

// next puts the oldest open question to the user, unless one is on screen.
func (h *hostInput) next() {
	if h.asking || h.closed || len(h.open) == 0 {
		return
	}
	r := h.open[0]
	h.asking = true
	h.out.Note(styleYellow, "? %s", sanitizeLine(r.Prompt))
	switch {
	case isApproval(r.Schema):
		h.out.Note(styleDim, `  answer y or n (or JSON {"approved": bool, "reason": "..."})`)
	case len(r.Schema) > 0:
		h.out.Note(styleDim, "  answer as JSON matching %s", compactArgs(r.Schema))
	}
	h.out.Prompt("› ")
}

// answer takes one line of input; ok is false when the input ended.
func (h *hostInput) answer(ctx context.Context, line string, ok bool) {
	if !ok {
		h.closed = true
		h.asking = false
		h.out.Note(styleDim, "  input closed; answer from another terminal:")
		for _, r := range h.open {
			h.hint(r)
		}
		return
	}
	if !h.waiting() {
		return
	}
	h.out.Answered(line, h.echo)
	if strings.TrimSpace(line) == "" {
		h.out.Prompt("› ")
		return
	}
	r := h.open[0]
	err := h.respond(ctx, r.RequestID, answerFor(r.Schema, line))
	switch {
	case err == nil:
	case errors.Is(err, keel.ErrInvalidAnswer):
		h.out.Note(styleRed, "  not a valid answer: %s", sanitizeLine(keelMessage(err)))
		h.out.Prompt("› ")
		return
	case errors.Is(err, keel.ErrUnknownRequest), errors.Is(err, keel.ErrRequesterGone), errors.Is(err, keel.ErrNotAccepting):
		// Settled in the meantime: nothing to answer any more.
		h.out.Note(styleDim, "  %s; moving on", sanitizeLine(keelMessage(err)))
	case ctx.Err() != nil:
		return
	default:
		h.out.Note(styleRed, "  the answer was not delivered: %s; try again", sanitizeLine(keelMessage(err)))
		h.out.Prompt("› ")
		return
	}
	h.open = h.open[1:]
	h.asking = false
	h.next()
}

// hint says how to answer r without this terminal.
func (h *hostInput) hint(r keel.HostInputRequested) {
	h.out.Note(styleDim, "  keel respond %s %s ANSWER   (%s)", sanitizeLine(h.sessionID), sanitizeLine(r.RequestID), truncate(sanitizeLine(r.Prompt), cardArgsRunes))
}

// keelMessage is an error's message without keel's prefix.
func keelMessage(err error) string {
	return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "keel: "), ": keel: ", ": ")
}

// answerFor turns a typed line into the answer to a request with schema:
// for an approval, y/yes/n/no mean {"approved": true/false}; for a string
// schema the line is the string, whatever it looks like; otherwise JSON
// when it parses, else the line as a JSON string (as `keel respond` reads
// its ANSWER).
func answerFor(schema json.RawMessage, line string) json.RawMessage {
	text := strings.TrimSpace(line)
	if isApproval(schema) {
		switch strings.ToLower(text) {
		case "y", "yes":
			return json.RawMessage(`{"approved":true}`)
		case "n", "no":
			return json.RawMessage(`{"approved":false}`)
		}
	}
	return answerJSON(text, schemaType(schema) == "string")
}

// schemaShape is what answerFor reads of a schema.
type schemaShape struct {
	Type       any                        `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func schemaType(schema json.RawMessage) string {
	var s schemaShape
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	t, _ := s.Type.(string)
	return t
}

// isApproval recognizes the question of a tool's approval policy by its
// answer's shape: an object with a boolean "approved".
func isApproval(schema json.RawMessage) bool {
	var s schemaShape
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || s.Type != "object" {
		return false
	}
	return schemaType(s.Properties["approved"]) == "boolean"
}

// readLines sends the lines of r, without their line endings, until r ends
// (then it closes the channel) or done is closed.
func readLines(r io.Reader, done <-chan struct{}) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" || err == nil {
				select {
				case out <- strings.TrimRight(line, "\r\n"):
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// plainPrompter asks on a plain writer (stderr, next to JSON output).
type plainPrompter struct {
	w       io.Writer
	midLine bool
}

func (p *plainPrompter) Note(_, format string, args ...any) {
	if p.midLine {
		fmt.Fprintln(p.w)
	}
	fmt.Fprintf(p.w, format+"\n", args...)
	p.midLine = false
}

func (p *plainPrompter) Prompt(text string) {
	if p.midLine {
		fmt.Fprintln(p.w)
	}
	fmt.Fprint(p.w, text)
	p.midLine = true
}

// Prompting is true after a Prompt: events go to another stream.
func (p *plainPrompter) Prompting() bool { return p.midLine }

func (p *plainPrompter) Answered(line string, echo bool) {
	if echo {
		fmt.Fprintln(p.w, sanitizeLine(line))
	}
	p.midLine = false
}
