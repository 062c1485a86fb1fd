package keel

// Wire names of the events of docs/contract.md §20.
const (
	TypeBudgetWarning = "budget.warning"
	// TypeModelWaiting is ephemeral: it travels on the live channel only.
	TypeModelWaiting = "model.waiting"
)

func init() {
	register[BudgetWarning](TypeBudgetWarning)
	register[ModelWaiting](TypeModelWaiting)
}

// ModelWaiting says a model request waits for its turn under the worker's
// rate limit (docs/contract.md §20.5) before it is sent: about Wait from
// the event's time. It is ephemeral; a cancel reaches the run while it
// waits.
type ModelWaiting struct {
	Step    int `json:"step"`
	Attempt int `json:"attempt"`
	// Limit names the limit (a provider, or a model spec).
	Limit string   `json:"limit"`
	Wait  Duration `json:"wait"`
}

func (ModelWaiting) EventType() string { return TypeModelWaiting }

// The scopes of a budget.
const (
	BudgetRun     = "run"
	BudgetSession = "session"
)

// BudgetWarning records, once per run and scope, that what the run (or
// the session) has spent passed the warning fraction of a budget
// (docs/contract.md §20). It is recorded after the request whose usage
// passed it. Money is in nanos of Currency; a token budget has Currency
// empty and counts prompt and answer tokens.
type BudgetWarning struct {
	Step int `json:"step"`
	// Scope is BudgetRun or BudgetSession.
	Scope string `json:"scope"`
	// Set says who set the budget: "caller" (the run's configuration) or
	// "worker" (the operator's ceiling in keel.yaml).
	Set      string `json:"set"`
	Currency string `json:"currency,omitempty"`
	Limit    int64  `json:"limit"`
	Spent    int64  `json:"spent"`
}

func (BudgetWarning) EventType() string { return TypeBudgetWarning }
