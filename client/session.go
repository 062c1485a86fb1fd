package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/live"
)

// Session is a handle on one session.
type Session struct {
	c  *Client
	id string
	// conversation is what a send of this handle starts the session
	// with (StartingWith).
	conversation []keel.Message
}

// ID returns the session's ID.
func (s *Session) ID() string { return s.id }

// StartingWith returns a handle on the session whose sends, when one
// starts the session, start it with msgs as its transcript: prior turns
// its first run follows (api.SessionInput.Conversation; an eval case's
// conversation, docs/contract.md §24.1). msgs must pass
// api.CheckConversation, or each send fails with its error. A session
// that exists already keeps its own transcript, so a send again (a
// retry) into the session one started goes on in it.
func (s *Session) StartingWith(msgs []keel.Message) *Session {
	return &Session{c: s.c, id: s.id, conversation: msgs}
}

// SendOption tunes one Send.
type SendOption func(*api.SendRequest)

// WithConfig sets the run's model, tools and limits; set fields override
// the session's defaults for this run only (with SetDefault, for later
// runs too).
func WithConfig(cfg api.RunConfig) SendOption {
	return func(r *api.SendRequest) { c := cfg; r.Config = &c }
}

// SetDefault makes the config of WithConfig the session's default as
// well: its set fields replace the defaults' when this run starts, for it
// and every later run (docs/contract.md §11.6). Without a WithConfig,
// Send fails with keel.ErrInvalidInput; so it does with OrSteer, since
// steering has no run config.
func SetDefault() SendOption {
	return func(r *api.SendRequest) { r.SetDefault = true }
}

// Queue makes Send queue the prompt as the next run when a run is active,
// instead of failing with keel.ErrRunActive.
func Queue() SendOption {
	return func(r *api.SendRequest) { r.IfActive = api.IfActiveQueue }
}

// OrSteer makes Send, while a run is active, deliver the prompt to that run
// as steering instead of failing; the returned Run then has SteeringID set.
func OrSteer() SendOption {
	return func(r *api.SendRequest) { r.IfActive = ifActiveSteer }
}

// ifActiveSteer is handled by the client: the session only knows reject and
// queue, and steering must be accepted by the run itself.
const ifActiveSteer api.IfActive = "steer"

// Send submits a prompt and returns its run once the run has started (or,
// with Queue, once it is queued). The first Send creates the session.
// While a run is active Send fails with keel.ErrRunActive; to an ID of a
// child session's form (api.IsChildSessionID), with keel.ErrNotAccepting.
//
// With a live channel (Options.Live), Send also subscribes to the
// session's deltas before it sends the prompt, so that the returned run's
// first Events call streams from the run's first delta: deltas are not
// kept anywhere, and a subscription opened after the run started would
// miss those sent before it. That first Events call takes the
// subscription over; unclaimed, it is closed after 30 seconds, and at
// once when the send fails. A run delivered as steering (OrSteer) gets
// none. Without Options.Live, Send subscribes to nothing.
func (s *Session) Send(ctx context.Context, prompt string, opts ...SendOption) (*Run, error) {
	return s.sendAs(ctx, newID(), prompt, opts)
}

// SendOnce is Send under an ID of the caller's (1 to MaxSendIDBytes
// bytes), subscribing as Send does: sent again with the same ID, by a caller that does not know
// whether its first call got through, the prompt is applied once and the
// call answers the first one's run. Temporal remembers the update within
// the session's execution; the session itself remembers its last
// api.OnceRemembered IDs across continue-as-new (a session continues as
// new after each run), so a repeat after the run ended starts nothing
// either (docs/contract.md §11.7). A schedule's firing sends this way,
// under its workflow's ID.
func (s *Session) SendOnce(ctx context.Context, id, prompt string, opts ...SendOption) (*Run, error) {
	if id == "" || len(id) > MaxSendIDBytes {
		return nil, keel.Errorf(keel.CodeInvalidInput, "a send's ID must be 1 to %d bytes", MaxSendIDBytes)
	}
	return s.sendAs(ctx, id, prompt, append(opts, func(r *api.SendRequest) { r.Once = id }))
}

// MaxSendIDBytes bounds the ID of SendOnce.
const MaxSendIDBytes = api.MaxOnceBytes

