package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/provider/scripted"
)

const runDesc = `Sends PROMPT to a session (a new one with a random ID unless --session
is given) and renders the run as it happens: streamed text, tool calls as
cards, retries, and a usage summary. It exits when the run ends: status 0 if
it completed, 1 if it failed, 2 if it was cancelled. Ctrl-C stops following
but not the run, which is durable (exit 130; resume with "keel events
SESSION --follow", stop it with "keel cancel SESSION"). The model defaults
to the built-in demo script, scripted:demo, which needs no API key; with it
the tools default to the demo's (list_files, read_file, sleep, write_file),
with any other model to none unless --tools names them. --model, --tools,
--max-steps and --approve-ask configure this run only; with --set-default
they become the session's defaults as well, for later prompts (from any
client) that do not set them. --attach FILE sends an image or a PDF with the
prompt (repeat it for more): the file is checked here, by its content, then
stored in the workers' content store, and the prompt carries a reference to
it.`

// promptFlags are the flags that say what a prompt runs with, shared by
// run and send.
type promptFlags struct {
	session  string
	model    string
	tools    listFlag
	maxSteps int
	// approveAsk names the tools that need the host's approval per call.
	approveAsk listFlag
	// setDefault makes the run's configuration the session's default too.
	setDefault bool
	// budget and sessionBudget are --budget and --session-budget.
	budget, sessionBudget budgetFlag
	// outputSchema is --output-schema.
	outputSchema schemaFlag
	// agent is --agent: the run runs as a named agent of the worker.
	agent string
	// effort and thinking are --reasoning-effort and --reasoning-budget.
	effort   string
	thinking int
	// hooks is --hook.
	hooks hookFlag
	// attach is --attach; files are its files, read and checked by
	// validate.
	attach attachFlag
	files  []attachFile
	// once is --once: the send's once key (docs/contract.md §11.7).
	once string
}

func (p *promptFlags) register(fs *flagSet) {
	fs.StringVar(&p.session, "session", "", "session `ID` to continue (default: a new session)")
	fs.StringVar(&p.model, "model", api.DefaultModel,
		"model `SPEC` the worker offers: scripted:demo, scripted:NAME (a script of the worker's --scripts directory), openai:MODEL, anthropic:MODEL, or NAME of a model in the worker's keel.yaml (\"default\" names its default_model)")
	fs.Var(&p.tools, "tools", "comma-separated tool `LIST` (default: the demo's tools for scripted:demo, else none)")
	fs.IntVar(&p.maxSteps, "max-steps", 0, "most model turns in the run (default 32)")
	fs.Var(&p.approveAsk, "approve-ask", "comma-separated tool `LIST` whose every call waits for the host's approval (\"*\": all tools)")
	fs.Var(&p.budget, "budget", "most this run may spend: `AMOUNT` in USD (0.50), AMOUNT CUR (\"0.50 EUR\"), or N tokens (\"20000 tokens\"); the worker's ceiling still applies")
	fs.Var(&p.sessionBudget, "session-budget", "most the session's runs may spend together, counted from its start: `AMOUNT` as for --budget")
	fs.StringVar(&p.agent, "agent", "", "run as the worker's agent `NAME` (keel.yaml agents): its model, instructions, tools and output schema; not with --model, --tools or --output-schema")
	fs.Var(&p.outputSchema, "output-schema", "JSON Schema `FILE` the final answer must match; the outcome then carries it as JSON (docs/contract.md §21.1)")
	fs.StringVar(&p.effort, "reasoning-effort", "", "ask the model to reason first: `LEVEL` minimal, low, medium or high (refused where the model cannot)")
	fs.IntVar(&p.thinking, "reasoning-budget", 0, "ask the model to reason with up to `N` tokens (Anthropic's extended thinking; at least 1024)")
	fs.StringVar(&p.once, "once", "", "send under this `KEY` (with --session): sent again with the same KEY, after an error say, the prompt runs once and the command answers for that run (docs/contract.md §11.7)")
	p.hooks.register(fs, "the run")
	p.attach.register(fs)
	fs.BoolVar(&p.setDefault, "set-default", false,
		"make this run's --model, --tools, --max-steps and --approve-ask the session's defaults too, for later prompts that do not set them (default: they apply to this run only)")
}

