package transcript

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/keelrun/keel"
)

// Transcript reduces the events of a session (one run or many) to a View.
// The zero value is not ready: use New. It is not safe for concurrent use.
type Transcript struct {
	view View
	runs map[string]*Run
}

// New returns an empty transcript.
func New() *Transcript {
	return &Transcript{view: View{Ignored: map[Reason]int{}, Runs: []*Run{}}, runs: map[string]*Run{}}
}

// View returns the transcript's view. It shares the transcript's runs, so
// it changes as events are applied.
func (t *Transcript) View() View { return t.view }

// Runs returns the runs in the order they appeared.
func (t *Transcript) Runs() []*Run { return t.view.Runs }

// Run returns the run with the given ID, nil if none.
func (t *Transcript) Run(id string) *Run { return t.runs[id] }

// LastSeq is the last durable sequence applied.
func (t *Transcript) LastSeq() int64 { return t.view.LastSeq }

// Kind says what an event is about, whether or not it changed the view.
type Kind string

// The kinds of change.
const (
	KindRun        Kind = "run"        // run.started
	KindStep       Kind = "step"       // step.started
	KindText       Kind = "text"       // text.delta: Change.Text was added to the step's text
	KindReasoning  Kind = "reasoning"  // reasoning.delta: Change.Text was added to its reasoning
	KindDraft      Kind = "draft"      // tool_call.delta: Change.Draft grew
	KindReset      Kind = "reset"      // provider.stream_reset
	KindRetry      Kind = "retry"      // provider.request_retry
	KindResponse   Kind = "response"   // model_call.completed
	KindUsage      Kind = "usage"      // usage.updated
	KindTool       Kind = "tool"       // tool.*: Change.Tool changed
	KindQuestion   Kind = "question"   // host_input.*: Change.Question changed
	KindSteering   Kind = "steering"   // steering.*: Change.Steering changed
	KindCompaction Kind = "compaction" // compaction.*
	KindEnd        Kind = "end"        // the terminal event: Change.Run.Result is set
	KindSession    Kind = "session"    // session.forked, session.rewound: View.Forked or View.Rewinds changed
	KindBudget     Kind = "budget"     // budget.warning: Change.Run.Warnings grew
	KindAgent      Kind = "agent"      // agent.*, and a child's relayed delta: Change.Agent changed
	KindWait       Kind = "wait"       // model.waiting: Change.Step.Waiting is set
	KindHosted     Kind = "hosted"     // hosted_tool.activity: Change.Hosted was added to Change.Step
	KindHook       Kind = "hook"       // boundary_input.applied, hook.decided, hook.failed: facts of the run's hooks
	KindOther      Kind = "other"      // a type this version does not know
)

// kinds maps each event type to its kind; types not in it are KindOther.
var kinds = map[string]Kind{
	keel.TypeRunStarted: KindRun, keel.TypeStepStarted: KindStep,
	keel.TypeTextDelta: KindText, keel.TypeReasoningDelta: KindReasoning, keel.TypeToolCallDelta: KindDraft,
	keel.TypeProviderStreamReset: KindReset, keel.TypeProviderRetry: KindRetry,
	keel.TypeModelCallCompleted: KindResponse, keel.TypeUsageUpdated: KindUsage, keel.TypeHostedToolActivity: KindHosted,
	keel.TypeToolProposed: KindTool, keel.TypeToolStarted: KindTool, keel.TypeToolDetached: KindTool,
	keel.TypeToolFinished: KindTool, keel.TypeToolProgress: KindTool,
	keel.TypeHostInputRequested: KindQuestion, keel.TypeHostInputResolved: KindQuestion,
	keel.TypeSteeringAccepted: KindSteering, keel.TypeSteeringApplied: KindSteering, keel.TypeSteeringRetracted: KindSteering,
	keel.TypeCompactionStarted: KindCompaction, keel.TypeCompactionCompleted: KindCompaction,
	keel.TypeRunCompleted: KindEnd, keel.TypeRunCancelled: KindEnd, keel.TypeRunFailed: KindEnd,
	keel.TypeSessionForked: KindSession, keel.TypeSessionRewound: KindSession,
	keel.TypeBudgetWarning: KindBudget, keel.TypeModelWaiting: KindWait,
	keel.TypeAgentStarted: KindAgent, keel.TypeAgentFinished: KindAgent,
	keel.TypeBoundaryInputApplied: KindHook, keel.TypeHookDecided: KindHook, keel.TypeHookFailed: KindHook,
}

