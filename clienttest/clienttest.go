// Package clienttest lets the tests of code written against package
// client run without a server: New gives a *client.Client whose
// Temporal connection is an in-memory stand-in for keel's Session
// workflow, which answers each prompt with what the test's Responder says.
//
// The design: the code under test keeps its *client.Client and needs no
// interface of its own, and package client gained none. A *client.Client
// already takes an existing Temporal client (client.Options.Temporal);
// the Fake gives it one that speaks keel's wire contract (package api)
// for the calls below as a session does. So Send, Outcome, Events and the
// rest run the client's own code, with its checks, its typed errors and
// its event order, and a test reads the same values the code under test
// would read from a server. Nothing is dialled, subscribed or stored
// outside the Fake.
//
// Shutdown, the check of a new schedule, a fork and a rewind start or
// update keel's other workflows; the Fake stands in for the Session
// workflow only.
//
// What it does, and what it does not:
//
//   - Session.Send and SendOnce (with WithConfig, SetDefault, Queue) start
//     a run that ends at once: the Responder's Reply is its outcome. The
//     run's durable events are run.started, step.started and its terminal
//     event (run.completed, run.failed or run.cancelled), so Run.Events,
//     Session.EventsAfter and the other readers of the log see a whole
//     run. There are no deltas (no live channel), tool calls or host
//     input.
//   - Run.Outcome, Run.State, Session.State, Session.History and
//     Session.ActiveRun answer as for a session whose runs ended: the
//     transcript holds each completed run's prompt and answer.
//   - Since no run is ever active, Steer, Respond and RetractSteering fail
//     with keel.ErrNotAccepting, and Cancel does nothing.
//   - Forks, rewinds, schedules, Shutdown and MoveIdleSessions fail with
//     ErrUnsupported. Code that needs them, or runs with tools, steering
//     or deltas, is tested against a real keel (keel dev).
//
// Prompts lists what was sent, for a test to check.
package clienttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// ErrUnsupported is the error of a call the Fake does not stand in for.
var ErrUnsupported = errors.New("clienttest: not supported by the fake")

// Prompt is a prompt a session took: the run it started and the run's
// configuration (the session's defaults with the send's own).
type Prompt struct {
	SessionID string
	Run       int
	Text      string
	Config    api.RunConfig
}

// Reply is how a run ends: completed with Text (and Answer, for a run
// with an output schema), or, with Err set, failed with it (cancelled
// when its code is keel.CodeCancelled). Usage is what the run used.
type Reply struct {
	Text   string
	Answer json.RawMessage
	Usage  keel.Usage
	Err    *keel.Error
}

// Responder decides each run's Reply. It is called once per run, one run
// of a session at a time, and must not send to the session it answers.
type Responder func(Prompt) Reply

// Text is a Responder whose every run completes with text.
func Text(text string) Responder {
	return func(Prompt) Reply { return Reply{Text: text} }
}

// Fake stands in for keel behind a *client.Client. It is safe for
// concurrent use.
type Fake struct{ b *backend }

// backend is the Temporal client the Fake's clients use: the calls of
// sdkclient.Client that keel's client makes, answered as keel's workflows
// would. The embedded interface is nil: a call the client never makes
// would panic.
type backend struct {
	sdkclient.Client

	respond Responder

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever a history grows
	sessions map[string]*session
	prompts  []Prompt
}

// New returns a Fake whose runs end as respond says.
func New(respond Responder) *Fake {
	return &Fake{&backend{respond: respond, changed: make(chan struct{}), sessions: map[string]*session{}}}
}

// Client returns a client of the fake: a *client.Client as Dial returns
// it, for the code under test. Closing it leaves the Fake as it is.
func (f *Fake) Client() *client.Client {
	c, err := client.Dial(context.Background(), client.Options{Temporal: f.b,
		DataConverter: converter.GetDefaultDataConverter()})
	if err != nil {
		panic(err) // Dial with a Temporal client of its own dials nothing
	}
	return c
}

// Prompts returns the prompts the fake's sessions took, in order.
func (f *Fake) Prompts() []Prompt {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	return append([]Prompt(nil), f.b.prompts...)
}

// session is one Session workflow of the fake.
type session struct {
	id        string
	execution string
	sending   sync.Mutex // one run at a time
	defaults  api.RunConfig

	log        []keel.Envelope
	transcript []keel.Message
	runs       int
	revision   int64
	usage      keel.Usage
	outcomes   map[int]keel.Outcome
	last       *keel.Outcome
	once       map[string]api.SendResult
	history    []*historypb.HistoryEvent
	// task is the WorkflowTaskStarted event of the last task recorded,
	// which query answers name (api.EventsPage.Task).
	task int64
}

