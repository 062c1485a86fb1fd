package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// AG-UI event types the gateway sends (AG-UI protocol 1.0).
const (
	aguiRunStarted         = "RUN_STARTED"
	aguiRunFinished        = "RUN_FINISHED"
	aguiRunError           = "RUN_ERROR"
	aguiStepStarted        = "STEP_STARTED"
	aguiStepFinished       = "STEP_FINISHED"
	aguiTextMessageStart   = "TEXT_MESSAGE_START"
	aguiTextMessageContent = "TEXT_MESSAGE_CONTENT"
	aguiTextMessageEnd     = "TEXT_MESSAGE_END"
	aguiToolCallStart      = "TOOL_CALL_START"
	aguiToolCallArgs       = "TOOL_CALL_ARGS"
	aguiToolCallEnd        = "TOOL_CALL_END"
	aguiToolCallResult     = "TOOL_CALL_RESULT"
	aguiActivitySnapshot   = "ACTIVITY_SNAPSHOT"
	aguiCustom             = "CUSTOM"
)

// aguiEvent is one AG-UI event on the wire. Each type uses a few of the
// fields; the rest stay empty and are left out, since AG-UI clients strip
// (and warn about) fields a type does not define. Content is a string for
// TOOL_CALL_RESULT (a *string, so an empty output is still sent) and an
// object for ACTIVITY_SNAPSHOT.
type aguiEvent struct {
	Type            string          `json:"type"`
	Timestamp       int64           `json:"timestamp,omitempty"`
	ThreadID        string          `json:"threadId,omitempty"`
	RunID           string          `json:"runId,omitempty"`
	StepName        string          `json:"stepName,omitempty"`
	MessageID       string          `json:"messageId,omitempty"`
	Role            string          `json:"role,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolCallName    string          `json:"toolCallName,omitempty"`
	ParentMessageID string          `json:"parentMessageId,omitempty"`
	Content         any             `json:"content,omitempty"`
	ActivityType    string          `json:"activityType,omitempty"`
	Name            string          `json:"name,omitempty"`
	Value           json.RawMessage `json:"value,omitempty"`
	Message         string          `json:"message,omitempty"`
	Code            string          `json:"code,omitempty"`
	Result          any             `json:"result,omitempty"`
	Outcome         *aguiOutcome    `json:"outcome,omitempty"`
	Usage           []aguiUsage     `json:"usage,omitempty"`
	Metadata        map[string]any  `json:"metadata,omitempty"`
}

// aguiOutcome is RUN_FINISHED's outcome: "success", "interrupt" (with
// interrupts) or "cancelled".
type aguiOutcome struct {
	Type       string          `json:"type"`
	Interrupts []aguiInterrupt `json:"interrupts,omitempty"`
}

// aguiInterrupt is a host-input request as an AG-UI interrupt; its ID is
// keel's request ID, which the resume entry answering it names.
type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
}

// aguiUsage is AG-UI's token count of a run.
type aguiUsage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	TotalTokens       int64 `json:"totalTokens"`
	ReasoningTokens   int64 `json:"reasoningTokens,omitempty"`
	CachedInputTokens int64 `json:"cachedInputTokens,omitempty"`
}

// InterruptReasonHostInput is the reason of the interrupts the gateway
// sends for keel's host-input requests (ask_user, approvals, tool.Ask).
const InterruptReasonHostInput = "host_input"

// aguiRun turns one keel run's events into one AG-UI run's events: it
// opens and closes text messages and steps around them, and says when the
// AG-UI run is over (a terminal event, or a host-input request, which
// ends it with an interrupt while the keel run waits). What counts (which
// deltas belong to the live attempt, which events are repeats) is the
// transcript reducer's to say; aguiRun draws what it applied.
type aguiRun struct {
	threadID, runID string // the AG-UI run's
	keelRun         string
	tr              *transcript.Transcript
	step            int    // the open step, 0 when none
	msg             string // the open text message, "" when none
	skip            int64  // a resumed run's cursor: events up to it were sent
	out             []aguiEvent
	// opened counts the messages opened per child path, so each of a
	// child's messages gets an ID of its own (nested, below).
	opened map[string]int
	// activities are the activity messages sent for uses of hosted
	// tools, so a reset can name those of the attempt it abandons.
	activities []sentActivity
}

// sentActivity is an ACTIVITY_SNAPSHOT sent for a hosted tool's use.
type sentActivity struct {
	step, attempt int
	id            string
}

// aguiHosted is the content of a hosted tool's activity message: the use
// as the transcript keeps it (its strings and URLs bounded), with its
// step.
type aguiHosted struct {
	Step int `json:"step"`
	transcript.Hosted
}

func newAGUIRun(threadID, runID, keelRun string) *aguiRun {
	return &aguiRun{threadID: threadID, runID: runID, keelRun: keelRun, tr: transcript.New()}
}

// started opens the AG-UI run, and the keel step already under way when
// it resumes one.
func (a *aguiRun) started(step int) []aguiEvent {
	a.out = a.out[:0]
	a.add(aguiEvent{Type: aguiRunStarted, ThreadID: a.threadID, RunID: a.runID,
		Metadata: map[string]any{"keel": map[string]any{"run_id": a.keelRun}}})
	if step > 0 {
		a.openStep(step, 0)
	}
	return a.out
}

// sent reports whether a resumed run's earlier AG-UI run sent env.
func (a *aguiRun) sent(env keel.Envelope) bool {
	if env.Durable() {
		return env.Seq <= a.skip
	}
	return env.AfterSeq < a.skip
}

// translate maps one keel event; ended reports that the AG-UI run is over
// (its last event is among those returned). Every event of the run goes
// through the reducer, those a resumed run already sent too, so the view
// is whole.
func (a *aguiRun) translate(env keel.Envelope) (evs []aguiEvent, ended bool, err error) {
	a.out = a.out[:0]
	ts := env.At.UnixMilli()
	ch := a.tr.Apply(env)
	switch {
	case a.sent(env):
		// Sent by the AG-UI run this one resumes: a reset here may still
		// drop its activity message.
		if e, ok := ch.Event.(keel.HostedToolActivity); ok && ch.Ignored == "" && ch.Hosted != nil {
			a.activities = append(a.activities, sentActivity{step: e.Step, attempt: e.Attempt, id: a.activityID(e.Step, env.Seq)})
		}
		return nil, false, nil
	case ch.Ignored == transcript.ReasonUndecodable && env.Durable():
		_, err := env.Event()
		return nil, false, err
	case ch.Ignored != "":
		return nil, false, nil // a repeat, or a delta that is not the live attempt's
	}
	defer func() {
		if env.Durable() {
			for i := range evs {
				evs[i].keelMeta("seq", env.Seq)
			}
		}
	}()
	if env.Path != "" {
		a.nested(env, ch, ts)
		return a.out, false, nil
	}
	switch e := ch.Event.(type) {
	case keel.StepStarted:
		a.openStep(e.Step, ts)
	case keel.TextDelta:
		id := a.messageID(e.Step, ch.Step.Attempt)
		if a.msg != id {
			a.closeMessage(ts)
			a.msg = id
			a.add(aguiEvent{Type: aguiTextMessageStart, Timestamp: ts, MessageID: id, Role: "assistant"})
		}
		a.add(aguiEvent{Type: aguiTextMessageContent, Timestamp: ts, MessageID: id, Delta: ch.Text})
	case keel.ProviderStreamReset:
		// The contract has renderers drop the attempt's text: its message
		// is closed and the CUSTOM event names it, so a frontend removes
		// it; the next attempt streams into a new message.
		meta := map[string]any{}
		if ch.Abandoned > 0 {
			if abandoned := a.messageID(e.Step, ch.Abandoned); a.msg == abandoned {
				a.closeMessage(ts)
				meta["abandoned_message_id"] = abandoned
			}
		}
		// The activity messages of the uses of hosted tools it dropped:
		// AG-UI cannot withdraw them either.
		if ids := a.droppedActivities(e.Step, ch); len(ids) > 0 {
			meta["abandoned_activity_ids"] = ids
		}
		a.custom(env, ts, meta)
	case keel.ModelCallCompleted:
		// The response is complete: so is its text.
		if ch.Step != nil && ch.Step == ch.Run.Current() {
			a.closeMessage(ts)
		}
		a.custom(env, ts, nil)
	case keel.HostedToolActivity:
		// A tool the model's backend ran itself: an activity message of
		// its own (AG-UI's ACTIVITY_SNAPSHOT, its activityType the
		// tool's name), then the keel event as CUSTOM.
		if ch.Hosted != nil {
			id := a.activityID(e.Step, env.Seq)
			kind := ch.Hosted.Name
			if kind == "" {
				kind = "hosted_tool"
			}
			a.add(aguiEvent{Type: aguiActivitySnapshot, Timestamp: ts, MessageID: id, ActivityType: kind,
				Content: aguiHosted{Step: e.Step, Hosted: *ch.Hosted}})
			a.activities = append(a.activities, sentActivity{step: e.Step, attempt: e.Attempt, id: id})
		}
		a.custom(env, ts, nil)
	case keel.BoundaryInputApplied:
		// Input a hook brought entered the conversation as internal
		// context (docs/contract.md §23), not a person's message: an
		// activity message of its own (activityType boundary_input, its
		// content the event's data), then the keel event as CUSTOM.
		a.add(aguiEvent{Type: aguiActivitySnapshot, Timestamp: ts, MessageID: a.inputID(env.Seq), ActivityType: aguiBoundaryInput,
			Content: e})
		a.custom(env, ts, nil)
	case keel.HookDecided, keel.HookFailed:
		// AG-UI has no type for a hook's decision or failure: CUSTOM. A
		// denied or rewritten call's TOOL_CALL_RESULT follows, and a stop
		// or a failure that fails the run its RUN_ERROR.
		a.custom(env, ts, nil)
	case keel.ToolCallDelta:
		// The complete call arrives as TOOL_CALL_* with tool.proposed.
	case keel.ToolProposed:
		a.closeMessage(ts)
		args := string(e.Arguments)
		if args == "" {
			args = "{}"
		}
		attempt := 1
		if st := ch.Run.Step(ch.Tool.Step); st != nil {
			attempt = st.Attempt
		}
		a.add(aguiEvent{Type: aguiToolCallStart, Timestamp: ts, ToolCallID: e.ToolCallID, ToolCallName: e.Name,
			ParentMessageID: a.messageID(ch.Tool.Step, attempt)})
		a.add(aguiEvent{Type: aguiToolCallArgs, Timestamp: ts, ToolCallID: e.ToolCallID, Delta: args})
		a.add(aguiEvent{Type: aguiToolCallEnd, Timestamp: ts, ToolCallID: e.ToolCallID})
	case keel.ToolFinished:
		out := e.Output
		a.add(aguiEvent{Type: aguiToolCallResult, Timestamp: ts, MessageID: a.keelRun + "/result/" + e.ToolCallID,
			ToolCallID: e.ToolCallID, Content: &out, Role: "tool",
			Metadata: map[string]any{"keel": map[string]any{"status": e.Status, "name": e.Name}}})
	case keel.HostInputRequested:
		a.closeAll(ts)
		in := aguiInterrupt{ID: e.RequestID, Reason: InterruptReasonHostInput, Message: e.Prompt, ToolCallID: e.ToolCallID}
		if isJSONObject(e.Schema) {
			in.ResponseSchema = e.Schema
		}
		a.add(aguiEvent{Type: aguiRunFinished, Timestamp: ts, ThreadID: a.threadID, RunID: a.runID,
			Outcome: &aguiOutcome{Type: "interrupt", Interrupts: []aguiInterrupt{in}}})
		return a.out, true, nil
	case keel.RunCompleted:
		a.closeAll(ts)
		a.add(aguiEvent{Type: aguiRunFinished, Timestamp: ts, ThreadID: a.threadID, RunID: a.runID,
			Result: e.Text, Outcome: &aguiOutcome{Type: "success"}, Usage: usageOf(e.Usage)})
		return a.out, true, nil
	case keel.RunCancelled:
		a.closeAll(ts)
		a.add(aguiEvent{Type: aguiRunFinished, Timestamp: ts, ThreadID: a.threadID, RunID: a.runID,
			Outcome: &aguiOutcome{Type: "cancelled"}})
		return a.out, true, nil
	case keel.RunFailed:
		a.closeAll(ts)
		msg := e.Message
		if msg == "" {
			msg = "the run failed (" + string(e.Code) + ")"
		}
		a.add(aguiEvent{Type: aguiRunError, Timestamp: ts, Message: msg, Code: snake(e.Code)})
		return a.out, true, nil
	default:
		a.custom(env, ts, nil)
	}
	return a.out, false, nil
}

// nested sends a child's relayed text (docs/contract.md §21.4) as an
// assistant message of its own, nested under the delegating tool call:
// its ID names the run, the child's path and a count, and metadata.keel
// holds the path, the child's session and the tool call it answers. One
// message is open at a time, so children streaming at once alternate in
// short messages, each closed before the next opens.
func (a *aguiRun) nested(env keel.Envelope, ch transcript.Change, ts int64) {
	if ch.Agent == nil || ch.Text == "" {
		return
	}
	prefix := a.keelRun + "/agent/" + ch.Agent.Path + "/"
	if a.msg == "" || len(a.msg) <= len(prefix) || a.msg[:len(prefix)] != prefix || ch.Discarded {
		a.closeMessage(ts)
		if a.opened == nil {
			a.opened = map[string]int{}
		}
		a.opened[ch.Agent.Path]++
		a.msg = fmt.Sprintf("%s%d", prefix, a.opened[ch.Agent.Path])
		top := a.tr.Run(env.RunID)
		callID := ""
		if top != nil {
			for _, c := range top.Agents {
				if c.Path == ch.Agent.Path || len(ch.Agent.Path) > len(c.Path) && ch.Agent.Path[:len(c.Path)+1] == c.Path+"/" {
					callID = c.ToolCallID
				}
			}
		}
		start := aguiEvent{Type: aguiTextMessageStart, Timestamp: ts, MessageID: a.msg, Role: "assistant"}
		start.keelMeta("path", ch.Agent.Path)
		start.keelMeta("tool_call_id", callID)
		if ch.Agent.SessionID != "" {
			start.keelMeta("session_id", ch.Agent.SessionID)
		}
		a.add(start)
	}
	a.add(aguiEvent{Type: aguiTextMessageContent, Timestamp: ts, MessageID: a.msg, Delta: ch.Text})
}

// droppedActivities returns the IDs of the activity messages sent for
// uses of hosted tools of step that the change dropped (those of the
// attempts before the step's live one, once an attempt was abandoned),
// and forgets them.
func (a *aguiRun) droppedActivities(step int, ch transcript.Change) []string {
	if ch.Step == nil || !ch.Discarded {
		return nil
	}
	var ids []string
	kept := a.activities[:0]
	for _, s := range a.activities {
		if s.step == step && s.attempt < ch.Step.Attempt {
			ids = append(ids, s.id)
			continue
		}
		kept = append(kept, s)
	}
	a.activities = kept
	return ids
}

// failed ends the AG-UI run on an error of the stream itself (the keel
// run goes on).
func (a *aguiRun) failed(err error) []aguiEvent {
	a.out = a.out[:0]
	e := fromError(err)
	a.add(aguiEvent{Type: aguiRunError, Message: e.Message, Code: e.Code})
	return a.out
}

// lagged reports deltas lost to a slow reader as a CUSTOM "lag" event.
func (a *aguiRun) lagged(missed int) []aguiEvent {
	a.out = a.out[:0]
	v, _ := json.Marshal(map[string]int{"missed": missed})
	a.add(aguiEvent{Type: aguiCustom, Name: EventLag, Value: v})
	return a.out
}

// activityID names the activity message of a hosted tool's use: its step
// and the durable sequence of its event.
func (a *aguiRun) activityID(step int, seq int64) string {
	return fmt.Sprintf("%s/step-%d/hosted/%d", a.keelRun, step, seq)
}

// aguiBoundaryInput is the activityType of boundary input's activity
// messages.
const aguiBoundaryInput = "boundary_input"

// inputID names the activity message of boundary input: the durable
// sequence of its event.
func (a *aguiRun) inputID(seq int64) string {
	return fmt.Sprintf("%s/input/%d", a.keelRun, seq)
}

// messageID names the assistant message of one attempt of one step.
func (a *aguiRun) messageID(step, attempt int) string {
	return fmt.Sprintf("%s/step-%d/attempt-%d", a.keelRun, step, max(attempt, 1))
}

func stepName(step int) string { return fmt.Sprintf("step %d", step) }

func (a *aguiRun) openStep(step int, ts int64) {
	a.closeAll(ts)
	a.step = step
	a.add(aguiEvent{Type: aguiStepStarted, Timestamp: ts, StepName: stepName(step)})
}

func (a *aguiRun) closeMessage(ts int64) {
	if a.msg != "" {
		a.add(aguiEvent{Type: aguiTextMessageEnd, Timestamp: ts, MessageID: a.msg})
		a.msg = ""
	}
}

// closeAll ends the open message and step: AG-UI runs end with none open.
func (a *aguiRun) closeAll(ts int64) {
	a.closeMessage(ts)
	if a.step > 0 {
		a.add(aguiEvent{Type: aguiStepFinished, Timestamp: ts, StepName: stepName(a.step)})
		a.step = 0
	}
}

// custom passes a keel event on as CUSTOM: its type, as keel's registry
// of event types names it, as the name, and its data as the value. A
// durable event of a type the registry does not hold is named
// EventUnknown; a delta of one is dropped.
func (a *aguiRun) custom(env keel.Envelope, ts int64, keelMeta map[string]any) {
	name, known := sseName(env.Type)
	if !known && !env.Durable() {
		return
	}
	v := env.Data
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	ev := aguiEvent{Type: aguiCustom, Timestamp: ts, Name: name, Value: v}
	for k, x := range keelMeta {
		ev.keelMeta(k, x)
	}
	a.add(ev)
}

func (a *aguiRun) add(ev aguiEvent) { a.out = append(a.out, ev) }

// keelMeta sets metadata.keel[k]: keel's facts that AG-UI has no field
// for, such as the durable sequence of the event an AG-UI event came from.
func (ev *aguiEvent) keelMeta(k string, v any) {
	if ev.Metadata == nil {
		ev.Metadata = map[string]any{}
	}
	m, ok := ev.Metadata["keel"].(map[string]any)
	if !ok {
		m = map[string]any{}
		ev.Metadata["keel"] = m
	}
	m[k] = v
}

func usageOf(u keel.Usage) []aguiUsage {
	return []aguiUsage{{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens,
		ReasoningTokens: u.ReasoningTokens, CachedInputTokens: u.CacheReadTokens}}
}

// isJSONObject reports whether raw is a JSON object (AG-UI's
// responseSchema must be one).
func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(raw) > 0 && json.Unmarshal(raw, &m) == nil && m != nil
}