// ephemeral reports whether a type travels only on the live channel
// (docs/contract.md §1.4): it has no sequence.
func ephemeral(typ string) bool {
	switch typ {
	case keel.TypeTextDelta, keel.TypeReasoningDelta, keel.TypeToolCallDelta, keel.TypeToolProgress, keel.TypeModelWaiting:
		return true
	}
	return false
}

// Reason says why an event changed nothing.
type Reason string

// The reasons an event is ignored.
const (
	// ReasonRepeat: a durable event whose sequence is not after the last
	// applied (a repeat, or one out of order).
	ReasonRepeat Reason = "repeat"
	// ReasonNoSeq: a durable event without a sequence.
	ReasonNoSeq Reason = "no_seq"
	// ReasonUndecodable: data that does not decode as its type's.
	ReasonUndecodable Reason = "undecodable"
	// ReasonDuplicate: a fact already applied, such as a second
	// tool.finished of a call or a second step.started of a step.
	ReasonDuplicate Reason = "duplicate"
	// ReasonEnded: an event of a run after its terminal event.
	ReasonEnded Reason = "run_ended"
	// ReasonUnknownRun: a delta of a run no durable event named.
	ReasonUnknownRun Reason = "unknown_run"
	// ReasonOtherStep: a delta of a step that is not the current one.
	ReasonOtherStep Reason = "other_step"
	// ReasonAbandoned: a delta, or a use of a hosted tool, of an attempt
	// that was reset or superseded.
	ReasonAbandoned Reason = "abandoned_attempt"
	// ReasonComplete: a delta after its attempt's model_call.completed.
	ReasonComplete Reason = "response_complete"
	// ReasonInvalid: a step or attempt below 1, a negative index.
	ReasonInvalid Reason = "invalid"
	// ReasonEmpty: a delta that adds nothing.
	ReasonEmpty Reason = "empty"
	// ReasonUnknownCall: progress of a call no event named.
	ReasonUnknownCall Reason = "unknown_call"
	// ReasonCallFinished: progress, a start or a detach of a call that
	// finished.
	ReasonCallFinished Reason = "call_finished"
	// ReasonStreaming: a model.waiting of an attempt that has streamed
	// output already: its wait is over.
	ReasonStreaming Reason = "streaming"
)

// Change is what one event did to the view.
type Change struct {
	Kind Kind
	// Event is the decoded event; nil when it did not decode.
	Event keel.Event
	// Ignored says why the event changed nothing; "" when it was applied.
	// A renderer draws nothing for an ignored event.
	Ignored Reason
	// Run is the event's run; nil for a delta of an unknown run.
	Run *Run
	// Step is the step the event concerns, when the view has it.
	Step *Step
	// Text is the text a text or reasoning delta added, whole.
	Text string
	// Draft is the tool-call draft a tool_call.delta grew.
	Draft *Draft
	Tool  *Tool
	// Agent is the child's card a delegation event or a relayed delta
	// changed (docs/contract.md §21.4).
	Agent    *Agent
	Question *Question
	Steering *Steering
	// Hosted is the use of a hosted tool that a hosted_tool.activity
	// added to Step (or, when ignored as a duplicate, the use it repeats).
	Hosted *Hosted
	// Abandoned is the attempt whose output the event dropped from Step
	// (a reset, or a delta of a later attempt), 0 when none; Discarded
	// says that attempt had output (text, reasoning, drafts or uses of
	// hosted tools).
	Abandoned int
	Discarded bool
}

