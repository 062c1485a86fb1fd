package worker

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/activities"
	"github.com/keelrun/keel/api"
)

// runReader reads Run workflows' state through queries.
type runReader struct{ c client.Client }

var _ activities.RunReader = runReader{}

func (r runReader) Transcript(ctx context.Context, ref activities.TranscriptRef) ([]keel.Message, error) {
	v, err := r.c.QueryWorkflow(ctx, ref.WorkflowID, ref.RunID, activities.QueryTranscript, ref.Len)
	if err != nil {
		return nil, err
	}
	var msgs []keel.Message
	return msgs, v.Get(&msgs)
}

func (r runReader) Events(ctx context.Context, workflowID, runID string, after int64) ([]keel.Envelope, error) {
	var all []keel.Envelope
	q := api.EventsQuery{After: after}
	for {
		v, err := r.c.QueryWorkflow(ctx, workflowID, runID, api.QueryEvents, q)
		if err != nil {
			return all, err
		}
		var page api.EventsPage
		if err := v.Get(&page); err != nil {
			return all, err
		}
		all = append(all, page.Events...)
		if !page.More || len(page.Events) == 0 {
			return all, nil
		}
		q = api.EventsQuery{After: page.Events[len(page.Events)-1].Seq, Snapshot: page.Snapshot}
	}
}