// record appends history events of a workflow task that committed the
// log up to its end, and wakes the readers waiting for history. f.mu is
// held.
func (f *backend) record(s *session) {
	add := func(ev *historypb.HistoryEvent) {
		ev.EventId = int64(len(s.history) + 1)
		s.history = append(s.history, ev)
	}
	add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED})
	s.task = int64(len(s.history))
	add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
			WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{StartedEventId: s.task}}})
	close(f.changed)
	f.changed = make(chan struct{})
}

// sessionOf returns the session workflowID names, or Temporal's NotFound.
func (f *backend) sessionOf(workflowID string) (*session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.sessions[workflowID]; s != nil {
		return s, nil
	}
	return nil, serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
}

// wireError is a session's refusal as a client receives it: encoded as
// a Temporal failure by the workflow's worker, and decoded by the client.
func wireError(e *keel.Error) error {
	fc := temporal.GetDefaultFailureConverter()
	return fc.FailureToError(fc.ErrorToFailure(temporal.NewApplicationErrorWithOptions(e.Message, string(e.Code),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{e}})))
}

// startOp is an update-with-start's start operation.
type startOp struct {
	opts     sdkclient.StartWorkflowOptions
	workflow any
	args     []any
}

func (o *startOp) Get(context.Context) (sdkclient.WorkflowRun, error) { return nil, ErrUnsupported }

// NewWithStartWorkflowOperation is Temporal's: the start of a session.
func (f *backend) NewWithStartWorkflowOperation(opts sdkclient.StartWorkflowOptions, workflow any, args ...any) sdkclient.WithStartWorkflowOperation {
	return &startOp{opts: opts, workflow: workflow, args: args}
}

