package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
)

// lifecycle finds keel's workflows through visibility (and asks sessions
// their state), and signals them.
type lifecycle struct {
	c         client.Client
	namespace string
	probe     *shutdownProbe
}

var _ activities.Lifecycle = lifecycle{}

func newLifecycle(c client.Client, namespace string) lifecycle {
	l := lifecycle{c: c, namespace: namespace}
	l.probe = &shutdownProbe{query: l.queryShutDown}
	return l
}

// ActiveRuns lists the open sessions and asks each its state (the state
// query), stateQueries at a time: a lean session upserts no KeelState
// (api.ShapeLean), so visibility cannot say which sessions are in a run;
// the query can, for sessions of v0.1.0's shape too. A session that closed meanwhile is skipped; one that does not
// answer (its query fails or times out) counts as active, since a cancel
// signal changes nothing in an idle session.
func (l lifecycle) ActiveRuns(ctx context.Context) ([]string, error) {
	ids, err := l.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	active := make([]bool, len(ids))
	sem := make(chan struct{}, stateQueries)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			active[i] = l.inRun(ctx, id)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var runs []string
	for i, id := range ids {
		if active[i] {
			runs = append(runs, id)
		}
	}
	return runs, nil
}

// stateQueries bounds the state queries ActiveRuns has in flight, and
// stateQueryTimeout each one.
const (
	stateQueries      = 16
	stateQueryTimeout = 10 * time.Second
)

// inRun reports whether session id's open execution has an active run,
// or did not say.
func (l lifecycle) inRun(ctx context.Context, id string) bool {
	qctx, cancel := context.WithTimeout(ctx, stateQueryTimeout)
	defer cancel()
	resp, err := l.c.QueryWorkflowWithOptions(qctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, QueryType: api.QueryState, QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false
	case err != nil:
		return true
	case resp.QueryRejected != nil:
		return false // it closed meanwhile
	}
	var st api.SessionStatus
	return resp.QueryResult.Get(&st) != nil || st.ActiveRun != nil
}

func (l lifecycle) Sessions(ctx context.Context) ([]string, error) {
	return l.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", api.SessionWorkflowName))
}

// list returns the IDs of the workflows query lists, each once: a
// workflow that just continued as new may be listed with both executions.
func (l lifecycle) list(ctx context.Context, query string) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	var token []byte
	for {
		resp, err := l.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: l.namespace, Query: query, NextPageToken: token,
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			if id := e.GetExecution().GetWorkflowId(); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ids, nil
		}
	}
}

func (l lifecycle) Signal(ctx context.Context, workflowID, name string) error {
	err := l.c.SignalWorkflow(ctx, workflowID, "", name, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil // it closed in the meantime: nothing to stop
	}
	return err
}

// ShutDown asks the Runtime workflow whether keel is shut down. Every new
// session asks, so concurrent asks share queries (shutdownProbe): the one
// Runtime workflow answers queries one at a time, and a hundred sessions
// starting together would otherwise wait for each other's.
func (l lifecycle) ShutDown(ctx context.Context) (bool, error) {
	if l.probe == nil {
		return l.queryShutDown(ctx)
	}
	return l.probe.ask(ctx)
}

func (l lifecycle) queryShutDown(ctx context.Context) (bool, error) {
	v, err := l.c.QueryWorkflow(ctx, api.RuntimeWorkflowID, "", api.QueryState)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var st api.RuntimeStatus
	return st.ShutDown, v.Get(&st)
}

// shutdownProbe shares queries of the runtime state among concurrent
// askers without ever answering one with news older than its question:
// askers that arrive while a query is in flight wait for the next one,
// which is sent once that query returns, and share it. Shut down is for
// good, so once a query said so every later ask is answered at once.
type shutdownProbe struct {
	query func(context.Context) (bool, error)
	// joined, if set, is told each time an asker joins a round that has
	// not been sent yet (tests).
	joined func()

	mu      sync.Mutex
	down    bool
	next    *probeRound // gathers askers until it is sent
	running bool
}

type probeRound struct {
	done chan struct{}
	down bool
	err  error
}

// probeTimeout bounds one shared query; askers bring their own deadlines.
const probeTimeout = 10 * time.Second

func (p *shutdownProbe) ask(ctx context.Context) (bool, error) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		return true, nil
	}
	if p.next == nil {
		p.next = &probeRound{done: make(chan struct{})}
	}
	r := p.next
	if !p.running {
		p.send()
	} else if p.joined != nil {
		p.joined()
	}
	p.mu.Unlock()
	select {
	case <-r.done:
		return r.down, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// send starts the gathered round's query. p.mu is held.
func (p *shutdownProbe) send() {
	r := p.next
	p.next, p.running = nil, true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		r.down, r.err = p.query(ctx)
		cancel()
		p.mu.Lock()
		p.down = p.down || r.down
		p.running = false
		if p.next != nil {
			p.send()
		}
		p.mu.Unlock()
		close(r.done)
	}()
}