// Apply reduces one event and says what it changed.
func (t *Transcript) Apply(env keel.Envelope) (ch Change) {
	ch.Kind = kinds[env.Type]
	if ch.Kind == "" {
		ch.Kind = KindOther
	}
	defer func() {
		if ch.Ignored != "" {
			t.view.Ignored[ch.Ignored]++
		}
	}()
	// A type this version does not know is ephemeral when it has no
	// sequence: it names no fact to keep.
	delta := ephemeral(env.Type) || ch.Kind == KindOther && env.Seq <= 0
	if !delta {
		switch {
		case env.Seq <= 0:
			ch.Ignored = ReasonNoSeq
			return ch
		case env.Seq <= t.view.LastSeq:
			ch.Ignored = ReasonRepeat
			return ch
		}
		t.view.LastSeq = env.Seq
	}
	ev, err := env.Event()
	if err != nil {
		ch.Ignored = ReasonUndecodable
		return ch
	}
	ch.Event = ev
	switch e := ev.(type) {
	case keel.SessionForked:
		// The session's own facts name no run.
		t.view.Forked = &e
		return ch
	case keel.SessionRewound:
		t.view.Rewinds = append(t.view.Rewinds, e)
		return ch
	}
	run := t.runs[env.RunID]
	if run == nil {
		if delta {
			ch.Ignored = ReasonUnknownRun
			return ch
		}
		run = t.newRun(env.RunID)
	}
	ch.Run = run
	if run.Status.Ended() {
		ch.Ignored = ReasonEnded
		return ch
	}
	if delta && env.Path != "" {
		// A child's delta relayed to its parent: it goes to the child's
		// card, never to the parent's own step.
		ch.Kind = KindAgent
		ch.Ignored = run.relayed(env.Path, ev, &ch)
		return ch
	}
	ch.Ignored = run.apply(ev, &ch)
	if run.Status == Running || run.Status == WaitingForHostInput {
		run.Status = Running
		if run.Open() > 0 {
			run.Status = WaitingForHostInput
		}
	}
	return ch
}

func (t *Transcript) newRun(id string) *Run {
	r := &Run{ID: id, Status: Running, Steps: []*Step{}, Tools: []*Tool{}, Questions: []*Question{}, Steering: []*Steering{},
		steps: map[int]*Step{}, tools: map[string]*Tool{}, questions: map[string]*Question{}, steering: map[string]*Steering{},
		agents: map[string]*Agent{}}
	t.runs[id] = r
	t.view.Runs = append(t.view.Runs, r)
	return r
}

