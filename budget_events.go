package keel

// TypeBudgetWarning is the wire name of BudgetWarning.
const TypeBudgetWarning = "budget.warning"

func init() { register[BudgetWarning](TypeBudgetWarning) }

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
