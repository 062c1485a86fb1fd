package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/provider"
)

// Retry budget of one model turn (docs/contract.md §4).
const (
	// maxRequestsPerTurn bounds the physical provider requests of a turn.
	maxRequestsPerTurn = 4
	// maxMalformedPerTurn bounds the malformed responses accepted in a turn;
	// they share maxRequestsPerTurn.
	maxMalformedPerTurn = 2
	// cancelGrace bounds how long a cancelled turn waits for the activity to
	// hand back its partial text before giving up on it.
	cancelGrace = 2 * time.Second
)

// modelTurns runs a run's model turns, each with its retry budget.
// Temporal's own activity retries are off (one attempt per activity)
// because the workflow must record every attempt: the usage it billed, a
// stream reset so renderers discard its deltas, and the wait before the
// next.
type modelTurns struct {
	cfg              api.RunConfig
	sessionID, runID string
	// root is the run's context; work is cancelled when the run is.
	root, work workflow.Context
	emit       emitFunc
	lastSeq    func() int64
	meter      *meter
	transcript *transcript
	// relay is where a child session's deltas are copied (its
	// ancestors' streams, docs/contract.md §21.4).
	relay []api.RelayTarget
	// worker is told of each turn's result for what it says of the worker
	// (its sinks); while unchecked says so, turns ask whether keel is
	// shut down (api.ShapeLean only: lean.go).
	worker    func(*activities.ModelTurnResult)
	unchecked func() bool
	shutDown  func()
}

// turn runs the model turn of step. On failure it returns the typed error
// and the partial text of the last attempt.
func (m *modelTurns) turn(step int) (*activities.ModelTurnResult, string, *keel.Error) {
	budget := turnBudget{model: m.cfg.Model}
	var rate *activities.RateHold
	for attempt := 1; ; attempt++ {
		res, fail, err := m.attempt(step, attempt, rate)
		rate = nil
		if err == nil && m.worker != nil {
			m.worker(res)
		}
		if err != nil && fail.Shutdown {
			m.shutDown()
			return nil, "", keel.ErrRuntimeShutdown
		}
		if err == nil && res.RateWait != nil {
			// Its rate limit has a place for it later than a worker waits
			// heartbeating: the run waits with a timer and sends the same
			// attempt with that place (docs/contract.md §20.5).
			if err := workflow.Sleep(m.work, res.RateWait.Wait.Std()); err != nil {
				m.giveBackRate(*res.RateWait)
				return nil, "", keel.ErrCancelled
			}
			rate = res.RateWait
			attempt--
			continue
		}
		if err == nil {
			m.meter.limits = res.Limits
			answer, bad, kerr := checkAnswer(m.cfg.OutputSchema, res)
			if kerr != nil {
				m.meter.request(step, attempt, res.Response.Usage)
				return nil, "", kerr
			}
			if bad == nil {
				m.meter.request(step, attempt, res.Response.Usage)
				m.emit(keel.ModelCallCompleted{Step: step, Attempt: attempt, Metrics: res.Metrics})
				for i, h := range res.Response.Hosted {
					if i == maxHostedEvents {
						break
					}
					h.Step, h.Attempt = step, attempt
					m.emit(h)
				}
				m.meter.keep(res.Response.Usage)
				res.Answer = answer
				return res, "", nil
			}
			// An answer that does not match the output schema is a
			// malformed response of this turn (docs/contract.md §21.1).
			fail = bad
		}
		if fail.Budget != nil {
			// Refused before it was sent: nothing to count, and the run
			// ends here with what it has (docs/contract.md §20).
			return nil, "", &keel.Error{Code: keel.CodeBudgetExceeded, Message: fail.Budget.Message}
		}
		if !fail.Unsent { // cancelled before its request was sent: nothing to count
			m.meter.request(step, attempt, fail.Usage)
		}
		if m.work.Err() != nil {
			return nil, fail.Partial, keel.ErrCancelled
		}
		events, delay, gaveUp := budget.next(step, attempt, fail)
		if gaveUp != nil {
			return nil, fail.Partial, gaveUp
		}
		for _, ev := range events {
			m.emit(ev)
		}
		instrument.ModelRetry(workflow.GetMetricsHandler(m.root), retryKind(fail))
		if delay > 0 {
			if err := workflow.Sleep(m.work, delay); err != nil {
				// Cancelled during the wait.
				return nil, "", keel.ErrCancelled
			}
		}
	}
}

