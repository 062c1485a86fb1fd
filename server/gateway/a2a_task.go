package gateway

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// a2aCall is one JSON-RPC request to an A2A endpoint.
type a2aCall struct {
	g     *Gateway
	r     *http.Request
	agent *Agent
	id    json.RawMessage
}

// Metadata keys of keel's on A2A tasks and events.
const (
	a2aMetaSession = "keel/session_id"
	a2aMetaRun     = "keel/run_id"
	a2aMetaSeq     = "keel/seq"
	// a2aMetaAfter, in tasks/resubscribe's metadata, is the sequence to
	// follow the task's events from (the last keel/seq the client saw).
	a2aMetaAfter = "keel/after_seq"
)

// call serves the methods that answer once.
func (t *a2aCall) call(req rpcRequest) (any, error) {
	ctx := t.r.Context()
	switch req.Method {
	case a2aSend:
		var p a2a.MessageSendParams
		if err := decodeParams(req.Params, &p); err != nil {
			return nil, err
		}
		run, cursor, err := t.start(ctx, &p)
		if err != nil {
			return nil, err
		}
		if p.Config != nil && p.Config.Blocking != nil && !*p.Config.Blocking {
			return t.snapshot(ctx, run)
		}
		if err := t.wait(ctx, run, cursor); err != nil {
			return nil, err
		}
		return t.snapshot(ctx, run)
	case a2aGet:
		var p a2a.TaskQueryParams
		if err := decodeParams(req.Params, &p); err != nil {
			return nil, err
		}
		run, err := t.task(p.ID)
		if err != nil {
			return nil, err
		}
		return t.snapshot(ctx, run)
	case a2aCancel:
		var p a2a.TaskIDParams
		if err := decodeParams(req.Params, &p); err != nil {
			return nil, err
		}
		return t.cancel(ctx, p.ID)
	}
	if strings.HasPrefix(req.Method, "tasks/pushNotificationConfig/") {
		return nil, newRPCFault(RPCPushNotSupported, "push_not_supported", "", false, "keel's A2A endpoint sends no push notifications; use message/stream or tasks/resubscribe")
	}
	return nil, newRPCFault(RPCMethodNotFound, "method_not_found", "", false,
		"no such method; this endpoint serves message/send, message/stream, tasks/get, tasks/cancel and tasks/resubscribe")
}

// decodeParams decodes a method's params; a malformed one is -32602.
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || json.Unmarshal(raw, v) != nil {
		return newRPCFault(RPCInvalidParams, CodeBadRequest, string(keel.CodeInvalidInput), false, "the params are missing or malformed")
	}
	return nil
}

// task finds the run a task ID names (SESSION/run-N). A task of a session
// the key's prefix does not cover is not found, as one that does not
// exist.
func (t *a2aCall) task(id a2a.TaskID) (*client.Run, error) {
	notFound := newRPCFault(RPCTaskNotFound, "not_found", string(keel.CodeNotFound), false, "task not found")
	session, num, ok := strings.Cut(string(id), "/run-")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 || strconv.Itoa(n) != num || keel.ValidateSessionID(session) != nil || !allowsSession(t.r, session) {
		return nil, notFound
	}
	return t.g.c.Session(session).Run(n), nil
}

