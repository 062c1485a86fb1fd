package live

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel"
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

// MaxCancelNoticeBytes bounds a cancel notice on the wire. A well-formed
// one is two IDs, under 400 bytes.
const MaxCancelNoticeBytes = 1 << 10

// uuidLen is the length of a Temporal run ID, a UUID in its canonical
// 8-4-4-4-12 hex form.
const uuidLen = 36

// Validate checks that n names a workflow execution keel runs activities
// for: the workflow ID is a session's (a session ID, or keel's runtime
// workflow, which has the same form) or a run's (keel.RunID), and the run
// ID is a Temporal run ID (a UUID). The error is a *RejectError.
func (n CancelNotice) Validate() error {
	wid := n.WorkflowID
	if session, _, ok := strings.Cut(wid, "/run-"); ok {
		if keel.ValidateSessionID(session) != nil || !runOf(session, wid) {
			return reject(ReasonCancelNotice, "cancel notice names workflow %s, not a keel workflow", quoteName(wid))
		}
	} else if keel.ValidateSessionID(wid) != nil {
		return reject(ReasonCancelNotice, "cancel notice names workflow %s, not a keel workflow", quoteName(wid))
	}
	if !isUUID(n.RunID) {
		return reject(ReasonCancelNotice, "cancel notice names run %s, not a Temporal run ID", quoteName(n.RunID))
	}
	return nil
}

func isUUID(s string) bool {
	if len(s) != uuidLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// ParseCancelNotice decodes a cancel notice from the wire and validates
// it: at most MaxCancelNoticeBytes of a JSON object with a workflow and a
// run ID (see CancelNotice.Validate). The error is a *RejectError.
func ParseCancelNotice(data []byte) (CancelNotice, error) {
	if len(data) > MaxCancelNoticeBytes {
		return CancelNotice{}, reject(ReasonTooLarge, "cancel notice of %d bytes is over the %d-byte bound", len(data), MaxCancelNoticeBytes)
	}
	var n CancelNotice
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &n) != nil {
		return CancelNotice{}, reject(ReasonCancelNotice, "cancel notice is not a JSON object of workflow_id and run_id")
	}
	if err := n.Validate(); err != nil {
		return CancelNotice{}, err
	}
	return n, nil
}

// NotifyCancel publishes n on <prefix>.cancel. Notices do not go through
// the event queue, so a backlog of deltas never delays one. A notice that
// is not well formed (CancelNotice.Validate) is an error.
func (c *NATS) NotifyCancel(n CancelNotice) error {
	if err := n.Validate(); err != nil {
		return err
	}
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

// OnCancel subscribes to <prefix>.cancel. Messages that are not
// well-formed notices (ParseCancelNotice) are dropped and counted as
// rejected; fn never sees them.
func (c *NATS) OnCancel(fn func(CancelNotice)) (func(), error) {
	sub, err := c.nc.Subscribe(CancelSubject(c.opts.Prefix), func(m *nats.Msg) {
		n, err := ParseCancelNotice(m.Data)
		if err != nil {
			c.rejected(err)
			return
		}
		fn(n)
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

// NotifyCancel calls every listener of this channel before it returns. A
// notice that is not well formed (CancelNotice.Validate) is an error and
// reaches no listener.
func (m *Memory) NotifyCancel(n CancelNotice) error {
	if err := n.Validate(); err != nil {
		return err
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