// apply reduces one decoded event of the run; it returns why the event
// changed nothing, "" when it did.
func (r *Run) apply(ev keel.Event, ch *Change) Reason {
	switch e := ev.(type) {
	case keel.RunStarted:
		if r.started {
			return ReasonDuplicate
		}
		r.started = true
		r.Number, r.Prompt, r.Model = e.Number, cut(e.Prompt, MaxField), cut(e.Model, MaxField)
	case keel.StepStarted:
		if e.Step < 1 {
			return ReasonInvalid
		}
		if r.steps[e.Step] != nil {
			return ReasonDuplicate
		}
		st := &Step{Number: e.Step, EstimatedContextTokens: e.EstimatedContextTokens, Attempt: 1, Drafts: []*Draft{}, Abandoned: []int{},
			Hosted: []*Hosted{}}
		r.steps[e.Step] = st
		r.Steps = append(r.Steps, st)
		ch.Step = st
	case keel.TextDelta:
		st, why := r.live(e.Step, e.Attempt, e.Text == "", ch)
		if why != "" {
			return why
		}
		st.Text = st.appendText(st.Text, e.Text)
		st.Waiting = nil
		ch.Text = e.Text
	case keel.ReasoningDelta:
		st, why := r.live(e.Step, e.Attempt, e.Text == "", ch)
		if why != "" {
			return why
		}
		st.Reasoning = st.appendText(st.Reasoning, e.Text)
		st.Waiting = nil
		ch.Text = e.Text
	case keel.ToolCallDelta:
		if e.Index < 0 {
			return ReasonInvalid
		}
		st, why := r.live(e.Step, e.Attempt, e.ID == "" && e.Name == "" && e.Arguments == "", ch)
		if why != "" {
			return why
		}
		ch.Draft = st.draft(e)
		st.Waiting = nil
	case keel.ModelWaiting:
		if e.Wait < 0 {
			return ReasonInvalid
		}
		st, why := r.live(e.Step, e.Attempt, e.Wait == 0, ch)
		if why != "" {
			return why
		}
		if st.Attempt == e.Attempt && (st.Text != "" || st.Reasoning != "" || len(st.Drafts) > 0) {
			return ReasonStreaming
		}
		st.Waiting = &Waiting{Limit: cut(e.Limit, MaxField), WaitMS: int64(e.Wait.Std() / time.Millisecond)}
	case keel.ProviderStreamReset:
		if e.Step < 1 || e.Attempt < 1 {
			return ReasonInvalid
		}
		st := r.steps[e.Step]
		if st == nil {
			return "" // a fact about a step this view never saw: nothing to drop
		}
		ch.Step = st
		if e.Attempt <= st.abandonedMax && containsInt(st.Abandoned, e.Attempt) {
			return ReasonDuplicate
		}
		st.Abandoned = append(st.Abandoned, e.Attempt)
		st.abandonedMax = max(st.abandonedMax, e.Attempt)
		if e.Attempt >= st.Attempt {
			st.abandon(e.Attempt+1, ch)
		}
	case keel.ModelCallCompleted:
		st := r.steps[e.Step]
		if st == nil || e.Attempt < st.Attempt || e.Attempt <= st.abandonedMax {
			return "" // a completion of an attempt no longer live changes nothing shown
		}
		ch.Step = st
		if e.Attempt > st.Attempt {
			st.abandon(e.Attempt, ch)
		}
		st.Completed, st.Waiting = true, nil
	case keel.HostedToolActivity:
		return r.hosted(e, ch)
	case keel.ProviderRequestRetry, keel.CompactionStarted:
		ch.Step = r.steps[stepOf(ev)]
	case keel.CompactionCompleted:
		r.Compactions++
	case keel.UsageUpdated:
		r.Usage = usageOf(e.Total)
		ch.Step = r.steps[e.Step]
	case keel.BudgetWarning:
		ch.Step = r.steps[e.Step]
		e.Scope, e.Set, e.Currency = cut(e.Scope, MaxField), cut(e.Set, MaxField), cut(e.Currency, MaxField)
		for _, w := range r.Warnings {
			if w.Scope == e.Scope && w.Set == e.Set && w.Currency == e.Currency {
				return ReasonDuplicate // one warning per run and limit
			}
		}
		r.Warnings = append(r.Warnings, e)
	case keel.ToolProposed:
		return r.proposed(e, ch)
	case keel.ToolStarted:
		return r.toolState(e.ToolCallID, e.Name, ToolRunning, ch)
	case keel.ToolDetached:
		return r.toolState(e.ToolCallID, e.Name, ToolDetached, ch)
	case keel.ToolFinished:
		tc := r.tool(e.ToolCallID, e.Name)
		ch.Tool = tc
		if tc.Finished {
			return ReasonDuplicate
		}
		tc.State, tc.Finished, tc.Output, tc.Progress = ToolState(cut(string(e.Status), MaxField)), true, cut(e.Output, MaxField), ""
	case keel.ToolProgress:
		tc := r.tools[e.ToolCallID]
		switch {
		case tc == nil:
			return ReasonUnknownCall
		case tc.Finished:
			return ReasonCallFinished
		}
		ch.Tool = tc
		tc.Progress = cut(e.Message, MaxField)
	case keel.HostInputRequested:
		if r.questions[e.RequestID] != nil {
			ch.Question = r.questions[e.RequestID]
			return ReasonDuplicate
		}
		q := &Question{RequestID: e.RequestID, ToolCallID: e.ToolCallID, Prompt: cut(e.Prompt, MaxField),
			Schema: cutJSON(e.Schema), State: QuestionOpen}
		r.questions[e.RequestID] = q
		r.Questions = append(r.Questions, q)
		ch.Question = q
	case keel.HostInputResolved:
		q := r.questions[e.RequestID]
		if q == nil {
			q = &Question{RequestID: e.RequestID, ToolCallID: e.ToolCallID}
			r.questions[e.RequestID] = q
			r.Questions = append(r.Questions, q)
		} else if q.State != QuestionOpen {
			ch.Question = q
			return ReasonDuplicate
		}
		q.State = QuestionAnswered
		if e.Interrupted {
			q.State = QuestionInterrupted
		}
		ch.Question = q
	case keel.SteeringAccepted:
		if s := r.steering[e.SteeringID]; s != nil {
			ch.Steering = s
			return ReasonDuplicate
		}
		ch.Steering = r.steer(e.SteeringID)
		ch.Steering.Text = cut(e.Text, MaxField)
	case keel.SteeringApplied:
		return r.steerState(e.SteeringID, SteeringApplied, ch)
	case keel.SteeringRetracted:
		return r.steerState(e.SteeringID, SteeringRetracted, ch)
	case keel.AgentStarted:
		return r.agentStarted(e, ch)
	case keel.AgentFinished:
		return r.agentFinished(e, ch)
	case keel.RunCompleted:
		r.stopWaiting()
		r.Status = Completed
		r.Result = &Result{Text: cut(e.Text, MaxField), Steps: e.Steps, Usage: usageOf(e.Usage), Revision: e.Revision}
	case keel.RunCancelled:
		r.stopWaiting()
		r.Status = Cancelled
		r.Result = &Result{Revision: e.Revision}
	case keel.RunFailed:
		r.stopWaiting()
		r.Status = Failed
		r.Result = &Result{Code: keel.Code(cut(string(e.Code), MaxField)), Message: cut(e.Message, MaxField),
			Retryable: e.Retryable, Revision: e.Revision}
	}
	return ""
}

