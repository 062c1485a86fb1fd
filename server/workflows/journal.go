package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/activities"
)

// emitFunc records a durable event. It is all most parts of a run know of
// the run's event log.
type emitFunc func(keel.Event)

// journal is a run's durable event log: the events it recorded, numbered
// on from the sequence the session handed it (docs/contract.md §1, §2.3).
type journal struct {
	sessionID, runID string
	clock            workflow.Context
	// base is the sequence before the run's first event; seq is its last.
	base, seq int64
	events    []keel.Envelope
}

func newJournal(ctx workflow.Context, in runInput) *journal {
	return &journal{sessionID: in.SessionID, runID: in.RunID, clock: ctx, base: in.BaseSeq, seq: in.BaseSeq}
}

// emit records ev with the next sequence number.
func (j *journal) emit(ev keel.Event) {
	env, err := keel.Seal(ev, j.sessionID, j.runID, workflow.Now(j.clock))
	if err != nil {
		// Event types are plain structs: failing to encode one is a bug.
		panic(err)
	}
	j.seq++
	env.Seq = j.seq
	j.events = append(j.events, env)
}

// lastSeq is the sequence of the latest event.
func (j *journal) lastSeq() int64 { return j.seq }

// meter counts what a run spent: usage of the responses it kept, and of
// every physical request, kept or abandoned (docs/contract.md §4), with
// its cost; and it warns as the run nears a budget (§20).
type meter struct {
	emit  emitFunc
	kept  keel.Usage
	total keel.Usage
	// session is what the session's earlier runs spent.
	session keel.Usage
	// limits are the budget limits the worker held the last turn to, as
	// recorded with its result; warned holds those already warned of.
	limits []activities.BudgetLimit
	warned map[activities.BudgetLimit]bool
}

// request counts one physical request of step (attempt 0 for requests
// outside the model-turn budget, such as compaction) and reports it.
func (m *meter) request(step, attempt int, u keel.Usage) {
	u.Requests = 1
	m.total = m.total.Add(u)
	m.emit(keel.UsageUpdated{Step: step, Attempt: attempt, Usage: u, Total: m.total})
	m.warn(step)
}

// sessionTotal is what the session has spent, this run included.
func (m *meter) sessionTotal() keel.Usage { return m.session.Add(m.total) }

// budget is the budget check the next model request carries.
func (m *meter) budget(cfg api.RunConfig) *activities.BudgetCheck {
	return &activities.BudgetCheck{Run: cfg.Budget, Session: cfg.SessionBudget,
		RunSpent: m.total, SessionSpent: m.sessionTotal()}
}

// warn records a budget.warning for each limit whose warning fraction the
// spending has reached, once per run and limit.
func (m *meter) warn(step int) {
	for _, l := range m.limits {
		spent := m.total
		if l.Scope == keel.BudgetSession {
			spent = m.sessionTotal()
		}
		n := l.Spent(spent)
		if m.warned[l] || float64(n) < l.WarnAt*float64(l.Limit) {
			continue
		}
		if m.warned == nil {
			m.warned = map[activities.BudgetLimit]bool{}
		}
		m.warned[l] = true
		m.emit(keel.BudgetWarning{Step: step, Scope: l.Scope, Set: l.Set, Currency: l.Currency, Limit: l.Limit, Spent: n})
	}
}

// keep adds a response's usage to what the run kept.
func (m *meter) keep(u keel.Usage) { m.kept = m.kept.Add(u) }
