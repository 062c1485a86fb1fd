package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// queryFaker fails its first queries with err, then answers.
type queryFaker struct {
	client.Client
	fail  int
	err   error
	asked int
}

func (q *queryFaker) QueryWorkflowWithOptions(context.Context, *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	q.asked++
	if q.asked <= q.fail {
		return nil, q.err
	}
	return &client.QueryWorkflowWithOptionsResponse{}, nil
}

// The Go SDK's worker can fail a query when it rebuilds the workflow from
// a history that moved on while the query was in flight
// (temporalio/sdk-go#755); keel's client asks again, a bounded number of
// times, and takes any other failure as the answer.
func TestQueryAsksAgainAfterAStaleReplay(t *testing.T) {
	stale := serviceerror.NewQueryFailed("process event for keel [panic]: [TMPRL1100] invalid state transition: attempt to handleInitiatedEvent, CommandType: Activity, ID: 22, state=Created")
	ctx := context.Background()

	q := &queryFaker{fail: 2, err: stale}
	c := &Client{tc: q}
	if _, err := c.queryWorkflow(ctx, "s", "events"); err != nil || q.asked != 3 {
		t.Fatalf("after two stale replays: err %v, asked %d times; want an answer on the third", err, q.asked)
	}

	q = &queryFaker{fail: 100, err: stale}
	c = &Client{tc: q}
	if _, err := c.queryWorkflow(ctx, "s", "events"); !errors.Is(err, stale) || q.asked != queryAttempts {
		t.Fatalf("always stale: err %v, asked %d times; want the failure after %d", err, q.asked, queryAttempts)
	}

	handler := serviceerror.NewQueryFailed("session s has no active run")
	q = &queryFaker{fail: 1, err: handler}
	c = &Client{tc: q}
	if _, err := c.queryWorkflow(ctx, "s", "transcript"); !errors.Is(err, handler) || q.asked != 1 {
		t.Fatalf("a handler's failure: err %v, asked %d times; want it at once", err, q.asked)
	}
}

// The SDK ends each call at 10 s whatever the caller's context allows; a
// query that timed out so is asked again until the caller's deadline. A
// context without a deadline takes the SDK's 10 s as the answer (a worker
// that is down must not hang the caller), and a context that ended ends
// the asking.
func TestQueryAsksAgainAfterTheCallTimedOut(t *testing.T) {
	timedOut := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := &queryFaker{fail: 7, err: timedOut}
	c := &Client{tc: q}
	if _, err := c.queryWorkflow(ctx, "s", "fork_point"); err != nil || q.asked != 8 {
		t.Fatalf("after seven timed-out calls: err %v, asked %d times; want an answer on the eighth", err, q.asked)
	}

	q = &queryFaker{fail: 100, err: timedOut}
	c = &Client{tc: q}
	if _, err := c.queryWorkflow(context.Background(), "s", "fork_point"); !errors.Is(err, timedOut) || q.asked != 1 {
		t.Fatalf("no deadline: err %v, asked %d times; want the failure at once", err, q.asked)
	}

	ended, end := context.WithTimeout(context.Background(), time.Minute)
	end()
	q = &queryFaker{fail: 100, err: timedOut}
	c = &Client{tc: q}
	if _, err := c.queryWorkflow(ended, "s", "fork_point"); !errors.Is(err, timedOut) || q.asked != 1 {
		t.Fatalf("an ended context: err %v, asked %d times; want the failure at once", err, q.asked)
	}
}