// giveBackRate returns a place under a rate limit the run waited for and
// will not use (it was cancelled), through a local activity that does not
// wait for the limit.
func (m *modelTurns) giveBackRate(h activities.RateHold) {
	dctx, _ := workflow.NewDisconnectedContext(m.root)
	lctx := workflow.WithLocalActivityOptions(dctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	if err := workflow.ExecuteLocalActivity(lctx, activities.RateGiveBackName, h).Get(lctx, nil); err != nil {
		workflow.GetLogger(m.root).Warn("could not give a rate limit's place back", "limit", h.Key, "err", err)
	}
}

// maxHostedEvents bounds the hosted_tool.activity events of one turn; a
// turn's further hosted tool uses are not reported.
const maxHostedEvents = 32

// attempt runs one ModelTurn activity (with rate, the place its run waited
// for under its rate limit). A failure comes back decoded as a
// TurnFailure; err is non-nil exactly when the attempt failed.
func (m *modelTurns) attempt(step, attempt int, rate *activities.RateHold) (*activities.ModelTurnResult, *activities.TurnFailure, error) {
	in := activities.ModelTurnInput{
		SessionID: m.sessionID, RunID: m.runID, Step: step, Attempt: attempt,
		Model: m.cfg.Model, System: m.cfg.System, MaxTokens: m.cfg.MaxTokens, Tools: m.cfg.Tools,
		Transcript: m.transcript.ref(),
		Tail:       m.transcript.ship(),
		AfterSeq:   m.lastSeq(),
		Budget:     m.meter.budget(m.cfg),
		// A run without a schema sends none, so its input is the same as
		// before typed answers.
		OutputSchema: m.cfg.OutputSchema,
		Reasoning:    m.cfg.Reasoning,
		Relay:        m.relay,
		Rate:         rate,
		CheckRuntime: m.unchecked != nil && m.unchecked(),
	}
	actx := workflow.WithActivityOptions(m.work, workflow.ActivityOptions{
		StartToCloseTimeout: m.cfg.ModelTimeout.Std(),
		HeartbeatTimeout:    m.cfg.HeartbeatAfter.Std(),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation: true,
		Summary:             fmt.Sprintf("model turn %d (%s)", step, m.cfg.Model),
	})
	fut := workflow.ExecuteActivity(actx, activities.ModelTurnName, in)

	var res activities.ModelTurnResult
	err := m.awaitCancellable(fut, &res)
	if err == nil {
		return &res, nil, nil
	}
	return nil, decodeTurnFailure(err), err
}

// awaitCancellable waits for an activity that hands back partial results
// when cancelled. Once the run is cancelled it waits at most cancelGrace
// for that hand-back (the worker may be gone).
func (m *modelTurns) awaitCancellable(fut workflow.Future, valuePtr any) error {
	dctx, _ := workflow.NewDisconnectedContext(m.root)
	var err error
	ready := false
	sel := workflow.NewSelector(dctx)
	sel.AddFuture(fut, func(f workflow.Future) { err = f.Get(dctx, valuePtr); ready = true })
	sel.AddReceive(m.work.Done(), func(workflow.ReceiveChannel, bool) {})
	sel.Select(dctx)
	if ready {
		return err
	}
	// A fresh selector: the first one still holds the closed Done channel,
	// which would be ready again at once.
	grace := workflow.NewSelector(dctx)
	grace.AddFuture(fut, func(f workflow.Future) { err = f.Get(dctx, valuePtr); ready = true })
	grace.AddFuture(workflow.NewTimer(dctx, cancelGrace), func(workflow.Future) {})
	grace.Select(dctx)
	if ready {
		return err
	}
	return temporal.NewCanceledError()
}

// turnBudget decides, after each failed attempt of one turn, whether the
// turn goes on (docs/contract.md §4): a malformed response is retried at
// once, at most maxMalformedPerTurn times; a retryable provider failure
// after max(min(hint, 60 s), backoff); nothing past maxRequestsPerTurn
// requests. It does no I/O, so every case is a plain function call.
type turnBudget struct {
	// model is the run's model spec, which names the provider.
	model     string
	malformed int
}

// next takes the failure of attempt (from 1) and returns the events that
// record the retry and how long to wait before it, or the error that ends
// the turn.
func (b *turnBudget) next(step, attempt int, fail *activities.TurnFailure) ([]keel.Event, time.Duration, *keel.Error) {
	if fail.Malformed != "" {
		b.malformed++
		if b.malformed > maxMalformedPerTurn || attempt >= maxRequestsPerTurn {
			msg := fmt.Sprintf("malformed response after %d attempts: %s", attempt, fail.Malformed)
			return nil, 0, &keel.Error{Code: keel.CodeMalformedResponse, Message: msg,
				Provider: &keel.ProviderError{Provider: providerOf(b.model), Kind: keel.ProviderMalformed, Message: msg}}
		}
		return []keel.Event{keel.ProviderStreamReset{Step: step, Attempt: attempt,
			Reason: keel.ResetReason{Kind: keel.ResetMalformed, Detail: fail.Malformed}}}, 0, nil
	}
	pe := fail.Provider
	if pe.Provider == "keel" {
		// Failures keel itself classified (a lost worker, a timeout) are
		// named after the run's provider, not "keel: keel: ...".
		pe.Provider = providerOf(b.model)
	}
	if !pe.Retryable || attempt >= maxRequestsPerTurn {
		return nil, 0, &keel.Error{Code: keel.CodeProvider, Message: pe.Error(), Retryable: pe.Retryable, Provider: pe}
	}
	var hint *keel.Duration
	if pe.RetryAfter > 0 {
		h := pe.RetryAfter
		hint = &h
	}
	delay := provider.RetryDelay(attempt, pe.RetryAfter.Std())
	return []keel.Event{
		keel.ProviderStreamReset{Step: step, Attempt: attempt,
			Reason: keel.ResetReason{Kind: keel.ResetRetryableFailure, Failure: pe.Kind, RetryAfter: hint}},
		keel.ProviderRequestRetry{Step: step, Attempt: attempt, Kind: pe.Kind, Status: pe.Status,
			RetryAfter: hint, Delay: keel.Duration(delay), Message: pe.Message},
	}, delay, nil
}

// decodeTurnFailure reads what a failed attempt left behind. A failure
// that is neither the provider's nor a malformed response comes back with
// Provider set to what keel makes of it, so the caller always has one of
// the two unless the attempt was cancelled.
func decodeTurnFailure(err error) *activities.TurnFailure {
	f := &activities.TurnFailure{}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		if canceled.HasDetails() {
			_ = canceled.Details(f)
		}
		// Cancelled without the run asking (checked by the caller): the
		// worker went away mid-request, as in a deploy.
		f.Provider = workerLost()
		return f
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		code := keel.Code(appErr.Type())
		switch {
		case code == keel.CodeRuntimeShutdown:
			f.Shutdown, f.Unsent = true, true
			return f
		case code == keel.CodeBudgetExceeded:
			if appErr.HasDetails() && appErr.Details(f) == nil && f.Budget != nil {
				return f
			}
			f.Budget = &activities.BudgetRefusal{Message: appErr.Message()}
			return f
		case code == keel.CodeProvider || code == keel.CodeMalformedResponse:
			if appErr.HasDetails() && appErr.Details(f) == nil && (f.Provider != nil || f.Malformed != "") {
				return f
			}
		case strings.HasPrefix(string(code), "keel.") || appErr.NonRetryable():
			// keel refused the request (a configuration problem): retrying
			// cannot help.
			f.Provider = &keel.ProviderError{Provider: "keel", Kind: keel.ProviderInvalidRequest,
				Message: "model turn failed: " + appErr.Message()}
			return f
		}
		// Any other error from the worker (a stopped worker's context, a
		// transcript that could not be fetched) is transient.
		f.Provider = &keel.ProviderError{Provider: "keel", Kind: keel.ProviderWorkerLost, Retryable: true,
			Message: "model turn failed on the worker: " + appErr.Message()}
		return f
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		// A missed heartbeat means the worker stopped mid-request; a
		// start-to-close timeout means the provider never finished.
		f.Provider = &keel.ProviderError{Provider: "keel", Kind: keel.ProviderTimeout, Retryable: true,
			Message: "model turn timed out"}
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
			f.Provider = workerLost()
		}
		return f
	}
	var panicErr *temporal.PanicError
	if errors.As(err, &panicErr) {
		f.Provider = &keel.ProviderError{Provider: "keel", Kind: keel.ProviderInvalidRequest,
			Message: "model turn panicked: " + panicErr.Error()}
		return f
	}
	f.Provider = &keel.ProviderError{Provider: "keel", Kind: keel.ProviderServer, Retryable: true, Message: err.Error()}
	return f
}

func workerLost() *keel.ProviderError {
	return &keel.ProviderError{Provider: "keel", Kind: keel.ProviderWorkerLost, Retryable: true,
		Message: "the worker stopped during the model turn"}
}

// retryKind names the failure a retry follows, for metrics.
func retryKind(fail *activities.TurnFailure) string {
	if fail.Malformed != "" || fail.Provider == nil {
		return "malformed"
	}
	return string(fail.Provider.Kind)
}

// providerOf returns the provider part of a model spec ("openai").
func providerOf(spec string) string {
	name, _, _ := strings.Cut(spec, ":")
	return name
}
