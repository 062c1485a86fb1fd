package workflows

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
)

// An answer to a request whose requester stopped waiting is refused with
// keel.RequesterGone, ahead of the run's own state.
func TestRespondToGoneRequester(t *testing.T) {
	r := &run{in: RunInput{RunID: "s/run-1"}}
	r.control.init()
	r.requests["c1/q"] = &hostRequest{HostRequest: HostRequest{RequestID: "c1/q", ToolCallID: "c1"}, gone: true}
	err := r.validateRespond(RespondRequest{RequestID: "c1/q", Answer: []byte(`true`)})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != string(keel.CodeRequesterGone) {
		t.Fatalf("got %v, want a %s error", err, keel.CodeRequesterGone)
	}
}