func (s *Session) sendAs(ctx context.Context, updateID, prompt string, opts []SendOption) (*Run, error) {
	if err := keel.ValidateSessionID(s.id); err != nil {
		return nil, err
	}
	if api.IsChildSessionID(s.id) {
		// Refused before Temporal is asked, so that a send never starts a
		// session under a child's ID, existing or not (docs/contract.md
		// §21.3); the answer is the one a child gives.
		return nil, keel.Errorf(keel.CodeNotAccepting,
			"%s is a child session's ID: only a parent's delegation starts a session so named, and a child takes no prompts", s.id)
	}
	if err := api.CheckConversation(s.conversation); err != nil {
		return nil, err
	}
	req := api.SendRequest{Prompt: prompt}
	for _, o := range opts {
		o(&req)
	}
	if req.SetDefault && req.IfActive == ifActiveSteer {
		return nil, keel.Errorf(keel.CodeInvalidInput, "set_default cannot go with if_active steer: steering has no run config")
	}
	if req.IfActive != ifActiveSteer {
		return s.send(ctx, req, updateID)
	}
	req.IfActive = api.IfActiveReject
	// The active run may end between the two calls; a few rounds settle it.
	for range 5 {
		run, err := s.send(ctx, req, updateID)
		if !errors.Is(err, keel.ErrRunActive) {
			return run, err
		}
		active, err := s.ActiveRun(ctx)
		if err != nil {
			return nil, err
		}
		if active == nil {
			continue
		}
		id, err := active.SteerAttached(ctx, prompt, req.Attachments...)
		if errors.Is(err, keel.ErrNotAccepting) {
			continue
		}
		if err != nil {
			return nil, err
		}
		active.SteeringID = id
		return active, nil
	}
	return nil, &keel.Error{Code: keel.CodeRunActive, Message: "session " + s.id + " kept changing runs; try again"}
}

func (s *Session) send(ctx context.Context, req api.SendRequest, updateID string) (*Run, error) {
	// Subscribe to deltas before the run can start, so its first Events
	// stream misses none (Send's documentation says so).
	var early live.Subscription
	if s.c.live != nil {
		sub, err := s.c.live.Subscribe(ctx, s.id, live.SubscribeOptions{Buffer: s.c.liveBuf})
		if err == nil {
			early = sub
		}
	}
	run, err := s.sendUpdate(ctx, req, updateID)
	if err != nil {
		if early != nil {
			_ = early.Close()
		}
		return nil, err
	}
	if early != nil {
		run.early.Store(newEarlySub(early))
	}
	return run, nil
}

func (s *Session) sendUpdate(ctx context.Context, req api.SendRequest, updateID string) (*Run, error) {
	// A start operation is used once: each send makes its own, as a send
	// again after a lost update (resumeUpdate) does.
	newStart := func() client.WithStartWorkflowOperation {
		return s.c.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       s.id,
			TaskQueue:                api.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			// A closed session is not silently replaced by an empty one.
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			TypedSearchAttributes: temporal.NewSearchAttributes(api.AttrSessionID.ValueSet(s.id)),
			StaticSummary:         "keel session " + s.id,
			Priority:              temporal.Priority{PriorityKey: api.SessionPriority},
		}, api.SessionWorkflowName, api.SessionInput{SessionID: s.id, Config: s.c.config, HandOver: s.c.handOver, Shape: api.ShapeLean,
			Conversation: s.conversation})
	}
	// The update has an ID of our own so that a call that timed out while
	// the server was busy can be resumed, never sent twice.
	var res api.SendResult
	err := s.c.resumeUpdate(ctx, s.id, updateID, &res, func() (client.WorkflowUpdateHandle, error) {
		return s.c.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: newStart(),
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID: updateID, UpdateName: api.UpdateSend, Args: []any{req},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, s.closedError(ctx)
	}
	if err != nil {
		return nil, fromTemporal(err, "session "+s.id)
	}
	return &Run{s: s, ID: res.RunID, Number: res.Number, Revision: res.Revision, BaseSeq: res.BaseSeq, Queued: res.Queued,
		Repeated: res.Repeated, execution: res.Execution}, nil
}

// Run returns a handle on run number n of the session.
func (s *Session) Run(n int) *Run {
	return &Run{s: s, ID: keel.RunID(s.id, n), Number: n, BaseSeq: -1}
}

// State returns the session's state. For a session whose workflow was
// terminated or failed, State is keel.StateTerminated or keel.StateFailed
// and Closed says when and why.
func (s *Session) State(ctx context.Context) (api.SessionStatus, error) {
	return s.state(ctx)
}

// History returns a page of the committed transcript: at most limit
// messages (0 for the default) from offset.
func (s *Session) History(ctx context.Context, offset, limit int) (api.HistoryPage, error) {
	var page api.HistoryPage
	return page, s.query(ctx, s.id, api.QueryHistory, &page, api.HistoryQuery{Offset: offset, Limit: limit})
}

// Cancel cancels the session's active run, if any. It is idempotent.
func (s *Session) Cancel(ctx context.Context) error {
	return fromTemporal(s.c.tc.SignalWorkflow(ctx, s.id, "", api.SignalCancel, nil), "session "+s.id)
}

func (s *Session) query(ctx context.Context, workflowID, name string, out any, args ...any) error {
	v, err := s.c.queryWorkflow(ctx, workflowID, name, args...)
	if err != nil {
		return fromTemporal(err, fmt.Sprintf("workflow %s", workflowID))
	}
	return v.Get(out)
}
