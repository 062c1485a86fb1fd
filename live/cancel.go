package live

import (
	"encoding/json"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
)

// CancelNotice says that a workflow execution asked Temporal to cancel one
// or more of its activities. It is a hint, sent while the workflow task
// that asks is still running: a worker that runs one of those activities
// reads the workflow's history at once to find the recorded request,
// instead of learning of it from its next heartbeat (docs/contract.md
// §7.5). A lost or late notice makes cancellation slower, never lost.
type CancelNotice struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// CancelNotices carries cancel notices between the worker that runs a
// workflow and the workers that run its activities. A live channel
// implements it when it reaches every worker: NATS does, Memory does within
// one process.
type CancelNotices interface {
	// NotifyCancel sends n to every worker listening. It never waits for
	// them.
	NotifyCancel(n CancelNotice) error
	// OnCancel calls fn with every notice sent from now on, from any
	// process on the channel, one at a time, until stop is called. fn must
	// not block.
	OnCancel(fn func(CancelNotice)) (stop func(), err error)
}

var (
	_ CancelNotices = (*NATS)(nil)
	_ CancelNotices = (*Memory)(nil)
)

// CancelSubject is the subject NATS carries cancel notices on.
func CancelSubject(prefix string) string { return prefix + ".cancel" }

// NotifyCancel publishes n on <prefix>.cancel. Notices do not go through
// the event queue, so a backlog of deltas never delays one.
func (c *NATS) NotifyCancel(n CancelNotice) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return c.nc.Publish(CancelSubject(c.opts.Prefix), b)
}

// OnCancel subscribes to <prefix>.cancel. Malformed messages are ignored.
func (c *NATS) OnCancel(fn func(CancelNotice)) (func(), error) {
	sub, err := c.nc.Subscribe(CancelSubject(c.opts.Prefix), func(m *nats.Msg) {
		var n CancelNotice
		if json.Unmarshal(m.Data, &n) == nil && n.WorkflowID != "" {
			fn(n)
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// memoryCancels are a Memory channel's cancel listeners.
type memoryCancels struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(CancelNotice)
}

// NotifyCancel calls every listener of this channel before it returns.
func (m *Memory) NotifyCancel(n CancelNotice) error {
	if n.WorkflowID == "" {
		return errors.New("live: cancel notice without a workflow ID")
	}
	m.cancels.mu.Lock()
	defer m.cancels.mu.Unlock()
	for _, fn := range m.cancels.fns {
		fn(n)
	}
	return nil
}

// OnCancel adds fn to the channel's listeners.
func (m *Memory) OnCancel(fn func(CancelNotice)) (func(), error) {
	m.cancels.mu.Lock()
	defer m.cancels.mu.Unlock()
	if m.cancels.fns == nil {
		m.cancels.fns = map[int]func(CancelNotice){}
	}
	id := m.cancels.next
	m.cancels.next++
	m.cancels.fns[id] = fn
	return func() {
		m.cancels.mu.Lock()
		defer m.cancels.mu.Unlock()
		delete(m.cancels.fns, id)
	}, nil
}