func stepOf(ev keel.Event) int {
	if e, ok := ev.(keel.ProviderRequestRetry); ok {
		return e.Step
	}
	return 0
}

// live finds the step a delta of (step, attempt) belongs to, if it
// belongs to the live attempt, making a later attempt the live one.
func (r *Run) live(step, attempt int, empty bool, ch *Change) (*Step, Reason) {
	if step < 1 || attempt < 1 {
		return nil, ReasonInvalid
	}
	st := r.Current()
	if st == nil || st.Number != step {
		return nil, ReasonOtherStep
	}
	ch.Step = st
	switch {
	case attempt < st.Attempt || attempt <= st.abandonedMax:
		return nil, ReasonAbandoned
	case st.Completed:
		return nil, ReasonComplete
	case empty:
		return nil, ReasonEmpty
	case attempt > st.Attempt:
		st.abandon(attempt, ch)
	}
	return st, ""
}

// abandon drops the live attempt's output, and the uses of hosted tools
// of every attempt before next; next becomes the live attempt.
func (st *Step) abandon(next int, ch *Change) {
	ch.Abandoned = st.Attempt
	ch.Discarded = st.Text != "" || st.Reasoning != "" || len(st.Drafts) > 0
	kept := []*Hosted{}
	for _, h := range st.Hosted {
		if h.Attempt >= next {
			kept = append(kept, h)
		} else {
			ch.Discarded = true
		}
	}
	st.Hosted = kept
	st.Attempt, st.Text, st.Reasoning, st.Drafts, st.Completed, st.Waiting = next, "", "", []*Draft{}, false, nil
}