// UpdateWithStartWorkflow is Temporal's: a send, which starts the session
// the first time.
func (f *backend) UpdateWithStartWorkflow(ctx context.Context, opts sdkclient.UpdateWithStartWorkflowOptions) (sdkclient.WorkflowUpdateHandle, error) {
	op, ok := opts.StartWorkflowOperation.(*startOp)
	if !ok || op.workflow != api.SessionWorkflowName || opts.UpdateOptions.UpdateName != api.UpdateSend {
		return nil, ErrUnsupported
	}
	var in api.SessionInput
	var req api.SendRequest
	if err := convert(op.args, &in); err != nil {
		return nil, err
	}
	if err := convert(opts.UpdateOptions.Args, &req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	s := f.sessions[op.opts.ID]
	if s == nil {
		s = &session{id: op.opts.ID, execution: "fake-" + op.opts.ID + "-1", defaults: in.Config,
			outcomes: map[int]keel.Outcome{}, once: map[string]api.SendResult{}}
		s.history = append(s.history, &historypb.HistoryEvent{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED})
		f.record(s)
		f.sessions[s.id] = s
	}
	f.mu.Unlock()
	res, err := f.send(s, req)
	return &handle{workflowID: s.id, runID: s.execution, updateID: opts.UpdateOptions.UpdateID, value: res, err: err}, nil
}

// send runs a send as the session's update handler does, its run
// ending at once. A real session continues as new after each run, so
// Temporal's memory of update IDs never outlasts a run; the session's
// own memory of keys (SendRequest.Once) does, and so it does here.
func (f *backend) send(s *session, req api.SendRequest) (api.SendResult, error) {
	s.sending.Lock()
	defer s.sending.Unlock()
	f.mu.Lock()
	if res, ok := s.once[req.Once]; ok && req.Once != "" {
		f.mu.Unlock()
		res.Repeated = true
		return res, nil
	}
	cfg := s.defaults.Merge(req.Config)
	if err := checkSend(req, cfg); err != nil {
		f.mu.Unlock()
		return api.SendResult{}, err
	}
	if req.SetDefault {
		s.defaults = cfg
	}
	cfg = cfg.WithDefaults()
	s.runs++
	n, base, rev := s.runs, int64(len(s.log)), s.revision
	p := Prompt{SessionID: s.id, Run: n, Text: req.Prompt, Config: cfg}
	f.prompts = append(f.prompts, p)
	runID := keel.RunID(s.id, n)
	f.mu.Unlock()

	reply := f.respond(p)

	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().UTC()
	emit := func(ev keel.Event) int64 {
		env, err := keel.Seal(ev, s.id, runID, now)
		if err != nil {
			panic(err)
		}
		env.Seq = int64(len(s.log) + 1)
		s.log = append(s.log, env)
		return env.Seq
	}
	emit(keel.RunStarted{Number: n, Revision: rev, Prompt: req.Prompt, Model: cfg.Model, Agent: cfg.Agent})
	emit(keel.StepStarted{Step: 1})
	o := keel.Outcome{RunID: runID, Number: n, Steps: 1, Usage: reply.Usage, UsageTotal: reply.Usage}
	usage := reply.Usage
	switch e := reply.Err; {
	case e == nil:
		s.revision++
		s.transcript = append(s.transcript, keel.UserMessage(req.Prompt),
			keel.Message{Role: keel.RoleAssistant, Content: reply.Text})
		o.Status, o.Text, o.Answer = keel.StatusCompleted, reply.Text, reply.Answer
		o.Seq = emit(keel.RunCompleted{Revision: s.revision, Text: reply.Text, Steps: 1, Usage: reply.Usage,
			Answer: reply.Answer, UsageTotal: &usage})
	case e.Code == keel.CodeCancelled:
		o.Status, o.Error = keel.StatusCancelled, e
		o.Seq = emit(keel.RunCancelled{Revision: s.revision, UsageTotal: &usage})
	default:
		o.Status, o.Error = keel.StatusFailed, e
		o.Seq = emit(keel.RunFailed{Code: e.Code, Message: e.Message, Retryable: e.Retryable,
			Revision: s.revision, UsageTotal: &usage})
	}
	o.Revision = s.revision
	s.usage = s.usage.Add(reply.Usage)
	s.outcomes[n], s.last = o, &o
	res := api.SendResult{RunID: runID, Number: n, Revision: rev, BaseSeq: base}
	if req.Once != "" {
		s.once[req.Once] = res
	}
	f.record(s)
	return res, nil
}

// checkSend refuses what a session refuses before a run starts.
func checkSend(req api.SendRequest, cfg api.RunConfig) error {
	switch {
	case req.Prompt == "":
		return wireError(keel.Errorf(keel.CodeInvalidInput, "prompt is empty"))
	case len(req.Prompt) > api.MaxPromptBytes:
		return wireError(keel.Errorf(keel.CodeTooLarge, "prompt is %d bytes; the limit is %d", len(req.Prompt), api.MaxPromptBytes))
	case len(req.Once) > api.MaxOnceBytes:
		return wireError(keel.Errorf(keel.CodeInvalidInput, "once: a send's key must be 1 to %d bytes", api.MaxOnceBytes))
	case req.SetDefault && req.Config == nil:
		return wireError(keel.Errorf(keel.CodeInvalidInput, "set_default needs a config"))
	}
	switch req.IfActive {
	case "", api.IfActiveReject, api.IfActiveQueue:
	default:
		return wireError(keel.Errorf(keel.CodeInvalidInput, "if_active %q: use %q or %q", req.IfActive, api.IfActiveReject, api.IfActiveQueue))
	}
	if err := cfg.Validate(); err != nil {
		var ke *keel.Error
		if errors.As(err, &ke) {
			return wireError(ke)
		}
		return err
	}
	return nil
}

// UpdateWorkflow is Temporal's: the session's updates other than send.
func (f *backend) UpdateWorkflow(ctx context.Context, opts sdkclient.UpdateWorkflowOptions) (sdkclient.WorkflowUpdateHandle, error) {
	s, err := f.sessionOf(opts.WorkflowID)
	if err != nil {
		return nil, err
	}
	h := &handle{workflowID: s.id, runID: s.execution, updateID: opts.UpdateID}
	switch opts.UpdateName {
	case api.UpdateOutcome:
		var req api.OutcomeRequest
		if h.err = convert(opts.Args, &req); h.err != nil {
			break
		}
		f.mu.Lock()
		o, ok := s.outcomes[req.Run]
		f.mu.Unlock()
		if !ok {
			h.err = wireError(keel.Errorf(keel.CodeNotFound, "run %d of session %s not found", req.Run, s.id))
		}
		h.value = o
	case api.UpdateSteer, api.UpdateRespond, api.UpdateRetractSteering:
		h.err = wireError(keel.Errorf(keel.CodeNotAccepting, "session %s has no active run: the fake's runs end as they start", s.id))
	default:
		return nil, fmt.Errorf("%w: update %s", ErrUnsupported, opts.UpdateName)
	}
	return h, nil
}

// GetWorkflowUpdateHandle is Temporal's. The fake answers every update
// at once, so none is left to resume.
func (f *backend) GetWorkflowUpdateHandle(opts sdkclient.GetWorkflowUpdateHandleOptions) sdkclient.WorkflowUpdateHandle {
	return &handle{workflowID: opts.WorkflowID, runID: opts.RunID, updateID: opts.UpdateID,
		err: serviceerror.NewNotFound("update not found: " + opts.UpdateID)}
}

// handle is an update's answer.
type handle struct {
	workflowID, runID, updateID string
	value                       any
	err                         error
}

func (h *handle) WorkflowID() string { return h.workflowID }
func (h *handle) RunID() string      { return h.runID }
func (h *handle) UpdateID() string   { return h.updateID }
func (h *handle) Get(_ context.Context, out any) error {
	if h.err != nil || out == nil {
		return h.err
	}
	return value{h.value}.Get(out)
}

// QueryWorkflowWithOptions is Temporal's: the session's queries.
func (f *backend) QueryWorkflowWithOptions(ctx context.Context, req *sdkclient.QueryWorkflowWithOptionsRequest) (*sdkclient.QueryWorkflowWithOptionsResponse, error) {
	v, err := f.query(req.WorkflowID, req.QueryType, req.Args)
	if err != nil {
		return nil, err
	}
	return &sdkclient.QueryWorkflowWithOptionsResponse{QueryResult: v}, nil
}

// QueryWorkflow is Temporal's: the session's queries.
func (f *backend) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	return f.query(workflowID, queryType, args)
}

