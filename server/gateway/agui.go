package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
)

// AGUIInput is the part of AG-UI's RunAgentInput the gateway reads; the
// rest (tools, context, state, parentRunId, protocolVersion) is accepted
// and ignored: keel's tools run on its workers, not in the frontend.
type AGUIInput struct {
	// ThreadID is the keel session.
	ThreadID string `json:"threadId"`
	// RunID names the AG-UI run; keel's run has its own ID.
	RunID    string        `json:"runId"`
	Messages []AGUIMessage `json:"messages"`
	// Resume answers the interrupts the previous AG-UI run ended with.
	Resume         []AGUIResume    `json:"resume,omitempty"`
	ForwardedProps json.RawMessage `json:"forwardedProps,omitempty"`
}

// AGUIMessage is one message of the thread; only user messages are read.
type AGUIMessage struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is a string or, for user messages, a list of parts whose
	// text parts make the prompt.
	Content json.RawMessage `json:"content,omitempty"`
}

// AGUIResume answers one interrupt: Status "resolved" delivers Payload as
// the host-input answer, "cancelled" cancels the keel run.
type AGUIResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// AGUIOptions is forwardedProps.keel: the run's overrides, as in
// RunRequest.
type AGUIOptions struct {
	Model     string                  `json:"model,omitempty"`
	Tools     []string                `json:"tools,omitempty"`
	System    string                  `json:"system,omitempty"`
	MaxSteps  int                     `json:"max_steps,omitempty"`
	Approvals map[string]api.Approval `json:"approvals,omitempty"`
	// Agent runs the prompt as the worker's agent of that name
	// (docs/contract.md §21.2); then no model, tools or system.
	Agent string `json:"agent,omitempty"`
}