// sendOptions are the send's options as the flags say: the run's
// configuration, for this run only unless --set-default, and the
// attachments (stored with attach).
func (p *promptFlags) sendOptions(atts []keel.Attachment) []client.SendOption {
	opts := []client.SendOption{client.WithConfig(p.config())}
	if p.setDefault {
		opts = append(opts, client.SetDefault())
	}
	if len(atts) > 0 {
		opts = append(opts, client.WithAttachments(atts...))
	}
	return opts
}

// send stores the --attach files and sends prompt to the session with
// opts after the flags' own.
func (p *promptFlags) send(ctx context.Context, kc *conn, sess *client.Session, prompt string, opts ...client.SendOption) (*client.Run, error) {
	atts, err := attach(ctx, kc, p.files)
	if err != nil {
		return nil, err
	}
	opts = append(p.sendOptions(atts), opts...)
	if p.once != "" {
		return sess.SendOnce(ctx, p.once, prompt, opts...)
	}
	return sess.Send(ctx, prompt, opts...)
}

// validate checks the flags and the prompt before anything is sent.
func (p *promptFlags) validate(fs *flagSet, stderr io.Writer, prompt string) (int, bool) {
	switch {
	case strings.TrimSpace(prompt) == "":
		return fs.usageError(stderr, "the prompt is empty"), false
	case p.maxSteps < 0:
		return fs.usageError(stderr, "--max-steps must be positive, got %d", p.maxSteps), false
	case !strings.Contains(p.model, ":") && !config.IsModelName(p.model):
		return fs.usageError(stderr, "--model %q: want scripted:demo, scripted:NAME, openai:MODEL, anthropic:MODEL or the NAME of a model in the worker's keel.yaml", p.model), false
	case len(prompt) > api.MaxPromptBytes:
		return fs.usageError(stderr, "the prompt is %d bytes; the limit is %d", len(prompt), api.MaxPromptBytes), false
	}
	if p.session != "" {
		if err := keel.ValidateSessionID(p.session); err != nil {
			return fs.usageError(stderr, "--session: %v", err), false
		}
	}
	switch {
	case p.once != "" && p.session == "":
		return fs.usageError(stderr, "--once needs --session: a key is remembered by its session"), false
	case len(p.once) > api.MaxOnceBytes:
		return fs.usageError(stderr, "--once is %d bytes; the limit is %d", len(p.once), api.MaxOnceBytes), false
	}
	if err := checkAgentFlag(fs, p.agent, "model", "tools", "output-schema"); err != nil {
		return fs.usageError(stderr, "%v", err), false
	}
	if r := p.reasoning(); r != nil {
		if err := r.Validate(); err != nil {
			return fs.usageError(stderr, "--reasoning-effort, --reasoning-budget: %s", err.(*keel.Error).Message), false
		}
	}
	files, code, ok := p.attach.load(fs, stderr)
	if !ok {
		return code, false
	}
	p.files = files
	return exitOK, true
}

// checkAgentFlag checks --agent NAME: a name an agent can have, and none
// of the flags clashing (those that set what an agent defines) given
// beside it. No agent passes.
func checkAgentFlag(fs *flagSet, agent string, clashing ...string) error {
	if agent == "" {
		return nil
	}
	if !api.ValidAgentName(agent) {
		return fmt.Errorf("--agent %q: an agent name is letters, digits, '-' and '_', starting with a letter", agent)
	}
	var given []string
	visit(fs, func(name string) { given = append(given, "--"+name) }, clashing...)
	if len(given) > 0 {
		return fmt.Errorf("--agent %s defines its model, instructions, tools and output schema: drop %s", agent, strings.Join(given, ", "))
	}
	return nil
}

