package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// resumeUpdate sends an update with send and waits for its result. The
// SDK gives up waiting after a minute (a server busy with hundreds of
// sessions can take longer); then the wait resumes on the same update ID,
// and if the server never admitted the update it is sent again, under the
// same ID, so it is applied once whatever happens.
func (c *Client) resumeUpdate(ctx context.Context, workflowID, updateID string, out any,
	send func() (client.WorkflowUpdateHandle, error)) error {
	h, err := send()
	// An update is looked up in the execution that took it: a session
	// that continued as new since must not be sent it twice.
	runID := ""
	for {
		if err == nil {
			if id := h.RunID(); id != "" {
				runID = id
			}
			err = h.Get(ctx, out)
		}
		var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
		if !errors.As(err, &timeout) || ctx.Err() != nil {
			return err
		}
		h = c.tc.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{WorkflowID: workflowID, RunID: runID, UpdateID: updateID})
		err = h.Get(ctx, out)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			h, err = send()
		}
	}
}

// newID returns a random identifier.
func newID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(errors.New("keel: no randomness"))
	}
	return hex.EncodeToString(b[:])
}
