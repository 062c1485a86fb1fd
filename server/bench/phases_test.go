package bench_test

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/keelrun/keel/server/bench"
)

// StepPhases splits each step between two activities of the named type by
// the history's timestamps, and leaves out the last activity (no step
// follows it) and activities of other types.
func TestStepPhases(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var evs []*historypb.HistoryEvent
	add := func(ms int, typ enumspb.EventType, attrs func(*historypb.HistoryEvent)) int64 {
		e := &historypb.HistoryEvent{EventId: int64(len(evs) + 1), EventType: typ,
			EventTime: timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))}
		if attrs != nil {
			attrs(e)
		}
		evs = append(evs, e)
		return e.EventId
	}
	step := func(at int, name string) {
		id := add(at, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
				ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
					ActivityType: &commonpb.ActivityType{Name: name}}}
		})
		add(at+1, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
				ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: id}}
		})
		add(at+4, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
				ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: id}}
		})
		add(at+4, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil)
		add(at+6, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil)
		add(at+9, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil)
	}
	step(0, "ModelTurn")
	step(10, "ModelTurn") // 1 ms of rest after the first step's task
	step(20, "Other")
	step(30, "ModelTurn") // the second step spans the Other activity
	p := bench.StepPhases(&historypb.History{Events: evs}, "ModelTurn")

	ms := func(n ...int) bench.Latencies {
		var l bench.Latencies
		for _, v := range n {
			l = append(l, time.Duration(v)*time.Millisecond)
		}
		return l
	}
	want := bench.Phases{Dispatch: ms(1, 1), Activity: ms(3, 3), Wake: ms(2, 2), Decide: ms(3, 3),
		Rest: ms(1, 11), Step: ms(10, 20)}
	if got := p; !equalPhases(got, want) {
		t.Fatalf("phases = %+v\nwant %+v", got, want)
	}
}

func equalPhases(a, b bench.Phases) bool {
	eq := func(x, y bench.Latencies) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return eq(a.Dispatch, b.Dispatch) && eq(a.Activity, b.Activity) && eq(a.Wake, b.Wake) &&
		eq(a.Decide, b.Decide) && eq(a.Rest, b.Rest) && eq(a.Step, b.Step)
}