// reasoning is the run's reasoning setting as the flags say; nil for none.
func (p *promptFlags) reasoning() *keel.Reasoning {
	if p.effort == "" && p.thinking == 0 {
		return nil
	}
	return &keel.Reasoning{Effort: keel.ReasoningEffort(p.effort), BudgetTokens: p.thinking}
}

// config is the run's configuration as the flags say.
func (p *promptFlags) config() api.RunConfig {
	cfg := api.RunConfig{Model: p.model, MaxSteps: p.maxSteps, Budget: p.budget.b, SessionBudget: p.sessionBudget.b,
		OutputSchema: p.outputSchema.schema, Reasoning: p.reasoning(), Hooks: p.hooks.hooks()}
	if p.agent != "" {
		// The agent's own model, tools and schema apply; its hooks run
		// before the run's own.
		cfg.Agent, cfg.Model, cfg.OutputSchema = p.agent, "", nil
	}
	switch {
	case p.agent != "":
	case p.tools.set:
		cfg.Tools = slices.Clone(p.tools.items)
		if cfg.Tools == nil {
			cfg.Tools = []string{}
		}
	case p.model == api.DefaultModel:
		cfg.Tools = slices.Clone(scripted.DemoTools)
	}
	for _, name := range p.approveAsk.items {
		if cfg.Approvals == nil {
			cfg.Approvals = map[string]api.Approval{}
		}
		cfg.Approvals[name] = api.ApprovalAsk
	}
	return cfg
}

// session returns the session handle the flags name, or a new one.
func (p *promptFlags) sessionOf(kc *conn) *client.Session {
	if p.session != "" {
		return kc.Session(p.session)
	}
	return kc.NewSession()
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "keel run [flags] PROMPT", runDesc)
	var p promptFlags
	var conn connFlags
	p.register(fs)
	conn.register(fs, true)
	asJSON := fs.Bool("json", false, "print one JSON event envelope per line instead of rendering")
	reasoning := fs.Bool("reasoning", false, "show the model's reasoning, dimmed")
	answerStdin := fs.Bool("answer-stdin", false, "ask the run's questions (ask_user, approvals) and read the answers from stdin even if it is not a terminal")
	pos, code, ok := fs.parse(args, stdout, stderr, 1, -1)
	if !ok {
		return code
	}
	prompt := strings.Join(pos, " ")
	if code, ok := p.validate(fs, stderr, prompt); !ok {
		return code
	}

	// A new session starts with no defaults of its own: the flags are
	// this run's configuration (sendOptions), not the session's.
	kc, err := conn.dial(ctx, stderr, api.RunConfig{})
	if err != nil {
		return fail(stderr, "run", err)
	}
	defer kc.close()
	sess := p.sessionOf(kc)
	run, err := p.send(ctx, kc, sess, prompt)
	if err != nil {
		return fail(stderr, "run", fmt.Errorf("send to session %s: %w", sess.ID(), err))
	}
	if !*asJSON {
		// The session ID is what every other command needs: say it first.
		fmt.Fprintf(stderr, "session %s · run %s\n", sess.ID(), run.ID)
	}
	var sink eventSink
	var ask *hostInput
	if *asJSON {
		// stdout carries envelopes only: questions go to stderr.
		sink = newJSONSink(stdout, stderr)
		ask = newHostInput(ctx, run, &plainPrompter{w: stderr}, *answerStdin)
	} else {
		r := newRenderer(stdout, renderOptions{color: useColor(stdout), reasoning: *reasoning})
		if ask = newHostInput(ctx, run, r, *answerStdin); ask != nil {
			r.opts.answering = true
		}
		sink = r
	}
	return followRun(ctx, run, sink, stderr, ask)
}

// eventSink is where followRun puts a run's events: the renderer, or JSON
// lines.
type eventSink interface {
	Render(keel.Envelope)
	Lagged(missed int)
	Outcome(keel.Outcome)
}

