package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/internal/instrument"
	"github.com/keelrun/keel/server/tool"
)

// hostInput holds the questions a run's tool calls put to the host and
// their answers (docs/contract.md §6). A call asks and waits durably; the
// host's answer is validated against the question's schema and delivered
// exactly once; a request whose call stopped waiting is closed as
// interrupted and refuses answers.
type hostInput struct {
	runID string
	emit  emitFunc
	// changed is called whenever the set of open requests changed.
	changed func()

	byID  map[string]*hostRequest
	order []*hostRequest
	// batch holds the request IDs used in the current tool batch.
	batch map[string]bool
}

type hostRequest struct {
	api.HostRequest
	answer   json.RawMessage
	answered bool
	// gone marks a request whose requester stopped waiting (cancelled).
	gone bool
}

func newHostInput(runID string, emit emitFunc, changed func()) *hostInput {
	return &hostInput{runID: runID, emit: emit, changed: changed,
		byID: map[string]*hostRequest{}, batch: map[string]bool{}}
}

// newBatch starts a tool batch: request IDs may be used again.
func (h *hostInput) newBatch() { h.batch = map[string]bool{} }

// validate checks an answer before it is accepted. accepting reports
// whether the run still takes commands; a request whose requester is gone
// is refused as such first.
func (h *hostInput) validate(req api.RespondRequest, accepting func() error) error {
	r, ok := h.byID[req.RequestID]
	switch {
	case !ok:
		if err := accepting(); err != nil {
			return err
		}
		return wireError(&keel.Error{Code: keel.CodeUnknownRequest, Message: fmt.Sprintf("no host-input request %q in run %s", req.RequestID, h.runID)})
	case r.gone:
		return wireError(&keel.Error{Code: keel.CodeRequesterGone, Message: fmt.Sprintf("the call that asked %q is gone", req.RequestID)})
	case r.answered:
		return wireError(&keel.Error{Code: keel.CodeUnknownRequest, Message: fmt.Sprintf("request %q was already answered", req.RequestID)})
	}
	if err := accepting(); err != nil {
		return err
	}
	if len(req.Answer) == 0 {
		return wireError(keel.Errorf(keel.CodeInvalidAnswer, "answer to %q is empty", req.RequestID))
	}
	if len(r.Schema) > 0 {
		if err := tool.ValidateJSON(r.Schema, req.Answer); err != nil {
			return wireError(&keel.Error{Code: keel.CodeInvalidAnswer, Message: fmt.Sprintf("answer to %q: %v", req.RequestID, err)})
		}
	} else if !json.Valid(req.Answer) {
		return wireError(keel.Errorf(keel.CodeInvalidAnswer, "answer to %q is not JSON", req.RequestID))
	}
	return nil
}

// respond delivers a validated answer to its request.
func (h *hostInput) respond(req api.RespondRequest) {
	r := h.byID[req.RequestID]
	r.answer, r.answered = req.Answer, true
	h.emit(keel.HostInputResolved{RequestID: r.RequestID, ToolCallID: r.ToolCallID})
	h.changed()
}

// ask puts a question to the host for a tool call and waits durably for
// the answer. It fails with CodeDuplicateRequest when the batch already
// used the request ID, and with ErrCancelled when ctx ends first.
func (h *hostInput) ask(ctx workflow.Context, callID string, q tool.Question) (json.RawMessage, error) {
	id := callID + "/" + q.ID
	if h.batch[id] {
		return nil, &keel.Error{Code: keel.CodeDuplicateRequest,
			Message: fmt.Sprintf("host-input request %q was already used in this tool batch", id)}
	}
	h.batch[id] = true
	r := &hostRequest{HostRequest: api.HostRequest{RequestID: id, ToolCallID: callID, Prompt: q.Prompt, Schema: q.Schema}}
	h.byID[id] = r
	h.order = append(h.order, r)
	h.emit(keel.HostInputRequested{RequestID: id, ToolCallID: callID, Prompt: q.Prompt, Schema: q.Schema})
	h.changed()
	asked := workflow.Now(ctx)
	err := workflow.Await(ctx, func() bool { return r.answered })
	instrument.HostInputWaited(workflow.GetMetricsHandler(ctx), err == nil && r.answered, workflow.Now(ctx).Sub(asked))
	if err != nil || !r.answered {
		h.drop(r)
		return nil, keel.ErrCancelled
	}
	return r.answer, nil
}

// drop closes a request whose requester stopped waiting.
func (h *hostInput) drop(r *hostRequest) {
	if r.answered || r.gone {
		return
	}
	r.gone = true
	h.emit(keel.HostInputResolved{RequestID: r.RequestID, ToolCallID: r.ToolCallID, Interrupted: true})
	h.changed()
}

// open returns the requests waiting for an answer, oldest first.
func (h *hostInput) open() []api.HostRequest {
	var open []api.HostRequest
	for _, r := range h.order {
		if !r.answered && !r.gone {
			open = append(open, r.HostRequest)
		}
	}
	return open
}

// waiting reports whether any request waits for an answer.
func (h *hostInput) waiting() bool {
	for _, r := range h.order {
		if !r.answered && !r.gone {
			return true
		}
	}
	return false
}

// closeAll closes every open request, at the end of a run.
func (h *hostInput) closeAll() {
	for _, r := range h.order {
		h.drop(r)
	}
}