// postAGUI serves POST /v1/ag-ui: an AG-UI run over a keel run, streamed
// as AG-UI events (docs/gateway.md, "AG-UI").
func (g *Gateway) postAGUI(w http.ResponseWriter, r *http.Request) {
	in, err := readAGUIInput(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	if !allowsSession(r, in.ThreadID) {
		// As for a session the key's prefix does not cover on any route.
		WriteError(w, sessionNotFound(in.ThreadID))
		return
	}
	ctx, done, err := g.OpenStream(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	defer done()
	// The stream follows its run with a follower of its own: one history
	// long poll, counted with the hubs' before anything is sent.
	if err := g.followers.acquire(); err != nil {
		WriteError(w, err)
		return
	}
	defer g.followers.release()
	s := g.c.Session(in.ThreadID)
	if len(in.Resume) > 0 {
		g.resumeAGUI(ctx, w, s, in)
		return
	}
	prompt, opts, err := in.runRequest()
	if err != nil {
		WriteError(w, err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
	run, err := s.Send(cctx, prompt, opts...)
	cancel()
	if err != nil {
		WriteError(w, err)
		return
	}
	// Run.Events takes the live subscription Send opened before the run
	// could start, so no delta of the run is missed.
	evs := startPump(ctx, run.Events)
	defer evs.stop()
	g.streamAGUI(ctx, w, newAGUIRun(in.ThreadID, in.RunID, run.ID), 0, evs, run.ID)
}

// resumeAGUI answers the interrupts of the previous AG-UI run and streams
// the same keel run on from the host-input request it stopped at: the
// durable sequence of that request is the cursor, so no event is repeated
// or skipped.
func (g *Gateway) resumeAGUI(ctx context.Context, w http.ResponseWriter, s *client.Session, in AGUIInput) {
	cctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
	defer cancel()
	run, err := s.ActiveRun(cctx)
	if err == nil && run == nil {
		err = keel.Errorf(keel.CodeNotAccepting, "session %s has no active run to resume", s.ID())
	}
	if err != nil {
		WriteError(w, err)
		return
	}
	cursor, step, err := interruptCursor(cctx, s, run, in.Resume)
	if err != nil {
		WriteError(w, err)
		return
	}
	// Follow the run from its start: the first event read proves the live
	// subscription is open before the answer lets the run stream on; what
	// the previous AG-UI run sent (up to the cursor) is skipped.
	evs := startPump(ctx, run.Events)
	defer evs.stop()
	select {
	case it, ok := <-evs.ch:
		if !ok || it.err != nil {
			WriteError(w, errors.Join(errAGUIFollow, it.err))
			return
		}
	case <-ctx.Done():
		return
	}
	cancelled := false
	for _, e := range in.Resume {
		switch {
		case e.Status == "cancelled" && !cancelled:
			cancelled = true
			err = run.Cancel(cctx)
		case e.Status == "resolved":
			err = run.Respond(cctx, e.InterruptID, e.Payload)
		}
		if err != nil {
			WriteError(w, err)
			return
		}
	}
	a := newAGUIRun(in.ThreadID, in.RunID, run.ID)
	a.skip = cursor
	g.streamAGUI(ctx, w, a, step, evs, run.ID)
}

var errAGUIFollow = errors.New("gateway: cannot follow the run")

// interruptCursor finds, in the run's log, the host-input requests the
// resume entries answer: the cursor is the last one's sequence, step the
// model step it happened in.
func interruptCursor(ctx context.Context, s *client.Session, run *client.Run, resume []AGUIResume) (cursor int64, step int, err error) {
	want := map[string]bool{}
	for _, e := range resume {
		if e.InterruptID == "" || (e.Status != "resolved" && e.Status != "cancelled") {
			return 0, 0, keel.Errorf(keel.CodeInvalidInput, "resume entries need an interruptId and a status of resolved or cancelled")
		}
		want[e.InterruptID] = true
	}
	after, cur := run.BaseSeq, 0
	for found := 0; found < len(want); {
		page, more, err := s.EventsPage(ctx, after, MaxEventsLimit)
		if err != nil {
			return 0, 0, err
		}
		for _, env := range page {
			after = env.Seq
			if env.RunID != run.ID {
				continue
			}
			ev, err := env.Event()
			if err != nil {
				return 0, 0, err
			}
			switch e := ev.(type) {
			case keel.StepStarted:
				cur = e.Step
			case keel.HostInputRequested:
				if want[e.RequestID] {
					found++
					cursor, step = env.Seq, cur
				}
			}
		}
		if !more && found < len(want) {
			return 0, 0, keel.Errorf(keel.CodeUnknownRequest, "run %s asked no question with the interrupt IDs given", run.ID)
		}
	}
	return cursor, step, nil
}

// streamAGUI writes the AG-UI run: RUN_STARTED, the keel run's events as
// AG-UI events, until the run ends or asks for host input.
func (g *Gateway) streamAGUI(ctx context.Context, w http.ResponseWriter, a *aguiRun, step int, evs *pump, keelRun string) {
	sw := NewSSEWriter(w, g.opts.WriteTimeout)
	write := func(out []aguiEvent) error {
		for _, ev := range out {
			data, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if err := sw.Event("", "", data); err != nil {
				return err
			}
		}
		return nil
	}
	if write(a.started(step)) != nil {
		return
	}
	keepAlive := time.NewTicker(g.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case it, ok := <-evs.ch:
			var lag *live.LaggedError
			switch {
			case !ok:
				_ = write(a.failed(keel.Errorf(keel.CodeInternal, "the event stream of run %s ended early", keelRun)))
				return
			case errors.As(it.err, &lag):
				if write(a.lagged(lag.Missed)) != nil {
					return
				}
			case it.err != nil:
				if ctx.Err() == nil {
					_ = write(a.failed(it.err))
				}
				return
			case it.env.RunID != keelRun:
			default:
				out, ended, err := a.translate(it.env)
				if err != nil {
					_ = write(a.failed(err))
					return
				}
				if write(out) != nil || ended {
					return
				}
			}
		case <-keepAlive.C:
			if time.Since(sw.Wrote) >= g.opts.KeepAlive && sw.Comment("keep-alive") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// pump reads an event iterator on its own goroutine, so the stream can
// wait for an event and a keep-alive at once.
type pump struct {
	ch     chan pumpItem
	cancel context.CancelFunc
	done   chan struct{}
}

type pumpItem struct {
	env keel.Envelope
	err error
}

// The iterator gets the pump's own context: stop must end it even while
// it waits for an event that will not come before the request ends (a
// run waiting for host input sends nothing more).
func startPump(ctx context.Context, events func(context.Context) iter.Seq2[keel.Envelope, error]) *pump {
	ctx, cancel := context.WithCancel(ctx)
	p := &pump{ch: make(chan pumpItem), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer close(p.ch)
		for env, err := range events(ctx) {
			select {
			case p.ch <- pumpItem{env, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p
}

// stop ends the iterator and waits for its goroutine.
func (p *pump) stop() {
	p.cancel()
	<-p.done
}

// readAGUIInput decodes a RunAgentInput. Unlike ReadJSON it accepts
// fields it does not know: AG-UI clients send more than keel reads.
func readAGUIInput(r *http.Request) (AGUIInput, error) {
	var in AGUIInput
	if err := requireJSON(r); err != nil {
		return in, err
	}
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return in, apiError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			"request body is over "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
	case err != nil:
		return in, apiError(http.StatusBadRequest, CodeBadRequest, "request body: "+err.Error())
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return in, apiError(http.StatusBadRequest, CodeBadRequest, "request body is not an AG-UI RunAgentInput: "+err.Error())
	}
	if in.RunID == "" {
		return in, keel.Errorf(keel.CodeInvalidInput, "runId is required")
	}
	if err := keel.ValidateSessionID(in.ThreadID); err != nil {
		return in, keel.Errorf(keel.CodeInvalidInput, "threadId is the keel session: %v", err)
	}
	return in, nil
}

// runRequest reads what a RunAgentInput without resume entries sends: the
// prompt and the run's overrides (forwardedProps.keel), checked before any
// call.
func (in AGUIInput) runRequest() (string, []client.SendOption, error) {
	prompt, err := lastUserPrompt(in.Messages)
	if err != nil {
		return "", nil, err
	}
	o, err := keelOptions(in.ForwardedProps)
	if err != nil || o == nil {
		return prompt, nil, err
	}
	cfg := api.RunConfig{Model: o.Model, Tools: o.Tools, System: o.System, MaxSteps: o.MaxSteps, Approvals: o.Approvals,
		Agent: o.Agent}
	if err := cfg.Validate(); err != nil {
		return "", nil, err
	}
	if o.Agent != "" && (o.Model != "" || o.System != "" || o.Tools != nil) {
		return "", nil, keel.Errorf(keel.CodeInvalidInput, "forwardedProps.keel: agent %s defines its model, instructions and tools: send none of them with it", o.Agent)
	}
	return prompt, []client.SendOption{client.WithConfig(cfg)}, nil
}

// lastUserPrompt is the text of the thread's last user message.
func lastUserPrompt(msgs []AGUIMessage) (string, error) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var text string
		if json.Unmarshal(msgs[i].Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			_ = json.Unmarshal(msgs[i].Content, &parts)
			var b []string
			for _, p := range parts {
				if p.Type == "text" && p.Text != "" {
					b = append(b, p.Text)
				}
			}
			text = strings.Join(b, "\n")
		}
		if strings.TrimSpace(text) == "" || len(text) > api.MaxPromptBytes {
			break
		}
		return text, nil
	}
	return "", keel.Errorf(keel.CodeInvalidInput,
		"the prompt is the last user message, of 1 to %d bytes of text; to answer interrupts, send resume entries", api.MaxPromptBytes)
}

// keelOptions reads forwardedProps.keel; nil when there is none.
func keelOptions(props json.RawMessage) (*AGUIOptions, error) {
	var p struct {
		Keel *json.RawMessage `json:"keel"`
	}
	if len(props) == 0 || json.Unmarshal(props, &p) != nil || p.Keel == nil {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(*p.Keel)))
	dec.DisallowUnknownFields()
	var o AGUIOptions
	if err := dec.Decode(&o); err != nil {
		return nil, keel.Errorf(keel.CodeInvalidInput, "forwardedProps.keel: %v", err)
	}
	return &o, nil
}