// start begins what a message asks: a new task (a run in a new session,
// or, with a contextId, in that session), or, with a taskId, the answer
// to the task's open question. cursor is the sequence the task's events
// are new after (0: follow the run from its start).
func (t *a2aCall) start(ctx context.Context, p *a2a.MessageSendParams) (*client.Run, int64, error) {
	m := p.Message
	if m == nil || m.Role != a2a.MessageRoleUser {
		return nil, 0, newRPCFault(RPCInvalidParams, CodeBadRequest, string(keel.CodeInvalidInput), false, "the params need a message of role user")
	}
	text, data, err := messageContent(m)
	if err != nil {
		return nil, 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, t.g.opts.RequestTimeout)
	defer cancel()
	if m.TaskID != "" {
		run, err := t.task(m.TaskID)
		if err != nil {
			return nil, 0, err
		}
		if m.ContextID != "" && m.ContextID != run.Session().ID() {
			return nil, 0, newRPCFault(RPCInvalidParams, CodeBadRequest, string(keel.CodeInvalidInput), false, "the message's contextId is not its task's")
		}
		cursor, err := t.answer(cctx, run, text, data)
		return run, cursor, err
	}
	if data != nil {
		return nil, 0, newRPCFault(RPCInvalidParams, CodeBadRequest, string(keel.CodeInvalidInput), false,
			"a new task's message is text; data parts answer a task's question (send them with its taskId)")
	}
	if strings.TrimSpace(text) == "" || len(text) > api.MaxPromptBytes {
		return nil, 0, keel.Errorf(keel.CodeInvalidInput, "the prompt is the message's text parts, 1 to %d bytes", api.MaxPromptBytes)
	}
	session := m.ContextID
	if session == "" {
		if session, err = newSessionID(keyPrefix(requestKey(t.r)), a2aSessionMark); err != nil {
			return nil, 0, err
		}
	} else if keel.ValidateSessionID(session) != nil || !allowsSession(t.r, session) {
		// Another key's session, or no session at all: the same answer.
		return nil, 0, newRPCFault(RPCTaskNotFound, "not_found", string(keel.CodeNotFound), false, "context not found")
	}
	var opts []client.SendOption
	if t.agent != nil {
		opts = append(opts, client.WithConfig(api.RunConfig{Agent: t.agent.Name}))
	}
	run, err := t.g.c.Session(session).Send(cctx, text, opts...)
	return run, 0, err
}

// messageContent reads a message's parts: its text parts joined, and its
// data part (at most one). Files are refused.
func messageContent(m *a2a.Message) (string, map[string]any, error) {
	var texts []string
	var data map[string]any
	for _, part := range m.Parts {
		switch p := part.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case a2a.DataPart:
			if data != nil {
				return "", nil, keel.Errorf(keel.CodeInvalidInput, "a message takes at most one data part")
			}
			data = p.Data
			if data == nil {
				data = map[string]any{}
			}
		default:
			return "", nil, newRPCFault(RPCInvalidParams, "content_type_not_supported", string(keel.CodeInvalidInput), false,
				"keel's A2A endpoint takes text and data parts only")
		}
	}
	return strings.Join(texts, "\n"), data, nil
}

// answer delivers a message to the task's oldest open question
// (docs/contract.md §6): its data part, or its text (as JSON where the
// question's schema wants more than a string).
func (t *a2aCall) answer(ctx context.Context, run *client.Run, text string, data map[string]any) (int64, error) {
	st, err := run.State(ctx)
	if err != nil {
		return 0, err
	}
	if len(st.Requests) == 0 {
		if st.Outcome != nil {
			return 0, newRPCFault(RPCInvalidParams, "task_ended", string(keel.CodeNotAccepting), false,
				"the task has ended; continue its conversation with a message that names only its contextId")
		}
		return 0, keel.Errorf(keel.CodeNotAccepting, "task %s is not waiting for input", run.ID)
	}
	q := st.Requests[0]
	// The stream that follows the answer takes this subscription, so it
	// misses none of the answer's first deltas.
	if err := run.Listen(ctx); err != nil {
		return 0, err
	}
	var answer any = text
	switch {
	case data != nil:
		answer = data
	case len(q.Schema) > 0 && !stringSchema(q.Schema) && json.Valid([]byte(text)):
		answer = json.RawMessage(text)
	}
	if err := run.Respond(ctx, q.RequestID, answer); err != nil {
		// No stream follows a refused answer: the subscription goes now,
		// not at its expiry.
		run.Unlisten()
		return 0, err
	}
	return st.LastSeq, nil
}

// stringSchema reports whether s asks for one string.
func stringSchema(s json.RawMessage) bool {
	var root struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(s, &root) == nil && root.Type == "string"
}

