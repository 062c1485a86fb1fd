package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
)

// keelLagged reports whether err is a live channel's lag report: deltas
// lost to a slow reader, after which the events go on.
func keelLagged(err error) bool {
	var lag *live.LaggedError
	return errors.As(err, &lag)
}

// stream serves message/stream and tasks/resubscribe: Server-Sent Events,
// each a JSON-RPC response whose result is an A2A event, until the task
// ends or asks for input (an event with final set). It is an event
// stream of the gateway's, under its limits.
func (t *a2aCall) stream(w http.ResponseWriter, req rpcRequest) {
	ctx, done, err := t.g.OpenStream(t.r)
	if err != nil {
		e := fromError(err)
		writeRPC(w, e.status, rpcResponse{ID: req.ID, Error: toRPCFault(err)})
		return
	}
	defer done()
	if err := t.g.followers.acquire(); err != nil {
		e := fromError(err)
		writeRPC(w, e.status, rpcResponse{ID: req.ID, Error: toRPCFault(err)})
		return
	}
	defer t.g.followers.release()
	var (
		run    *client.Run
		cursor int64
		first  a2a.Event
	)
	switch req.Method {
	case a2aStream:
		var p a2a.MessageSendParams
		if err = decodeParams(req.Params, &p); err == nil {
			run, cursor, err = t.start(ctx, &p)
		}
		if err == nil {
			now := time.Now().UTC()
			first = &a2a.Task{ID: a2a.TaskID(run.ID), ContextID: run.Session().ID(),
				Status:   a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &now},
				Metadata: map[string]any{a2aMetaSession: run.Session().ID(), a2aMetaRun: run.ID}}
		}
	case a2aResubscribe:
		var p a2a.TaskIDParams
		if err = decodeParams(req.Params, &p); err == nil {
			run, err = t.task(p.ID)
		}
		var task *a2a.Task
		if err == nil {
			task, err = t.snapshot(ctx, run)
		}
		if err == nil {
			first, cursor = task, task.Metadata[a2aMetaSeq].(int64)
			if after, ok := afterSeq(p.Metadata); ok {
				cursor = after
			}
			if task.Status.State != a2a.TaskStateWorking && task.Status.State != a2a.TaskStateSubmitted {
				// Ended or waiting: the snapshot is all there is.
				t.send(NewSSEWriter(w, t.g.opts.WriteTimeout), req.ID, task)
				return
			}
		}
	}
	if err != nil {
		writeRPC(w, http.StatusOK, rpcResponse{ID: req.ID, Error: toRPCFault(err)})
		return
	}
	t.follow(ctx, w, req.ID, run, cursor, first)
}

// afterSeq reads keel/after_seq from a resubscription's metadata.
func afterSeq(meta map[string]any) (int64, bool) {
	v, ok := meta[a2aMetaAfter].(float64)
	if !ok || v < 0 || v != float64(int64(v)) {
		return 0, false
	}
	return int64(v), true
}

// follow writes first, then the run's events after cursor as A2A events.
func (t *a2aCall) follow(ctx context.Context, w http.ResponseWriter, id json.RawMessage, run *client.Run, cursor int64, first a2a.Event) {
	sw := NewSSEWriter(w, t.g.opts.WriteTimeout)
	if !t.send(sw, id, first) {
		return
	}
	tr := &a2aTranslator{task: a2a.TaskInfo{TaskID: a2a.TaskID(run.ID), ContextID: run.Session().ID()}}
	events := func(ctx context.Context) iter.Seq2[keel.Envelope, error] { return followFrom(ctx, run, cursor) }
	t.g.followRun(ctx, sw, run.ID, events, func(env keel.Envelope) bool {
		out, final := tr.translate(env)
		for _, ev := range out {
			if !t.send(sw, id, ev) {
				return false
			}
		}
		return !final
	}, func(err error) { t.sendFault(sw, id, err) })
}

