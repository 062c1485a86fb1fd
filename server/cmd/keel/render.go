package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// renderOptions tune a renderer.
type renderOptions struct {
	// color enables ANSI styling (see useColor).
	color bool
	// reasoning shows reasoning deltas, dimmed. Off by default: reasoning
	// is long, provisional, and not what the model answers.
	reasoning bool
	// answering says the user answers host input here (hostInput asks
	// the questions), so the renderer leaves them to it.
	answering bool
}

// ANSI styles. Only these fixed sequences are ever written: every string
// that came from a model, a tool or a provider goes through sanitize.
const (
	styleReset  = "\x1b[0m"
	styleBold   = "\x1b[1m"
	styleDim    = "\x1b[2m"
	styleRed    = "\x1b[31m"
	styleGreen  = "\x1b[32m"
	styleYellow = "\x1b[33m"
	styleCyan   = "\x1b[36m"
)

// Limits of what a tool card shows of a call.
const (
	cardArgsRunes   = 120
	cardOutputLines = 4
	cardLineRunes   = 120
)

// renderer turns a run's events into terminal output: streamed text as it
// comes, tool calls as cards, retries and failures as visible markers, and
// a usage summary at the end. What counts (which deltas survive a retry,
// which facts are repeats) is the transcript reducer's to say; the
// renderer draws what it applied. It is not safe for concurrent use.
type renderer struct {
	out  io.Writer
	opts renderOptions
	tr   *transcript.Transcript

	// midLine says the cursor is not at the start of a line.
	midLine bool
	// block is what the current line holds: "", "text" or "reasoning", so
	// a switch between them starts a new line.
	block string
	// usage is the running total of physical requests, abandoned ones
	// included (they are billed too).
	usage keel.Usage
	// terminal says the run's terminal event was rendered.
	terminal bool
	// prompted says the input prompt is the last thing written.
	prompted bool
}

func newRenderer(out io.Writer, opts renderOptions) *renderer {
	return &renderer{out: out, opts: opts, tr: transcript.New()}
}

// useColor reports whether output to w should be styled: only a terminal,
// and only when NO_COLOR is unset (https://no-color.org).
func useColor(w io.Writer) bool { return colorAllowed() && isTerminal(w) }