// wait follows the run until it ends or asks for input.
func (t *a2aCall) wait(ctx context.Context, run *client.Run, cursor int64) error {
	if err := t.g.followers.acquire(); err != nil {
		return err
	}
	defer t.g.followers.release()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(t.g.ctx, stop)()
	for env, err := range followFrom(ctx, run, cursor) {
		if err != nil {
			if keelLagged(err) {
				continue
			}
			return err
		}
		if env.RunID != run.ID || !env.Durable() {
			continue
		}
		switch env.Type {
		case keel.TypeRunCompleted, keel.TypeRunFailed, keel.TypeRunCancelled, keel.TypeHostInputRequested:
			return nil
		}
	}
	return ctx.Err()
}

// followFrom is the run's events: from its start (cursor 0), or after
// the session's sequence cursor.
func followFrom(ctx context.Context, run *client.Run, cursor int64) iter.Seq2[keel.Envelope, error] {
	if cursor == 0 {
		return run.Events(ctx)
	}
	return run.EventsFrom(ctx, cursor)
}

// snapshot is the task as keel knows it now.
func (t *a2aCall) snapshot(ctx context.Context, run *client.Run) (*a2a.Task, error) {
	cctx, cancel := context.WithTimeout(ctx, t.g.opts.RequestTimeout)
	defer cancel()
	st, err := run.State(cctx)
	if err != nil {
		return nil, err
	}
	task := &a2a.Task{ID: a2a.TaskID(run.ID), ContextID: run.Session().ID(),
		Metadata: map[string]any{a2aMetaSession: run.Session().ID(), a2aMetaRun: run.ID, a2aMetaSeq: st.LastSeq}}
	now := time.Now().UTC()
	task.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}
	switch {
	case st.Outcome != nil:
		o := *st.Outcome
		switch o.Status {
		case keel.StatusCompleted:
			task.Status.State = a2a.TaskStateCompleted
			task.Artifacts = []*a2a.Artifact{answerArtifact(run.ID, o.Text, o.Answer)}
		case keel.StatusCancelled:
			task.Status.State = a2a.TaskStateCanceled
		default:
			task.Status.State = a2a.TaskStateFailed
			if o.Error != nil {
				task.Status.Message = agentMessage(task, string(o.Error.Code)+": "+o.Error.Message)
			}
		}
	case len(st.Requests) > 0:
		task.Status.State = a2a.TaskStateInputRequired
		q := st.Requests[0]
		task.Status.Message = questionMessage(task, q.RequestID, q.Prompt, q.Schema)
	}
	return task, nil
}

// cancel is tasks/cancel: keel's cooperative cancel of the run, then the
// task as it ended (or as it is, when it has not ended within the
// request timeout). An ended task is not cancelable.
func (t *a2aCall) cancel(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	run, err := t.task(id)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, t.g.opts.RequestTimeout)
	defer cancel()
	st, err := run.State(cctx)
	if err != nil {
		return nil, err
	}
	if st.Outcome != nil {
		return nil, newRPCFault(RPCTaskNotCancelable, "not_cancelable", string(keel.CodeNotAccepting), false, "the task has ended")
	}
	if err := run.Cancel(cctx); err != nil {
		return nil, err
	}
	if _, err := run.Outcome(cctx); err != nil && cctx.Err() != nil {
		return t.snapshot(ctx, run)
	}
	return t.snapshot(ctx, run)
}

// answerArtifact is a completed run's answer: its text and, for a typed
// answer, the answer as data.
func answerArtifact(runID, text string, answer json.RawMessage) *a2a.Artifact {
	parts := a2a.ContentParts{a2a.TextPart{Text: text}}
	var data map[string]any
	if len(answer) > 0 && json.Unmarshal(answer, &data) == nil {
		parts = append(parts, a2a.DataPart{Data: data})
	}
	return &a2a.Artifact{ID: a2a.ArtifactID(runID + "/answer"), Name: "answer", Parts: parts}
}

// agentMessage is a status message of the agent's.
func agentMessage(t a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: text})
}

// questionMessage is an input-required status's message: the question,
// and its request ID and schema as data.
func questionMessage(t a2a.TaskInfoProvider, requestID, prompt string, schema json.RawMessage) *a2a.Message {
	data := map[string]any{"request_id": requestID}
	if len(schema) > 0 {
		var s any
		if json.Unmarshal(schema, &s) == nil {
			data["schema"] = s
		}
	}
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: prompt}, a2a.DataPart{Data: data})
}