// followRun shows run's events until its terminal event, then reads its
// authoritative outcome and returns the matching exit status. With ask set
// it also puts the run's host-input questions to the user and delivers the
// answers (see hostInput). If ctx ends first, the run goes on and
// followRun says how to get back to it.
func followRun(ctx context.Context, run *client.Run, sink eventSink, stderr io.Writer, ask *hostInput) int {
	sessionID := run.Session().ID()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	events := pumpEvents(fctx, run)
	var lines <-chan string
	if ask != nil {
		lines = readLines(stdinOf(ctx), fctx.Done())
	}
loop:
	for {
		// Lines are taken only while a question waits for one, so lines
		// typed ahead answer the next questions in order.
		var waiting <-chan string
		if ask != nil && ask.waiting() {
			waiting = lines
		}
		select {
		case it, ok := <-events:
			if !ok {
				break loop
			}
			if it.err != nil {
				var lag *live.LaggedError
				if errors.As(it.err, &lag) {
					sink.Lagged(lag.Missed)
					continue
				}
				if ctx.Err() == nil {
					fmt.Fprintf(stderr, "keel: following the run broke off: %s\n", sanitize(it.err.Error()))
				}
				break loop
			}
			sink.Render(it.env)
			if ask != nil {
				ask.observe(it.env)
			}
		case line, ok := <-waiting:
			ask.answer(ctx, line, ok)
		case <-ctx.Done():
			break loop
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "\nkeel: stopped following; run %s goes on.\n"+
			"  follow it: keel events %s --follow\n  cancel it: keel cancel %s\n", run.ID, sessionID, sessionID)
		return exitDetached
	}
	outcome, err := run.Outcome(ctx)
	switch {
	case errors.Is(err, keel.ErrCancelled):
		sink.Outcome(outcome)
		return exitCancelled
	case err != nil && outcome.Status == "":
		// No outcome at all: the run's fate is unknown to us.
		return fail(stderr, "run", fmt.Errorf("read the outcome of %s: %w", run.ID, err))
	case err != nil:
		sink.Outcome(outcome)
		return exitFailed
	}
	sink.Outcome(outcome)
	return exitOK
}

// eventItem is one element of a run's event stream.
type eventItem struct {
	env keel.Envelope
	err error
}

// pumpEvents turns the run's event stream into a channel, closed when the
// stream ends or ctx does, so followRun can wait for input at the same time.
func pumpEvents(ctx context.Context, run *client.Run) <-chan eventItem {
	out := make(chan eventItem)
	go func() {
		defer close(out)
		for env, err := range run.Events(ctx) {
			select {
			case out <- eventItem{env, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// newHostInput returns the asker of followRun when the user answers host
// input here: forced, or stdin is a terminal. It asks through p.
func newHostInput(ctx context.Context, run *client.Run, p prompter, force bool) *hostInput {
	in := stdinOf(ctx)
	tty := isTerminalReader(in)
	if !force && !tty {
		return nil
	}
	return &hostInput{
		respond: func(ctx context.Context, id string, answer json.RawMessage) error {
			return run.Respond(ctx, id, answer)
		},
		out:       p,
		echo:      !tty,
		sessionID: run.Session().ID(),
	}
}

// jsonSink prints envelopes as JSON lines, for programs.
type jsonSink struct {
	enc    *json.Encoder
	stderr io.Writer
}

func newJSONSink(stdout, stderr io.Writer) *jsonSink {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return &jsonSink{enc: enc, stderr: stderr}
}

func (j *jsonSink) Render(env keel.Envelope) { _ = j.enc.Encode(env) }

// Lagged goes to stderr: stdout carries envelopes only.
func (j *jsonSink) Lagged(missed int) {
	fmt.Fprintf(j.stderr, "keel: %d live events missed\n", missed)
}

// Outcome prints nothing: the terminal envelope already said it, and the
// exit status says it again.
func (j *jsonSink) Outcome(keel.Outcome) {}