// send writes one event as a JSON-RPC response; false when the client is
// gone.
func (t *a2aCall) send(sw *SSEWriter, id json.RawMessage, ev a2a.Event) bool {
	data, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: id, Result: ev})
	if err != nil {
		return false
	}
	return sw.Event("", "", data) == nil
}

// sendFault writes an error as the stream's last response.
func (t *a2aCall) sendFault(sw *SSEWriter, id json.RawMessage, err error) {
	data, mErr := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: id, Error: toRPCFault(err)})
	if mErr == nil {
		_ = sw.Event("", "", data)
	}
}

// a2aTranslator turns one run's keel events into A2A events
// (docs/interop.md, "A2A"): text deltas as chunks of the answer
// artifact, tool activity and steps as working status messages, host
// input as input-required, the terminal event as the final artifact and
// status.
type a2aTranslator struct {
	task a2a.TaskInfo
	// chunks is how many text chunks of the current attempt were sent: a
	// first chunk replaces the artifact, the next ones append to it.
	chunks int
}

func (a *a2aTranslator) TaskInfo() a2a.TaskInfo { return a.task }

func (a *a2aTranslator) translate(env keel.Envelope) ([]a2a.Event, bool) {
	ev, err := env.Event()
	if err != nil {
		return nil, false
	}
	meta := map[string]any{}
	if env.Durable() {
		meta[a2aMetaSeq] = env.Seq
	}
	status := func(state a2a.TaskState, msg *a2a.Message, final bool) *a2a.TaskStatusUpdateEvent {
		u := a2a.NewStatusUpdateEvent(a, state, msg)
		u.Final, u.Metadata = final, meta
		return u
	}
	if env.Path != "" {
		if q, ok := ev.(keel.HostInputRequested); ok {
			return []a2a.Event{status(a2a.TaskStateInputRequired, questionMessage(a, q.RequestID, q.Prompt, q.Schema), true)}, true
		}
		if text := progressText(ev); text != "" {
			if _, delta := ev.(keel.TextDelta); !delta {
				return []a2a.Event{status(a2a.TaskStateWorking, agentMessage(a, env.Path+": "+text), false)}, false
			}
		}
		return nil, false
	}
	switch e := ev.(type) {
	case keel.TextDelta:
		if e.Text == "" {
			return nil, false
		}
		u := a2a.NewArtifactUpdateEvent(a, a2a.ArtifactID(a.task.TaskID+"/answer"), a2a.TextPart{Text: e.Text})
		u.Artifact.Name = "answer"
		u.Append, u.Metadata = a.chunks > 0, meta
		a.chunks++
		return []a2a.Event{u}, false
	case keel.ProviderStreamReset:
		// The abandoned attempt's text is dropped: the next chunk
		// replaces the artifact.
		a.chunks = 0
		return nil, false
	case keel.HostInputRequested:
		return []a2a.Event{status(a2a.TaskStateInputRequired, questionMessage(a, e.RequestID, e.Prompt, e.Schema), true)}, true
	case keel.RunCompleted:
		art := answerArtifact(string(a.task.TaskID), e.Text, e.Answer)
		u := &a2a.TaskArtifactUpdateEvent{TaskID: a.task.TaskID, ContextID: a.task.ContextID, Artifact: art, LastChunk: true, Metadata: meta}
		return []a2a.Event{u, status(a2a.TaskStateCompleted, nil, true)}, true
	case keel.RunFailed:
		return []a2a.Event{status(a2a.TaskStateFailed, agentMessage(a, string(e.Code)+": "+e.Message), true)}, true
	case keel.RunCancelled:
		return []a2a.Event{status(a2a.TaskStateCanceled, nil, true)}, true
	}
	if text := progressText(ev); text != "" {
		if _, delta := ev.(keel.TextDelta); !delta {
			return []a2a.Event{status(a2a.TaskStateWorking, agentMessage(a, text), false)}, false
		}
	}
	return nil, false
}
