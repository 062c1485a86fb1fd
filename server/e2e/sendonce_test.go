package e2e_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// TestSendOnceAcrossExecutions: a send under a key (Session.SendOnce) is
// applied once, also when it is repeated after its run ended and the
// session continued as new, where Temporal no longer remembers the
// update (docs/contract.md §11.7). The repeat answers the first send's
// run, marked repeated, and starts nothing; the session remembers its
// last api.OnceRemembered keys, and a key it forgot is a new send. A key
// longer than api.MaxOnceBytes is refused.
func TestSendOnceAcrossExecutions(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["done"]}]}`})
	c := keeltest.Client(t, srv, nil)
	sess := c.Session("send-once")
	run := func(r *client.Run, err error) *client.Run {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Outcome(ctx); err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := run(sess.SendOnce(ctx, "firing-1", "report"))
	// Another run in between: the session hands over after each run, so
	// the repeat below reaches an execution that never saw the first
	// send's update.
	run(sess.Send(ctx, "another"))
	if st, err := sess.State(ctx); err != nil || st.HandOvers < 1 {
		t.Fatalf("the session did not continue as new between its runs: %d hand-overs (%v)", st.HandOvers, err)
	}
	again, err := sess.SendOnce(ctx, "firing-1", "report")
	if err != nil {
		t.Fatal(err)
	}
	if again.Number != first.Number || !again.Repeated {
		t.Fatalf("the repeat answered run %d (repeated %v), want run %d", again.Number, again.Repeated, first.Number)
	}
	st, err := sess.State(ctx)
	if err != nil || st.Runs != 2 {
		t.Fatalf("after the repeat the session has %d runs (%v), want 2", st.Runs, err)
	}
	if o, err := again.Outcome(ctx); err != nil || o.Status != keel.StatusCompleted {
		t.Fatalf("the repeat's run: %+v, %v", o, err)
	}

	// The session forgets its oldest keys past api.OnceRemembered.
	for i := range api.OnceRemembered {
		run(sess.SendOnce(ctx, fmt.Sprintf("key-%d", i), "x"))
	}
	forgotten := run(sess.SendOnce(ctx, "firing-1", "report"))
	if forgotten.Repeated || forgotten.Number != 3+api.OnceRemembered {
		t.Fatalf("a forgotten key answered run %d (repeated %v), want a new run %d", forgotten.Number, forgotten.Repeated, 3+api.OnceRemembered)
	}
	if r, err := sess.SendOnce(ctx, fmt.Sprintf("key-%d", api.OnceRemembered-1), "x"); err != nil || !r.Repeated {
		t.Fatalf("a remembered key: %v (repeated %v)", err, r != nil && r.Repeated)
	}

	long := strings.Repeat("k", api.MaxOnceBytes+1)
	if _, err := sess.SendOnce(ctx, long, "x"); !errors.Is(err, keel.ErrInvalidInput) {
		t.Fatalf("a key past the limit: %v", err)
	}
	// The session refuses it too, from a caller that sets the request's
	// key itself.
	if _, err := sess.Send(ctx, "x", func(r *api.SendRequest) { r.Once = long }); !errors.Is(err, keel.ErrInvalidInput) {
		t.Fatalf("a key past the limit, sent as is: %v", err)
	}
}

// TestSendOnceRepeatIsBounded: a repeat of a key the session took (docs/
// contract.md §11.7) starts nothing, but its request still enters the
// session's history, so it is bounded as every send is. A caller writing
// straight to Temporal that repeats a known key with a prompt or a run
// config over the limits gets keel.TooLarge, and the session's history
// and log are as they were.
func TestSendOnceRepeatIsBounded(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	srv := keeltest.StartServer(t, devserver.Config{})
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["done"]}]}`})
	c := keeltest.Client(t, srv, nil)
	sess := c.Session("send-once-bounded")
	first, err := sess.SendOnce(ctx, "known", "report")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Outcome(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := sess.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := func() int {
		t.Helper()
		desc, err := c.Temporal().DescribeWorkflowExecution(ctx, sess.ID(), "")
		if err != nil {
			t.Fatal(err)
		}
		return int(desc.GetWorkflowExecutionInfo().GetHistoryLength())
	}
	historyBefore := events()
	for name, req := range map[string]api.SendRequest{
		"a prompt over the limit": {Prompt: strings.Repeat("x", api.MaxPromptBytes+1), Once: "known"},
		"a config over the limit": {Prompt: "report", Once: "known",
			Config: &api.RunConfig{System: strings.Repeat("s", api.MaxConfigBytes+1)}},
	} {
		h, err := c.Temporal().UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: sess.ID(), UpdateID: "forged-" + strings.ReplaceAll(name, " ", "-"), UpdateName: api.UpdateSend,
			Args: []any{req}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != string(keel.CodeTooLarge) {
			t.Errorf("%s repeating a known key: %v, want %s", name, err, keel.CodeTooLarge)
		}
	}
	after, err := sess.State(ctx)
	if err != nil || after.Runs != before.Runs || after.LastSeq != before.LastSeq || events() != historyBefore {
		t.Fatalf("the refused repeats changed the session: runs %d -> %d, seq %d -> %d, history %d -> %d (%v)",
			before.Runs, after.Runs, before.LastSeq, after.LastSeq, historyBefore, events(), err)
	}
}
