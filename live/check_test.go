package live

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/keelrun/keel"
)

// forgery is a message an attacker publishes on a session's subject, and
// the reason a subscriber must refuse it for.
type forgery struct {
	name   string
	raw    string // the message body
	reason Reason
}

// rawEvent returns the JSON of env with field set to value (a JSON value),
// or removed when value is "".
func rawEvent(t testing.TB, env keel.Envelope, field, value string) string {
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

// forgeries are the envelopes no subscriber of s1 may receive.
func forgeries(t testing.TB) []forgery {
	good := delta("s1", 1)
	return []forgery{
		// The attack on the gateway's event stream: a type with line
		// breaks that, written as an SSE "event:" line, forges an id and
		// a data line.
		{"sse-injection-type", rawEvent(t, good, "type", `"x\nid: 1\ndata: {\"forged\":1}"`), ReasonType},
		{"unknown-type", rawEvent(t, good, "type", `"text.deltas"`), ReasonType},
		{"durable-type", rawEvent(t, good, "type", `"run.completed"`), ReasonType},
		// A forged lineage fact would make a viewer draw another parent
		// or cut the history it shows (docs/contract.md §19): both are
		// durable, so they never travel here, with or without a seq.
		{"forged-fork", rawEvent(t, lineage(good, "session.forked", `{"source":"s0","run":1,"revision":1,"seq":3,"messages":2}`), "seq", ""), ReasonType},
		{"forged-rewind", rawEvent(t, lineage(good, "session.rewound", `{"from_run":9,"to_run":1,"messages":2}`), "seq", ""), ReasonType},
		{"forged-fork-seq", rawEvent(t, lineage(good, "session.forked", `{"source":"s0","run":1}`), "seq", `1`), ReasonType},
		{"no-type", rawEvent(t, good, "type", ""), ReasonType},
		{"durable-seq", rawEvent(t, good, "seq", `5`), ReasonDurable},
		{"other-session", rawEvent(t, good, "session_id", `"s2"`), ReasonSession},
		{"invalid-session", rawEvent(t, good, "session_id", `"s1\ndata: x"`), ReasonSession},
		{"no-session", rawEvent(t, good, "session_id", ""), ReasonSession},
		{"other-sessions-run", rawEvent(t, good, "run_id", `"s2/run-1"`), ReasonRunID},
		{"run-prefix-trick", rawEvent(t, good, "run_id", `"s1x/run-1"`), ReasonRunID},
		{"run-zero", rawEvent(t, good, "run_id", `"s1/run-0"`), ReasonRunID},
		{"run-leading-zero", rawEvent(t, good, "run_id", `"s1/run-01"`), ReasonRunID},
		{"run-not-a-number", rawEvent(t, good, "run_id", `"s1/run-1\ndata: x"`), ReasonRunID},
		{"run-huge", rawEvent(t, good, "run_id", `"s1/run-`+strings.Repeat("9", 40)+`"`), ReasonRunID},
		{"no-run", rawEvent(t, good, "run_id", ""), ReasonRunID},
		{"negative-after-seq", rawEvent(t, good, "after_seq", `-1`), ReasonMalformed},
		{"data-wrong-field-type", rawEvent(t, good, "data", `{"text":5}`), ReasonData},
		{"data-null", rawEvent(t, good, "data", `null`), ReasonData},
		{"data-array", rawEvent(t, good, "data", `[1]`), ReasonData},
		{"data-string", rawEvent(t, good, "data", `"hello"`), ReasonData},
		{"no-data", rawEvent(t, good, "data", ""), ReasonData},
		{"not-json", "data: {\"forged\":1}\n\n", ReasonMalformed},
		{"json-not-object", `["text.delta"]`, ReasonMalformed},
		{"trailing-garbage", rawEvent(t, good, "type", `"text.delta"`) + "\nid: 1", ReasonMalformed},
		{"too-large", rawEvent(t, paddedDelta("s1", 1, DefaultMaxEventBytes), "type", `"text.delta"`), ReasonTooLarge},
	}
}

// Check refuses every forgery, each for its reason, and accepts keel's
// own events of every ephemeral type.
func TestCheckRefusesForgedEnvelopes(t *testing.T) {
	for _, f := range forgeries(t) {
		t.Run(f.name, func(t *testing.T) {
			_, err := decodeEnvelope("s1", []byte(f.raw), DefaultMaxEventBytes)
			var re *RejectError
			if !errors.As(err, &re) || re.Reason != f.reason {
				t.Fatalf("decodeEnvelope = %v, want a %s rejection", err, f.reason)
			}
			if !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("%v is not a keel.ErrInvalidInput", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("the error repeats the message's line breaks: %q", err)
			}
		})
	}
	for _, ev := range []keel.Event{
		keel.TextDelta{Step: 1, Text: "hi"},
		keel.ReasoningDelta{Step: 2, Attempt: 1, Text: "hm"},
		keel.ToolCallDelta{Step: 1, Index: 0, ID: "c1", Name: "read_file", Arguments: `{"pa`},
		keel.ToolProgress{ToolCallID: "c1", Message: "50%"},
	} {
		env, err := keel.Seal(ev, "s1", keel.RunID("s1", 12), delta("s1", 1).At)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check("s1", env); err != nil {
			t.Errorf("Check(%s) = %v", env.Type, err)
		}
	}
}

// Line breaks between the data's JSON tokens are valid JSON, but a reader
// that writes the data out as one line (an SSE data line) must never get
// one: the channel delivers the data compact.
func TestChannelDeliversDataWithoutLineBreaks(t *testing.T) {
	forEachChannel(t, func(t *testing.T, r *rig) {
		sub := subscribe(t, r.sub, "s1", 0)
		env := delta("s1", 1)
		env.Data = []byte("{\"step\":1,\r\n\"text\":\"1\"\n\n}")
		if err := r.pub.Publish(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		got, err := sub.Next(guardCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Data) != `{"step":1,"text":"1"}` {
			t.Errorf("data = %q, want it compact", got.Data)
		}
	})
}

// A publisher in the same process cannot hand subscribers a forged
// envelope either: Memory's Publish refuses it, typed, and nothing is
// delivered.
func TestMemoryRefusesForgedEnvelopes(t *testing.T) {
	m := NewMemory()
	defer m.Close()
	sub := subscribe(t, m, "s1", 0)
	for _, f := range forgeries(t) {
		var env keel.Envelope
		if json.Unmarshal([]byte(f.raw), &env) != nil {
			continue // not an envelope at all: nothing to hand Publish
		}
		if env.SessionID != "s1" && keel.ValidateSessionID(env.SessionID) == nil {
			continue // published to s2's subscribers, who see a valid s2 event
		}
		err := m.Publish(t.Context(), env)
		if !errors.Is(err, keel.ErrInvalidInput) {
			t.Errorf("%s: Publish = %v, want ErrInvalidInput", f.name, err)
		}
	}
	publish(t, m, "s1", 1, 1)
	expect(t, sub, events(1, 1))
	expectNothing(t, sub)
}

// The attack over NATS: anyone who may publish on the session's subject
// sends each forgery, most with a plausible counter header. The subscriber
// delivers none of them, reports no lag for them, and keeps the real
// publisher's counters: its next events arrive, with no gap and none
// taken for a repeat.
func TestNATSDropsForgedEnvelopes(t *testing.T) {
	srv := startNATSServer(t)
	var reasons sync.Map
	var rejected atomic.Int64
	ch := dialNATS(t, srv.ClientURL(), NATSOptions{OnReject: func(r Reason) {
		n, _ := reasons.LoadOrStore(r, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		rejected.Add(1)
	}})
	sub := subscribe(t, ch, "s1", 0)
	pub := dialNATS(t, srv.ClientURL(), NATSOptions{})
	publish(t, pub, "s1", 1, 2)
	expect(t, sub, events(1, 2))

	raw := connect(t, srv.ClientURL())
	fs := forgeries(t)
	for i, f := range fs {
		m := nats.NewMsg(Subject(DefaultPrefix, "s1"))
		// Alternately a counter far ahead of the real stream's (which
		// would make its next events look like repeats) and one of a
		// stream of its own (which would start counting it).
		if i%2 == 0 {
			m.Header.Set(headerLive, pub.id+".1 1000000")
		} else {
			m.Header.Set(headerLive, "forger 1")
		}
		m.Data = []byte(f.raw)
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	publish(t, pub, "s1", 3, 4)
	expect(t, sub, events(3, 4))
	expectNothing(t, sub)
	if got := ch.Rejected(); got != int64(len(fs)) {
		t.Errorf("Rejected() = %d, want %d", got, len(fs))
	}
	if got := rejected.Load(); got != int64(len(fs)) {
		t.Errorf("OnReject called %d times, want %d", got, len(fs))
	}
	want := map[Reason]int64{}
	for _, f := range fs {
		want[f.reason]++
	}
	for r, n := range want {
		v, _ := reasons.Load(r)
		if v == nil || v.(*atomic.Int64).Load() != n {
			t.Errorf("reason %s counted %v times, want %d", r, v, n)
		}
	}
}

// A forged counter from a known stream far ahead cannot overflow the lag
// count into a negative number (or a huge positive one).
func TestNATSForgedCounterJumpIsBounded(t *testing.T) {
	srv := startNATSServer(t)
	ch := dialNATS(t, srv.ClientURL(), NATSOptions{})
	sub := subscribe(t, ch, "s1", 0)
	raw := connect(t, srv.ClientURL())
	for i, counter := range []string{"A 1", "A 18446744073709551615"} {
		m := nats.NewMsg(Subject(DefaultPrefix, "s1"))
		m.Header.Set(headerLive, counter)
		b, _ := json.Marshal(delta("s1", i+1))
		m.Data = b
		if err := raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, sub, []step{{Event: 1}, lag(maxGap), {Event: 2}})
}

// Cancel notices that are not well formed never reach a listener, on
// either channel.
func TestCancelNoticesRefuseForgeries(t *testing.T) {
	bad := []CancelNotice{
		{WorkflowID: "", RunID: testRunID},
		{WorkflowID: "s1\nx", RunID: testRunID},
		{WorkflowID: "s1/run-x", RunID: testRunID},
		{WorkflowID: "s1/run-01", RunID: testRunID},
		{WorkflowID: "a/b", RunID: testRunID},
		{WorkflowID: strings.Repeat("s", keel.MaxIDLength+1), RunID: testRunID},
		{WorkflowID: "s1/run-2", RunID: ""},
		{WorkflowID: "s1/run-2", RunID: "r-1"},
		{WorkflowID: "s1/run-2", RunID: strings.Replace(testRunID, "-", "x", 1)},
		{WorkflowID: "s1/run-2", RunID: strings.Replace(testRunID, "9", "g", 1)},
	}
	good := []CancelNotice{
		{WorkflowID: "s1/run-2", RunID: testRunID},
		{WorkflowID: "s1", RunID: strings.ToUpper(testRunID)},
		{WorkflowID: "keel-runtime", RunID: testRunID},
	}
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		got := make(chan CancelNotice, 16)
		stop, _ := m.OnCancel(func(n CancelNotice) { got <- n })
		defer stop()
		for _, n := range bad {
			if err := m.NotifyCancel(n); !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("NotifyCancel(%+v) = %v, want ErrInvalidInput", n, err)
			}
		}
		for _, n := range good {
			if err := m.NotifyCancel(n); err != nil {
				t.Errorf("NotifyCancel(%+v) = %v", n, err)
			}
		}
		for _, want := range good {
			if n := wait(t, got, "a notice"); n != want {
				t.Errorf("listener got %+v, want %+v", n, want)
			}
		}
	})
	t.Run("nats", func(t *testing.T) {
		srv := startNATSServer(t)
		ch := dialNATS(t, srv.ClientURL(), NATSOptions{})
		got := make(chan CancelNotice, 16)
		stop, err := ch.OnCancel(func(n CancelNotice) { got <- n })
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		if err := ch.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, n := range bad {
			if err := ch.NotifyCancel(n); !errors.Is(err, keel.ErrInvalidInput) {
				t.Errorf("NotifyCancel(%+v) = %v, want ErrInvalidInput", n, err)
			}
		}
		raw := connect(t, srv.ClientURL())
		var forged [][]byte
		for _, n := range bad {
			b, _ := json.Marshal(n)
			forged = append(forged, b)
		}
		forged = append(forged,
			[]byte("not json"),
			[]byte(`{"workflow_id":"s1/run-2","run_id":"`+testRunID+`","pad":"`+strings.Repeat("x", MaxCancelNoticeBytes)+`"}`),
			[]byte(`"s1/run-2"`),
		)
		for _, b := range forged {
			if err := raw.Publish(CancelSubject(DefaultPrefix), b); err != nil {
				t.Fatal(err)
			}
		}
		if err := raw.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, n := range good {
			if err := ch.NotifyCancel(n); err != nil {
				t.Errorf("NotifyCancel(%+v) = %v", n, err)
			}
		}
		for _, want := range good {
			if n := wait(t, got, "a notice"); n != want {
				t.Errorf("listener got %+v, want %+v", n, want)
			}
		}
		if got := ch.Rejected(); got != int64(len(forged)) {
			t.Errorf("Rejected() = %d, want %d", got, len(forged))
		}
	})
}

// ParseCancelNotice takes what NotifyCancel sends.
func TestParseCancelNoticeRoundTrip(t *testing.T) {
	want := CancelNotice{WorkflowID: "s-1_a/run-37", RunID: testRunID}
	b, _ := json.Marshal(want)
	got, err := ParseCancelNotice(b)
	if err != nil || got != want {
		t.Fatalf("ParseCancelNotice(%s) = %+v, %v", b, got, err)
	}
	if _, err := ParseCancelNotice(bytes.Repeat([]byte(" "), MaxCancelNoticeBytes+1)); err == nil {
		t.Error("an oversized notice parsed")
	}
}