func (f *backend) query(workflowID, name string, args []any) (converter.EncodedValue, error) {
	s, err := f.sessionOf(workflowID)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch name {
	case api.QueryState:
		st := api.SessionStatus{SessionID: s.id, State: keel.StateIdle, Revision: s.revision, LastSeq: int64(len(s.log)),
			Runs: s.runs, Usage: s.usage}
		if s.last != nil {
			o := *s.last
			st.Last, st.State = &o, stateOf(o.Status)
		}
		return value{st}, nil
	case api.QueryEvents:
		var q api.EventsQuery
		if err := convert(args, &q); err != nil {
			return nil, err
		}
		limit := q.Limit
		if limit <= 0 || limit > api.DefaultEventsLimit {
			limit = api.DefaultEventsLimit
		}
		snap := q.Snapshot
		if snap <= 0 || snap > int64(len(s.log)) {
			snap = int64(len(s.log))
		}
		from := min(max(q.After, 0), snap)
		to := min(from+int64(limit), snap)
		page := api.EventsPage{Events: append([]keel.Envelope{}, s.log[from:to]...), Snapshot: snap, More: to < snap,
			Execution: s.execution, Task: s.task}
		return value{page}, nil
	case api.QueryHistory:
		var q api.HistoryQuery
		if err := convert(args, &q); err != nil {
			return nil, err
		}
		limit := q.Limit
		if limit <= 0 {
			limit = api.DefaultHistoryLimit
		}
		from := min(max(q.Offset, 0), len(s.transcript))
		to := min(from+limit, len(s.transcript))
		return value{api.HistoryPage{Messages: append([]keel.Message{}, s.transcript[from:to]...), Offset: from,
			Total: len(s.transcript), Revision: s.revision}}, nil
	}
	return nil, fmt.Errorf("%w: query %s", ErrUnsupported, name)
}

func stateOf(s keel.RunStatus) keel.SessionState {
	switch s {
	case keel.StatusCompleted:
		return keel.StateCompleted
	case keel.StatusFailed:
		return keel.StateFailed
	}
	return keel.StateIdle
}

// SignalWorkflow is Temporal's. A session of the fake has no active run
// to cancel, and no later execution to move to.
func (f *backend) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	_, err := f.sessionOf(workflowID)
	return err
}

// DescribeWorkflowExecution is Temporal's, for a session.
func (f *backend) DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	s, err := f.sessionOf(workflowID)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution:     &commonpb.WorkflowExecution{WorkflowId: s.id, RunId: s.execution},
		Type:          &commonpb.WorkflowType{Name: api.SessionWorkflowName},
		Status:        enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		HistoryLength: int64(len(s.history)),
	}}, nil
}

// GetWorkflowHistory is Temporal's. The fake's sessions never close, and
// Send learns no execution to follow, so no caller reads it: it is empty.
func (f *backend) GetWorkflowHistory(ctx context.Context, workflowID, runID string, isLongPoll bool, filterType enumspb.HistoryEventFilterType) sdkclient.HistoryEventIterator {
	return emptyHistory{}
}