// colorAllowed reports whether the environment allows color: NO_COLOR set
// to anything, even empty, forbids it.
func colorAllowed() bool {
	_, set := os.LookupEnv("NO_COLOR")
	return !set
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Render writes one event: what the transcript applied, and events it
// cannot decode by type. Repeats, and deltas of an abandoned attempt or
// of a finished response, change nothing and show nothing.
func (r *renderer) Render(env keel.Envelope) {
	ch := r.tr.Apply(env)
	switch ch.Ignored {
	case "":
	case transcript.ReasonUndecodable:
		r.line(styleDim, "· undecodable %s event", sanitizeLine(env.Type))
		return
	default:
		return
	}
	if env.Path != "" {
		r.relayed(env.Path, ch)
		return
	}
	if _, reset := ch.Event.(keel.ProviderStreamReset); ch.Discarded && !reset {
		// A later attempt's output without a reset before it: what the
		// earlier one streamed is gone all the same.
		r.line(styleYellow, "↺ attempt %d superseded; its output above is discarded", ch.Abandoned)
	}
	switch e := ch.Event.(type) {
	case keel.TextDelta:
		r.stream("text", "", "", ch.Text)
	case keel.ReasoningDelta:
		if r.opts.reasoning {
			r.stream("reasoning", styleDim, "thinking: ", ch.Text)
		}
	case keel.ToolCallDelta, keel.ModelCallCompleted, keel.ToolStarted:
		// The card shows the complete call (tool.proposed) and its end.
	case keel.UsageUpdated:
		r.usage = ch.Run.Usage.Keel()
	case keel.BudgetWarning:
		r.line(styleYellow, "! budget warning: %s", budgetWarningText(e))
	case keel.ModelWaiting:
		// Waiting for its turn under a rate limit (docs/contract.md
		// §20.5); the first streamed text says the wait is over.
		r.line(styleDim, "  waiting %s for rate limit %s", fmtDuration(e.Wait.Std()), truncate(sanitizeLine(e.Limit), cardArgsRunes))
	case keel.RunStarted:
		if e.Agent != "" {
			r.line(styleBold, "● run %d · agent %s · %s · session %s", e.Number, sanitizeLine(e.Agent), sanitizeLine(e.Model), sanitizeLine(env.SessionID))
		} else {
			r.line(styleBold, "● run %d · %s · session %s", e.Number, sanitizeLine(e.Model), sanitizeLine(env.SessionID))
		}
		if e.Prompt != "" {
			r.line(styleDim, "› %s", truncate(firstLine(e.Prompt), cardLineRunes))
		}
	case keel.StepStarted:
		r.line(styleDim, "· step %d (~%d context tokens)", e.Step, e.EstimatedContextTokens)
	case keel.HostedToolActivity:
		// A tool the model's backend ran itself: one line, no card.
		r.line(styleCyan, "%s", hostedText(e))
	case keel.ToolProposed:
		r.line(styleCyan, "┌ %s %s", sanitizeLine(e.Name), compactArgs(e.Arguments))
	case keel.ToolProgress:
		r.line(styleDim, "│ %s", sanitizeLine(e.Message))
	case keel.ToolDetached:
		r.line(styleDim, "│ %s runs detached; the run goes on", sanitizeLine(e.Name))
	case keel.ToolFinished:
		r.toolFinished(e)
	case keel.HostInputRequested:
		if r.opts.answering {
			return
		}
		r.line(styleYellow, "? %s", sanitizeLine(e.Prompt))
		r.line(styleDim, "  waiting for an answer: keel respond %s %s ANSWER", sanitizeLine(env.SessionID), sanitizeLine(e.RequestID))
	case keel.HostInputResolved:
		if r.opts.answering {
			return // hostInput says what needs saying
		}
		if e.Interrupted {
			r.line(styleDim, "  request %s closed unanswered", sanitizeLine(e.RequestID))
		} else {
			r.line(styleDim, "  request %s answered", sanitizeLine(e.RequestID))
		}
	case keel.SteeringAccepted:
		r.line(styleYellow, "» steering: %s", truncate(firstLine(e.Text), cardLineRunes))
	case keel.SteeringApplied:
		r.line(styleDim, "» steering %s applied", sanitizeLine(e.SteeringID))
	case keel.SteeringRetracted:
		r.line(styleDim, "» steering %s retracted", sanitizeLine(e.SteeringID))
	case keel.BoundaryInputApplied:
		// Input a hook brought: context from its source, not steering.
		r.line(styleDim, "%s", boundaryInputText(e))
	case keel.HookDecided:
		style, text := hookDecidedText(e, ch.Run)
		r.line(style, "%s", text)
	case keel.HookFailed:
		style, text := hookFailedText(e)
		r.line(style, "%s", text)
	case keel.ProviderStreamReset:
		r.line(styleYellow, "↺ attempt %d abandoned (%s); its output above is discarded, retrying", e.Attempt, resetReason(e.Reason))
	case keel.ProviderRequestRetry:
		r.line(styleDim, "  waiting %s before attempt %d (%s)", fmtDuration(e.Delay.Std()), e.Attempt+1, retryCause(e))
	case keel.CompactionStarted:
		r.line(styleDim, "· compacting the history (~%d context tokens)", e.EstimatedContextTokens)
	case keel.CompactionCompleted:
		r.line(styleDim, "· compacted %d messages into %d", e.MessagesBefore, e.MessagesAfter)
	case keel.AgentStarted:
		r.line(styleCyan, "┌ agent %s (%s) · session %s", sanitizeLine(e.Agent), sanitizeLine(e.Path), sanitizeLine(e.SessionID))
	case keel.AgentFinished:
		r.agentFinished(e)
	case keel.RunCompleted:
		// The final text, when the surviving attempt of the last step
		// streamed none (no live channel, or its deltas were lost).
		if st := ch.Run.Step(e.Steps); e.Text != "" && (st == nil || st.Text == "") {
			r.stream("text", "", "", e.Text)
		}
		r.line(styleGreen, "✓ completed in %d %s", e.Steps, plural(e.Steps, "step", "steps"))
		r.usageLine(e.Usage)
		r.terminal = true
	case keel.RunCancelled:
		r.line(styleYellow, "⊘ cancelled (session revision %d)", e.Revision)
		r.usageLine(keel.Usage{})
		r.terminal = true
	case keel.RunFailed:
		r.failed(e.Code, e.Message, e.Retryable)
		r.usageLine(keel.Usage{})
		r.terminal = true
	default:
		r.line(styleDim, "· %s", sanitizeLine(env.Type))
	}
}

// Note writes a line of the host-input dialogue (prompter).
func (r *renderer) Note(style, format string, args ...any) { r.line(style, format, args...) }

// Prompt writes the input prompt and leaves the cursor after it.
func (r *renderer) Prompt(text string) {
	r.endLine()
	r.block = ""
	r.write(styleBold, text)
	r.prompted = true
}

// Prompting reports whether the prompt is still the last thing written.
func (r *renderer) Prompting() bool { return r.prompted }

// Answered notes that a line was read after a Prompt: a terminal has
// echoed it with its newline; other input is echoed here.
func (r *renderer) Answered(line string, echo bool) {
	if echo {
		r.write("", sanitizeLine(line)+"\n")
		return
	}
	r.midLine = false
}

// Lagged reports live events lost to a slow reader. Durable events are
// never lost; only streamed text may have gaps.
func (r *renderer) Lagged(missed int) {
	r.line(styleDim, "… %d live %s missed; streamed text may have gaps", missed, plural(missed, "event", "events"))
}

// Outcome renders a run's outcome when its terminal event was not seen
// (the event stream broke off).
func (r *renderer) Outcome(o keel.Outcome) {
	if r.terminal {
		return
	}
	switch o.Status {
	case keel.StatusCompleted:
		if o.Text != "" {
			r.stream("text", "", "", o.Text)
		}
		r.line(styleGreen, "✓ completed in %d %s", o.Steps, plural(o.Steps, "step", "steps"))
	case keel.StatusCancelled:
		r.line(styleYellow, "⊘ cancelled (session revision %d)", o.Revision)
	default:
		e := o.Error
		if e == nil {
			e = &keel.Error{Code: keel.CodeInternal, Message: "run failed without a recorded error"}
		}
		r.failed(e.Code, e.Message, e.Retryable)
	}
	if !o.UsageTotal.IsZero() {
		r.usage = o.UsageTotal
	}
	r.usageLine(o.Usage)
	r.terminal = true
}

// budgetWarningText says which budget a budget.warning is about and how
// much of it was spent (docs/contract.md §20.3): "run budget (caller)
// 3.30 of 4.00 USD", or "session budget (worker) 1555 of 1800 tokens"
// for a token budget.
func budgetWarningText(e keel.BudgetWarning) string {
	s := sanitizeLine(e.Scope) + " budget (" + sanitizeLine(e.Set) + ") "
	if e.Currency == "" {
		return s + fmt.Sprintf("%d of %d tokens", e.Spent, e.Limit)
	}
	return s + keel.FormatNanos(e.Spent) + " of " + keel.FormatNanos(e.Limit) + " " + sanitizeLine(e.Currency)
}

func (r *renderer) failed(code keel.Code, msg string, retryable bool) {
	retry := "not retryable"
	if retryable {
		retry = "retryable"
	}
	r.line(styleRed, "✗ failed: %s: %s (%s)", sanitizeLine(string(code)), sanitizeLine(msg), retry)
}

// usageLine prints the usage summary: the running total of physical
// requests when the run reported it, else fallback.
func (r *renderer) usageLine(fallback keel.Usage) {
	u := r.usage
	if u.IsZero() {
		u = fallback
	}
	if u.IsZero() {
		return
	}
	r.line(styleDim, "  usage: %d tokens in · %d out · %d %s%s%s", u.InputTokens, u.OutputTokens,
		u.Requests, plural(u.Requests, "request", "requests"), searchesNote(u), costNote(u))
}

// searchesNote is " · 3 web searches" for usage that counts hosted web
// searches (billed per search), "" otherwise.
func searchesNote(u keel.Usage) string {
	if u.WebSearches <= 0 {
		return ""
	}
	if u.WebSearches == 1 {
		return " · 1 web search"
	}
	return fmt.Sprintf(" · %d web searches", u.WebSearches)
}

// hostedText is the line of a hosted tool's use: `⌕ web_search "query"
// → 3 results`, or `⌕ code_execution · what it did`; every part from the
// backend is sanitized and cut.
func hostedText(e keel.HostedToolActivity) string {
	s := "⌕ " + truncate(sanitizeLine(e.Name), cardArgsRunes)
	if e.Query != "" {
		s += ` "` + truncate(sanitizeLine(e.Query), cardArgsRunes) + `"`
	}
	if n := len(e.URLs); n > 0 {
		s += fmt.Sprintf(" → %d %s", n, plural(n, "result", "results"))
	}
	if e.Detail != "" {
		s += " · " + truncate(sanitizeLine(e.Detail), cardLineRunes)
	}
	return s
}

func (r *renderer) toolFinished(e keel.ToolFinished) {
	glyph, style, word := "✓", styleGreen, ""
	switch e.Status {
	case keel.ToolOK:
	case keel.ToolInterrupted:
		glyph, style, word = "⊘", styleYellow, " interrupted"
	default:
		glyph, style, word = "✗", styleRed, " "+sanitizeLine(string(e.Status))
	}
	dur := ""
	if e.Duration > 0 {
		dur = " · " + fmtDuration(e.Duration.Std())
	}
	r.line(style, "└ %s %s%s%s", glyph, sanitizeLine(e.Name), word, dur)
	lines := strings.Split(strings.TrimRight(sanitize(e.Output), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return
	}
	outStyle := styleDim
	if e.Status != keel.ToolOK {
		outStyle = ""
	}
	for i, l := range lines {
		if i == cardOutputLines {
			r.line(styleDim, "  … %d more %s", len(lines)-i, plural(len(lines)-i, "line", "lines"))
			break
		}
		r.line(outStyle, "  %s", truncate(strings.ReplaceAll(l, "\t", "    "), cardLineRunes))
	}
}

// relayed writes a child's streamed text (docs/contract.md §21.4),
// indented under its path, one block per child: a switch between children
// starts a new line with the path.
func (r *renderer) relayed(path string, ch transcript.Change) {
	if ch.Text == "" {
		return
	}
	depth := strings.Count(path, "/") + 1
	indent := strings.Repeat("  ", depth) + "│ "
	if ch.Discarded {
		r.line(styleYellow, "%s↺ %s: an attempt was abandoned; its output above is discarded", indent, sanitizeLine(path))
	}
	label := indent + sanitizeLine(path) + ": "
	text := strings.ReplaceAll(sanitize(ch.Text), "\n", "\n"+indent)
	r.stream("agent:"+path, styleDim, label, text)
}

// agentFinished closes a child's card.
func (r *renderer) agentFinished(e keel.AgentFinished) {
	glyph, style := "✓", styleGreen
	switch e.Status {
	case keel.StatusCompleted:
	case keel.StatusCancelled:
		glyph, style = "⊘", styleYellow
	default:
		glyph, style = "✗", styleRed
	}
	r.line(style, "└ %s agent %s (%s) %s in %d %s%s", glyph, sanitizeLine(e.Agent), sanitizeLine(e.Path),
		sanitizeLine(string(e.Status)), e.Steps, plural(e.Steps, "step", "steps"), searchesNote(e.Usage)+costNote(e.Usage))
	if e.Error != nil {
		r.line(styleDim, "  %s: %s", sanitizeLine(string(e.Error.Code)), truncate(sanitizeLine(e.Error.Message), cardLineRunes))
	}
}

// stream writes streamed text of a block, starting a new line when the
// block changes (text after reasoning, text after a card).
func (r *renderer) stream(block, style, prefix, text string) {
	text = sanitize(text)
	if text == "" {
		return
	}
	if r.block != block {
		r.endLine()
		r.block = block
		text = prefix + text
	}
	r.write(style, text)
}

// line writes a whole line on its own, ending any streamed text first.
func (r *renderer) line(style, format string, args ...any) {
	r.endLine()
	r.block = ""
	r.write(style, fmt.Sprintf(format, args...)+"\n")
}

func (r *renderer) endLine() {
	if r.midLine {
		r.write("", "\n")
	}
}

func (r *renderer) write(style, s string) {
	if s == "" {
		return
	}
	if r.opts.color && style != "" {
		// Style each line separately, so a reset never hides behind a
		// newline the terminal has already scrolled past.
		body := strings.TrimSuffix(s, "\n")
		body = strings.ReplaceAll(body, "\n", styleReset+"\n"+style)
		s = style + body + styleReset + s[len(strings.TrimSuffix(s, "\n")):]
	}
	_, _ = io.WriteString(r.out, s)
	r.midLine = !strings.HasSuffix(s, "\n")
	r.prompted = false
}

// sanitize makes untrusted text (model output, tool output, error
// messages) safe for a terminal: it drops ESC and every other C0 control
// but newline and tab, DEL, and the C1 controls (U+0080–U+009F, where
// U+009B alone starts a control sequence on some terminals), and replaces
// invalid UTF-8. What an escape sequence leaves behind ("[31m") stays
// visible, which is the honest rendering of what the model sent.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return -1
		}
		return r
	}, s)
}

