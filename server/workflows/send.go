package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/carry"
	"github.com/keelrun/keel/internal/instrument"
)

// validateSend refuses a prompt before it enters history
// (docs/contract.md §11, §18).
func (s *session) validateSend(req api.SendRequest) error {
	if s.delegated != nil {
		return wireError(keel.Errorf(keel.CodeNotAccepting,
			"session %s is a child of %s: it runs the task it was given and takes no prompts", s.id, s.delegated.Parent))
	}
	if len(req.Once) > api.MaxOnceBytes {
		return wireError(keel.Errorf(keel.CodeInvalidInput, "once: a send's key must be 1 to %d bytes, got %d", api.MaxOnceBytes, len(req.Once)))
	}
	if err := checkText("prompt", req.Prompt, s.rules.limits().PromptBytes); err != nil {
		return err
	}
	if _, ok := s.takenOnce(req.Once); ok {
		// Taken before: the handler answers what it answered then, and
		// starts nothing, so the run's checks do not apply; but the
		// request enters history as any send does, so its size does.
		return checkConfig(s.defaultsAhead().Merge(req.Config), s.rules.limits().ConfigBytes)
	}
	switch req.IfActive {
	case "", api.IfActiveReject, api.IfActiveQueue:
	default:
		return wireError(keel.Errorf(keel.CodeInvalidInput, "if_active %q: use %q or %q", req.IfActive, api.IfActiveReject, api.IfActiveQueue))
	}
	if err := validateSetDefault(req); err != nil {
		return err
	}
	cfg := s.defaultsAhead().Merge(req.Config)
	if err := cfg.Validate(); err != nil {
		return wireError(err.(*keel.Error))
	}
	if err := CheckOutputSchema(cfg.OutputSchema); err != nil {
		return wireError(err)
	}
	if err := s.rules.admitsAgent(req, cfg); err != nil {
		return wireError(err)
	}
	if a, ok := s.rules.Agents[cfg.Agent]; ok {
		cfg = a.Apply(cfg)
	}
	if err := s.rules.CheckHooks(cfg); err != nil {
		return wireError(err.(*keel.Error))
	}
	if !s.rules.admitsModel(cfg.WithDefaults().Model) {
		return wireError(s.rules.modelRefused())
	}
	if err := s.rules.admitsReasoning(cfg); err != nil {
		return wireError(err)
	}
	if err := s.rules.admitsAttachments(cfg.WithDefaults().Model, req.Attachments); err != nil {
		return wireError(err)
	}
	if err := s.rules.admitsBudgets(cfg); err != nil {
		return wireError(err)
	}
	if s.st.Shutdown {
		return wireError(keel.ErrRuntimeShutdown)
	}
	if (s.run != nil || len(s.queue) > 0) && req.IfActive != api.IfActiveQueue {
		ref := "a run"
		if s.run != nil {
			ref = s.run.in.RunID
		}
		return wireError(&keel.Error{Code: keel.CodeRunActive, Message: ref + " is already active in this session"})
	}
	return s.checkSendLimits(req)
}

// shuttingDown reports whether keel is shut down for this session, or a
// shutdown signal waits in its channel: when a signal and a send arrive in
// one workflow task (the shutdown came while the session continued as
// new, the send right after it), the send's validator and handler run
// before the goroutine that takes the signal, and a validator cannot look
// at a channel (docs/contract.md §13).
func (s *session) shuttingDown(ctx workflow.Context) bool {
	return s.st.Shutdown || workflow.GetSignalChannel(ctx, api.SignalShutdown).Len() > 0
}

// send accepts a prompt. It returns once the run has started, or at once
// with Queued set when it waits behind another run.
func (s *session) send(ctx workflow.Context, req api.SendRequest) (api.SendResult, error) {
	if r, ok := s.takenOnce(req.Once); ok {
		r.Repeated = true
		return r, nil
	}
	res, err := s.admit(ctx, req)
	if err == nil && req.Once != "" {
		s.takeOnce(req.Once, res)
	}
	return res, err
}

// takenOnce returns the result of the send the session took under key,
// if it remembers one (docs/contract.md §11.7).
func (s *session) takenOnce(key string) (api.SendResult, bool) {
	if key == "" {
		return api.SendResult{}, false
	}
	for _, o := range s.st.Once {
		if o.Key == key {
			return o.Result, true
		}
	}
	return api.SendResult{}, false
}

// takeOnce remembers a send taken under key, forgetting the oldest past
// api.OnceRemembered.
func (s *session) takeOnce(key string, res api.SendResult) {
	s.st.Once = append(s.st.Once, carry.OnceSent{Key: key, Result: res})
	if n := len(s.st.Once); n > api.OnceRemembered {
		s.st.Once = append([]carry.OnceSent(nil), s.st.Once[n-api.OnceRemembered:]...)
	}
}

// admit queues a prompt and waits for its run to start, or returns at
// once with Queued set when it waits behind another run.
func (s *session) admit(ctx workflow.Context, req api.SendRequest) (api.SendResult, error) {
	// Until it is queued, the prompt counts against the queue's limit
	// (checkQueue): a validator cannot see the sends it let through that
	// wait here.
	s.admitting++
	err := workflow.Await(ctx, func() bool { return s.checked })
	s.admitting--
	if err != nil {
		return api.SendResult{}, err
	}
	if s.shuttingDown(ctx) {
		return api.SendResult{}, wireError(keel.ErrRuntimeShutdown)
	}
	p := &pendingRun{number: s.st.Runs + len(s.queue) + 1, req: req, trace: ctx.Value(instrument.SpanContextKey)}
	s.queue = append(s.queue, p)
	if s.run != nil || len(s.queue) > 1 {
		return api.SendResult{RunID: keel.RunID(s.id, p.number), Number: p.number, Queued: true}, nil
	}
	// The send answers once the run started, so that a command or an
	// outcome the caller sends next finds it (docs/contract.md §11.1).
	p.waiting = true
	defer func() { p.waiting = false }()
	if err := workflow.Await(ctx, func() bool { return p.started }); err != nil {
		return api.SendResult{}, err
	}
	return p.result, p.err
}
