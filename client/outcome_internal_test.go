package client

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// history builds the events of an execution, numbered from 1.
type history []*historypb.HistoryEvent

func (h *history) add(ev *historypb.HistoryEvent) int64 {
	ev.EventId = int64(len(*h) + 1)
	*h = append(*h, ev)
	return ev.EventId
}

func (h *history) accepted(update string) int64 {
	return h.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: &updatepb.Request{Input: &updatepb.Input{Name: update}}}}})
}

func (h *history) completed(t *testing.T, accepted int64, result any) {
	out := &updatepb.Outcome{Value: &updatepb.Outcome_Failure{Failure: &failurepb.Failure{Message: "refused"}}}
	if result != nil {
		p, err := converter.GetDefaultDataConverter().ToPayloads(result)
		if err != nil {
			t.Fatal(err)
		}
		out = &updatepb.Outcome{Value: &updatepb.Outcome_Success{Success: p}}
	}
	h.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateCompletedEventAttributes{
			WorkflowExecutionUpdateCompletedEventAttributes: &historypb.WorkflowExecutionUpdateCompletedEventAttributes{
				AcceptedEventId: accepted, Outcome: out}}})
}

func (h *history) upsert(t *testing.T, run int, state keel.SessionState) {
	fields := map[string]*commonpb.Payload{}
	for name, v := range map[string]any{api.AttrRunNumber.GetName(): run, api.AttrState.GetName(): state} {
		if v == 0 {
			continue
		}
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		fields[name] = p
	}
	h.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
		Attributes: &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}})
}

func (h *history) event(typ enumspb.EventType) { h.add(&historypb.HistoryEvent{EventType: typ}) }

// seen is the ID of the first event at which run's commit shows in h with
// the execution still open, 0 if none does.
func (h history) seen(run int) int64 {
	w := commitWatch{run: run, dc: converter.GetDefaultDataConverter()}
	for _, ev := range h {
		if w.openAfterCommit(ev) {
			return ev.GetEventId()
		}
	}
	return 0
}

// A lean execution (no upserts) that stays open after run 2's commit
// shows it by the send of run 3 completing: run 3 started there. Its own
// send, a queued or repeated send, another update's answer and a refused
// send show nothing.
func TestCommitWatchLean(t *testing.T) {
	var h history
	h.event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
	own := h.accepted(api.UpdateSend)
	h.completed(t, own, api.SendResult{Number: 2})
	queued := h.accepted(api.UpdateSend)
	h.completed(t, queued, api.SendResult{Number: 3, Queued: true})
	repeated := h.accepted(api.UpdateSend)
	h.completed(t, repeated, api.SendResult{Number: 4, Repeated: true})
	outcome := h.accepted(api.UpdateOutcome)
	h.completed(t, outcome, api.SendResult{Number: 3})
	refused := h.accepted(api.UpdateSend)
	h.completed(t, refused, nil)
	h.event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	h.event(enumspb.EVENT_TYPE_TIMER_STARTED)
	if id := h.seen(2); id != 0 {
		t.Fatalf("run 2's commit seen at event %d, before any later run started", id)
	}
	next := h.accepted(api.UpdateSend)
	h.completed(t, next, api.SendResult{Number: 3})
	if id := h.seen(2); id != int64(len(h)) {
		t.Fatalf("run 2's commit seen at event %d, want %d (run 3's send)", id, len(h))
	}
	if id := h.seen(3); id != 0 {
		t.Fatalf("run 3's commit seen at event %d", id)
	}
}

// An execution of v0.1.0's shape shows the commit by its upsert of the
// run's end state followed by another workflow task; a run that started
// right after it in the same task shows it by its send.
func TestCommitWatchReleased(t *testing.T) {
	var h history
	h.upsert(t, 1, keel.StateRunning)
	h.event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	h.upsert(t, 0, keel.StateWaitingForHostInput)
	h.event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	if id := h.seen(1); id != 0 {
		t.Fatalf("run 1's commit seen at event %d while it ran", id)
	}
	h.upsert(t, 0, keel.StateCompleted)
	h.event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	if id := h.seen(1); id != int64(len(h)) {
		t.Fatalf("run 1's commit seen at event %d, want %d", id, len(h))
	}
	if id := h.seen(2); id != 0 {
		t.Fatalf("run 2 seen committed at event %d", id)
	}

	h = nil
	h.upsert(t, 1, keel.StateRunning)
	h.upsert(t, 0, keel.StateIdle)
	h.upsert(t, 2, keel.StateRunning)
	h.event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	if id := h.seen(1); id != 0 {
		t.Fatalf("run 1's commit seen at event %d", id)
	}
	send := h.accepted(api.UpdateSend)
	h.completed(t, send, api.SendResult{Number: 2})
	if id := h.seen(1); id != int64(len(h)) {
		t.Fatalf("run 1's commit seen at event %d, want %d (run 2's send)", id, len(h))
	}
}
