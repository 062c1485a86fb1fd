package store

import (
	"context"
	"fmt"
	"iter"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MarkProgressEvery is how many executions MarkNamespace reads between
// calls of its progress function.
const MarkProgressEvery = 100

// MarkNamespace shows c every payload of every workflow execution's
// history in namespace, open and closed (what Temporal retains), and of
// its listing (memo), through tc, which must read payloads as stored (no
// data converter). It reports runs and events read so far to progress
// every MarkProgressEvery executions. A history that cannot be read fails
// it: sweeping without it could delete what it names.
func (c *Collector) MarkNamespace(ctx context.Context, tc sdkclient.Client, namespace string, progress func(runs, events int)) (runs, events int, err error) {
	mark := func(m proto.Message) error {
		for p := range Payloads(m) {
			if err := c.Mark(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	var token []byte
	for {
		page, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, NextPageToken: token})
		if err != nil {
			return runs, events, fmt.Errorf("list executions: %w", err)
		}
		for _, ex := range page.GetExecutions() {
			if err := mark(ex); err != nil {
				return runs, events, err
			}
			id, run := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
			it := tc.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return runs, events, fmt.Errorf("history of %s (run %s): %w", id, run, err)
				}
				events++
				if err := mark(ev); err != nil {
					return runs, events, fmt.Errorf("history of %s (run %s), event %d: %w", id, run, ev.GetEventId(), err)
				}
			}
			if runs++; runs%MarkProgressEvery == 0 && progress != nil {
				progress(runs, events)
			}
		}
		if token = page.GetNextPageToken(); len(token) == 0 {
			return runs, events, nil
		}
	}
}

// Payloads yields every Payload inside m, at any depth.
func Payloads(m proto.Message) iter.Seq[*commonpb.Payload] {
	return func(yield func(*commonpb.Payload) bool) { payloads(m.ProtoReflect(), yield) }
}

func payloads(m protoreflect.Message, yield func(*commonpb.Payload) bool) bool {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		return yield(p)
	}
	more := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && more; i++ {
				more = payloads(l.Get(i).Message(), yield)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				more = payloads(mv.Message(), yield)
				return more
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			more = payloads(v.Message(), yield)
		}
		return more
	})
	return more
}