type emptyHistory struct{}

func (emptyHistory) HasNext() bool { return false }
func (emptyHistory) Next() (*historypb.HistoryEvent, error) {
	return nil, errors.New("clienttest: no history")
}

// WorkflowService is Temporal's service: the fake answers the history
// reads by which the client learns what a session committed.
func (f *backend) WorkflowService() workflowservice.WorkflowServiceClient { return service{f: f} }

// Close is Temporal's; the fake has nothing to close.
func (f *backend) Close() {}

// ExecuteWorkflow is Temporal's. Forks and schedules start workflows:
// unsupported.
func (f *backend) ExecuteWorkflow(ctx context.Context, options sdkclient.StartWorkflowOptions, workflow any, args ...any) (sdkclient.WorkflowRun, error) {
	return nil, ErrUnsupported
}

// ListWorkflow is Temporal's. Listing forks and idle sessions: unsupported.
func (f *backend) ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return nil, ErrUnsupported
}

// ScheduleClient is Temporal's: schedules are unsupported.
func (f *backend) ScheduleClient() sdkclient.ScheduleClient { return schedules{} }

type schedules struct{ sdkclient.ScheduleClient }

func (schedules) Create(context.Context, sdkclient.ScheduleOptions) (sdkclient.ScheduleHandle, error) {
	return nil, ErrUnsupported
}

func (schedules) List(context.Context, sdkclient.ScheduleListOptions) (sdkclient.ScheduleListIterator, error) {
	return nil, ErrUnsupported
}

func (schedules) GetHandle(context.Context, string) sdkclient.ScheduleHandle { return schedule{} }

type schedule struct{ sdkclient.ScheduleHandle }

func (schedule) Describe(context.Context) (*sdkclient.ScheduleDescription, error) {
	return nil, ErrUnsupported
}
func (schedule) Update(context.Context, sdkclient.ScheduleUpdateOptions) error { return ErrUnsupported }
func (schedule) Delete(context.Context) error                                  { return ErrUnsupported }
func (schedule) Trigger(context.Context, sdkclient.ScheduleTriggerOptions) error {
	return ErrUnsupported
}
func (schedule) Pause(context.Context, sdkclient.SchedulePauseOptions) error { return ErrUnsupported }
func (schedule) Unpause(context.Context, sdkclient.ScheduleUnpauseOptions) error {
	return ErrUnsupported
}

// service is the part of Temporal's service the client calls directly.
type service struct {
	workflowservice.WorkflowServiceClient // nil
	f                                     *backend
}

// GetWorkflowExecutionHistory pages a session's history; a long poll at
// its end waits for the next workflow task (a send) or ctx. A session
// never closes, so a long poll always returns a token to go on from.
func (sv service) GetWorkflowExecutionHistory(ctx context.Context, req *workflowservice.GetWorkflowExecutionHistoryRequest, _ ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	f := sv.f
	s, err := f.sessionOf(req.GetExecution().GetWorkflowId())
	if err != nil {
		return nil, err
	}
	if run := req.GetExecution().GetRunId(); run != "" && run != s.execution {
		return nil, serviceerror.NewNotFound("workflow execution not found: " + run)
	}
	from := 0
	if t := req.GetNextPageToken(); len(t) > 0 {
		if from, err = strconv.Atoi(string(t)); err != nil {
			return nil, serviceerror.NewInvalidArgument("bad page token")
		}
	}
	for {
		f.mu.Lock()
		evs, changed := s.history[min(from, len(s.history)):], f.changed
		f.mu.Unlock()
		if len(evs) > 0 || !req.GetWaitNewEvent() {
			resp := &workflowservice.GetWorkflowExecutionHistoryResponse{History: &historypb.History{Events: evs}}
			if req.GetWaitNewEvent() {
				resp.NextPageToken = []byte(strconv.Itoa(from + len(evs)))
			}
			return resp, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// value is a query's or an update's answer, read as JSON as a Temporal
// client reads one.
type value struct{ v any }

func (v value) HasValue() bool { return v.v != nil }

func (v value) Get(out any) error {
	b, err := json.Marshal(v.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// convert reads the first of args into out, as a workflow decodes its
// arguments; none leaves out as it is.
func convert(args []any, out any) error {
	if len(args) == 0 || args[0] == nil {
		return nil
	}
	if err := (value{args[0]}).Get(out); err != nil {
		return fmt.Errorf("clienttest: %w", err)
	}
	return nil
}
