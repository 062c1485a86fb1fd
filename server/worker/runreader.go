package worker

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/activities"
)

// runReader reads a session's active run through queries.
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
