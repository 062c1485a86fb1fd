package livetest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
)

// Forgery is a message an attacker publishes on a session's subject, and
// the reason a subscriber must refuse it for.
type Forgery struct {
	Name   string
	Raw    string // the message body
	Reason live.Reason
}

// RawEvent returns the JSON of env with field set to value (a JSON value),
// or removed when value is "".
func RawEvent(t testing.TB, env keel.Envelope, field, value string) string {
	t.Helper()
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(value)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// lineage returns env as a forged lineage fact of type typ.
func lineage(env keel.Envelope, typ, data string) keel.Envelope {
	env.Type = typ
	env.Data = json.RawMessage(data)
	return env
}

// Forgeries are the envelopes no subscriber of s1 may receive.
func Forgeries(t testing.TB) []Forgery {
	good := Delta("s1", 1)
	return []Forgery{
		// The attack on the gateway's event stream: a type with line
		// breaks that, written as an SSE "event:" line, forges an id and
		// a data line.
		{"sse-injection-type", RawEvent(t, good, "type", `"x\nid: 1\ndata: {\"forged\":1}"`), live.ReasonType},
		{"unknown-type", RawEvent(t, good, "type", `"text.deltas"`), live.ReasonType},
		{"durable-type", RawEvent(t, good, "type", `"run.completed"`), live.ReasonType},
		// A forged lineage fact would make a viewer draw another parent
		// or cut the history it shows (docs/contract.md §19): both are
		// durable, so they never travel here, with or without a seq.
		{"forged-fork", RawEvent(t, lineage(good, "session.forked", `{"source":"s0","run":1,"revision":1,"seq":3,"messages":2}`), "seq", ""), live.ReasonType},
		{"forged-rewind", RawEvent(t, lineage(good, "session.rewound", `{"from_run":9,"to_run":1,"messages":2}`), "seq", ""), live.ReasonType},
		{"forged-fork-seq", RawEvent(t, lineage(good, "session.forked", `{"source":"s0","run":1}`), "seq", `1`), live.ReasonType},
		{"no-type", RawEvent(t, good, "type", ""), live.ReasonType},
		{"durable-seq", RawEvent(t, good, "seq", `5`), live.ReasonDurable},
		{"other-session", RawEvent(t, good, "session_id", `"s2"`), live.ReasonSession},
		{"invalid-session", RawEvent(t, good, "session_id", `"s1\ndata: x"`), live.ReasonSession},
		{"no-session", RawEvent(t, good, "session_id", ""), live.ReasonSession},
		{"other-sessions-run", RawEvent(t, good, "run_id", `"s2/run-1"`), live.ReasonRunID},
		{"run-prefix-trick", RawEvent(t, good, "run_id", `"s1x/run-1"`), live.ReasonRunID},
		{"run-zero", RawEvent(t, good, "run_id", `"s1/run-0"`), live.ReasonRunID},
		{"run-leading-zero", RawEvent(t, good, "run_id", `"s1/run-01"`), live.ReasonRunID},
		{"run-not-a-number", RawEvent(t, good, "run_id", `"s1/run-1\ndata: x"`), live.ReasonRunID},
		{"run-huge", RawEvent(t, good, "run_id", `"s1/run-`+strings.Repeat("9", 40)+`"`), live.ReasonRunID},
		{"no-run", RawEvent(t, good, "run_id", ""), live.ReasonRunID},
		{"negative-after-seq", RawEvent(t, good, "after_seq", `-1`), live.ReasonMalformed},
		{"data-wrong-field-type", RawEvent(t, good, "data", `{"text":5}`), live.ReasonData},
		{"data-null", RawEvent(t, good, "data", `null`), live.ReasonData},
		{"data-array", RawEvent(t, good, "data", `[1]`), live.ReasonData},
		{"data-string", RawEvent(t, good, "data", `"hello"`), live.ReasonData},
		{"no-data", RawEvent(t, good, "data", ""), live.ReasonData},
		{"not-json", "data: {\"forged\":1}\n\n", live.ReasonMalformed},
		{"json-not-object", `["text.delta"]`, live.ReasonMalformed},
		{"trailing-garbage", RawEvent(t, good, "type", `"text.delta"`) + "\nid: 1", live.ReasonMalformed},
		{"too-large", RawEvent(t, PaddedDelta("s1", 1, live.DefaultMaxEventBytes), "type", `"text.delta"`), live.ReasonTooLarge},
	}
}

// TestRunID is a Temporal run ID, a UUID.
const TestRunID = "0196f0d2-7b5e-7c3a-9d2e-1f2a3b4c5d6e"

// BadCancelNotices are cancel notices that are not well formed: no
// listener may receive one.
func BadCancelNotices() []live.CancelNotice {
	return []live.CancelNotice{
		{WorkflowID: "", RunID: TestRunID},
		{WorkflowID: "s1\nx", RunID: TestRunID},
		{WorkflowID: "s1/run-x", RunID: TestRunID},
		{WorkflowID: "s1/run-01", RunID: TestRunID},
		{WorkflowID: "a/b", RunID: TestRunID},
		{WorkflowID: strings.Repeat("s", keel.MaxIDLength+1), RunID: TestRunID},
		{WorkflowID: "s1/run-2", RunID: ""},
		{WorkflowID: "s1/run-2", RunID: "r-1"},
		{WorkflowID: "s1/run-2", RunID: strings.Replace(TestRunID, "-", "x", 1)},
		{WorkflowID: "s1/run-2", RunID: strings.Replace(TestRunID, "9", "g", 1)},
	}
}

// GoodCancelNotices are well-formed cancel notices of every kind.
func GoodCancelNotices() []live.CancelNotice {
	return []live.CancelNotice{
		{WorkflowID: "s1/run-2", RunID: TestRunID},
		{WorkflowID: "s1", RunID: strings.ToUpper(TestRunID)},
		{WorkflowID: "keel-runtime", RunID: TestRunID},
	}
}