// hosted adds a use of a hosted tool to its step. It is output of its
// attempt: one of an attempt reset or superseded is not shown, and a
// later reset drops it. A second use with the same ID is a duplicate; a
// use of a step the view never saw shows nothing.
func (r *Run) hosted(e keel.HostedToolActivity, ch *Change) Reason {
	if e.Step < 1 || e.Attempt < 1 {
		return ReasonInvalid
	}
	st := r.steps[e.Step]
	if st == nil {
		return ""
	}
	ch.Step = st
	if e.Attempt < st.Attempt || e.Attempt <= st.abandonedMax {
		return ReasonAbandoned
	}
	id := cut(e.ID, MaxField)
	for _, h := range st.Hosted {
		if id != "" && h.ID == id {
			ch.Hosted = h
			return ReasonDuplicate
		}
	}
	h := &Hosted{Attempt: e.Attempt, Name: cut(e.Name, MaxField), ID: id, Detail: cut(e.Detail, MaxField),
		Query: cut(e.Query, MaxField), URLs: []string{}}
	size := 0
	for _, u := range e.URLs {
		if len(h.URLs) == MaxURLs || size+len(u) > MaxField {
			h.Truncated = true
			break
		}
		size += len(u)
		h.URLs = append(h.URLs, u)
	}
	st.Hosted = append(st.Hosted, h)
	ch.Hosted = h
	return ""
}

// stopWaiting clears the wait of the run's current step: an ended run
// waits for nothing.
func (r *Run) stopWaiting() {
	if st := r.Current(); st != nil {
		st.Waiting = nil
	}
}

func (st *Step) appendText(s, more string) string {
	if len(s)+len(more) > MaxText {
		st.Truncated = true
	}
	return cut(s+more, MaxText)
}

func (st *Step) draft(e keel.ToolCallDelta) *Draft {
	var d *Draft
	for _, x := range st.Drafts {
		if x.Index == e.Index {
			d = x
		}
	}
	if d == nil {
		d = &Draft{Index: e.Index}
		st.Drafts = append(st.Drafts, d)
	}
	if e.ID != "" {
		d.ID = cut(e.ID, MaxField)
	}
	if e.Name != "" {
		d.Name = cut(e.Name, MaxField)
	}
	d.Arguments = st.appendText(d.Arguments, e.Arguments)
	return d
}

func (r *Run) proposed(e keel.ToolProposed, ch *Change) Reason {
	if tc := r.tools[e.ToolCallID]; tc != nil {
		ch.Tool = tc
		return ReasonDuplicate
	}
	tc := r.tool(e.ToolCallID, e.Name)
	if e.Step > 0 {
		tc.Step = e.Step
	}
	tc.Arguments = cutJSON(e.Arguments)
	ch.Tool = tc
	// The complete call replaces what its step's attempt streamed of it.
	if st := r.steps[tc.Step]; st != nil {
		st.Drafts = []*Draft{}
	}
	return ""
}

// tool returns the card of a call, making one for a call first seen now.
func (r *Run) tool(id, name string) *Tool {
	if tc := r.tools[id]; tc != nil {
		return tc
	}
	tc := &Tool{ID: id, Name: cut(name, MaxField), State: ToolProposed}
	if st := r.Current(); st != nil {
		tc.Step = st.Number
	}
	r.tools[id] = tc
	r.Tools = append(r.Tools, tc)
	return tc
}

// toolState moves a card to running or detached: only forwards.
func (r *Run) toolState(id, name string, s ToolState, ch *Change) Reason {
	tc := r.tool(id, name)
	ch.Tool = tc
	switch {
	case tc.Finished:
		return ReasonCallFinished
	case tc.State == s, tc.State == ToolDetached:
		return ReasonDuplicate
	}
	tc.State = s
	return ""
}

func (r *Run) steer(id string) *Steering {
	s := &Steering{ID: id, State: SteeringStaged}
	r.steering[id] = s
	r.Steering = append(r.Steering, s)
	return s
}

func (r *Run) steerState(id string, state SteeringState, ch *Change) Reason {
	s := r.steering[id]
	if s == nil {
		s = r.steer(id)
	}
	ch.Steering = s
	if s.State != SteeringStaged {
		return ReasonDuplicate
	}
	s.State = state
	return ""
}

// cut shortens s to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// cutJSON keeps a JSON value up to MaxField bytes; a larger one, or none,
// is null.
func cutJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || len(raw) > MaxField {
		return json.RawMessage("null")
	}
	return raw
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