// sanitizeLine is sanitize for text shown inside one line.
func sanitizeLine(s string) string {
	return strings.NewReplacer("\n", " ", "\t", " ").Replace(sanitize(s))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return sanitizeLine(s[:i]) + " …"
	}
	return sanitizeLine(s)
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return string(rs[:n-1]) + "…"
}

// compactArgs shows tool arguments as one line of compact JSON.
func compactArgs(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return truncate(sanitizeLine(string(raw)), cardArgsRunes)
	}
	return truncate(sanitizeLine(b.String()), cardArgsRunes)
}

func resetReason(r keel.ResetReason) string {
	var s string
	switch r.Kind {
	case keel.ResetMalformed:
		s = "malformed response"
	case keel.ResetRetryableFailure:
		s = "retryable failure"
		if r.Failure != "" {
			s += ": " + sanitizeLine(string(r.Failure))
		}
		if r.RetryAfter != nil {
			s += ", retry after " + fmtDuration(r.RetryAfter.Std())
		}
	default:
		s = sanitizeLine(r.Kind)
	}
	if r.Detail != "" {
		s += ": " + truncate(sanitizeLine(r.Detail), cardLineRunes)
	}
	return s
}

func retryCause(e keel.ProviderRequestRetry) string {
	s := sanitizeLine(string(e.Kind))
	if e.Status != 0 {
		s += ", HTTP " + strconv.Itoa(e.Status)
	}
	if e.RetryAfter != nil {
		s += ", provider asked for " + fmtDuration(e.RetryAfter.Std())
	}
	if e.Message != "" {
		s += ": " + truncate(sanitizeLine(e.Message), cardLineRunes)
	}
	return s
}

// fmtDuration rounds d for display: 3ms, 1.2s, 2m5s.
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
