package client

import (
	"context"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// releasedWorker answers the events query as a worker of keel v0.1.0
// does: no execution, no task. The embedded client is nil: any other call
// panics.
type releasedWorker struct {
	sdkclient.Client
	page api.EventsPage
}

func (w releasedWorker) QueryWorkflowWithOptions(context.Context, *sdkclient.QueryWorkflowWithOptionsRequest) (*sdkclient.QueryWorkflowWithOptionsResponse, error) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(w.page)
	if err != nil {
		return nil, err
	}
	return &sdkclient.QueryWorkflowWithOptionsResponse{QueryResult: encoded{p}}, nil
}

type encoded struct{ p *commonpb.Payloads }

func (e encoded) HasValue() bool { return e.p != nil }
func (e encoded) Get(ptr any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.p, ptr)
}

// v0.1.0: an answer without a task, from a worker of that release, is
// delivered up to what the session's commit markers say it committed.
func TestReleasedWorkersAnswersAreBoundByMarkers(t *testing.T) {
	var evs []keel.Envelope
	for seq := int64(1); seq <= 4; seq++ {
		evs = append(evs, keel.Envelope{Seq: seq, SessionID: "s", RunID: "s/run-1", Type: keel.TypeStepStarted})
	}
	c := &Client{tc: releasedWorker{page: api.EventsPage{Events: evs, Snapshot: 4}}, dc: converter.GetDefaultDataConverter()}

	marker := func(v any) *historypb.MarkerRecordedEventAttributes {
		p, err := converter.GetDefaultDataConverter().ToPayloads(v)
		if err != nil {
			t.Fatal(err)
		}
		return &historypb.MarkerRecordedEventAttributes{MarkerName: "SideEffect", Details: map[string]*commonpb.Payloads{"data": p}}
	}
	if seq, ok, err := c.markedSeq(marker(map[string]int64{"keel_seq": 2})); err != nil || !ok || seq != 2 {
		t.Fatalf("a commit marker reads %d, %v, %v; want 2", seq, ok, err)
	}
	if _, ok, err := c.markedSeq(marker("another side effect")); err != nil || ok {
		t.Fatalf("another side effect read as a commit marker (%v, %v)", ok, err)
	}

	sw := &historyWatcher{c: c, workflowID: "s", runID: "r1", marked: 2}
	f := &follower{c: c, session: "s"}
	var got []int64
	read, err := f.readLog(context.Background(), sw, func(ev keel.Envelope) error {
		got = append(got, ev.Seq)
		return nil
	})
	if err != nil || !read || len(got) != 2 || got[1] != 2 {
		t.Fatalf("delivered %v (read %v, %v); want 1 and 2, what the markers cover", got, read, err)
	}
}
