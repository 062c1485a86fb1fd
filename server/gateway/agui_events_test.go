package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/transcript"
)

// The AG-UI translation of every stream of transcript/testdata keeps
// AG-UI's shape (messages opened before their content and closed once,
// nothing open at the end, sequences never going back) and streams, into
// each step's message of its live attempt, exactly the text the reducer
// kept for that step: an abandoned attempt's text stays in its own,
// closed message.
func TestAGUITranslatesRecordedStreams(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "transcript", "testdata", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded streams: %v", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			envs := readEnvelopes(t, path)
			// The stream's first run: a fork's log starts with
			// session.forked, which names none.
			runID := ""
			for _, env := range envs {
				if runID = env.RunID; runID != "" {
					break
				}
			}
			a := newAGUIRun("thread", "agui-run", runID)
			out := a.started(0)
			var ended bool
			var failure error
			for _, env := range envs {
				evs, end, err := a.translate(env)
				if err != nil {
					failure = err
					break
				}
				out = append(out, evs...)
				if ended = end; ended {
					break
				}
			}
			if name == "hostile" || name == "money" || name == "hosted" || name == "hooks" {
				// Their durable events that do not decode (in money a
				// cost that is no list, in hosted URLs that are no list,
				// in hooks a decision whose action is a number)
				// end the AG-UI run with an error (the stream writes
				// RUN_ERROR).
				if failure == nil {
					t.Fatal("the undecodable durable event did not fail the translation")
				}
			} else if failure != nil || !ended {
				t.Fatalf("translation failed (%v) or did not end (%v)", failure, ended)
			}
			text := map[string]string{}
			open := ""
			var seq int64
			for i, ev := range out {
				switch ev.Type {
				case aguiTextMessageStart:
					if open != "" || text[ev.MessageID] != "" {
						t.Fatalf("event %d: %s opened while %q is open, or again", i, ev.MessageID, open)
					}
					open = ev.MessageID
				case aguiTextMessageContent:
					if ev.MessageID != open {
						t.Fatalf("event %d: content of %s while %q is open", i, ev.MessageID, open)
					}
					text[open] += ev.Delta
				case aguiTextMessageEnd:
					if ev.MessageID != open {
						t.Fatalf("event %d: end of %s while %q is open", i, ev.MessageID, open)
					}
					open = ""
				}
				if k, _ := ev.Metadata["keel"].(map[string]any); k != nil {
					if n, ok := k["seq"].(int64); ok {
						if n < seq {
							t.Fatalf("event %d: seq %d after %d", i, n, seq)
						}
						seq = n
					}
				}
			}
			if ended && open != "" {
				t.Fatalf("message %s open at the end", open)
			}
			run := a.tr.Run(runID)
			if name == "delegation" {
				// The children's text comes as messages of their own,
				// named by path, never into the parent's step messages
				// (docs/contract.md §21.4).
				byPath := map[string]string{}
				for _, ev := range out {
					if ev.Type == aguiTextMessageStart {
						k, _ := ev.Metadata["keel"].(map[string]any)
						if k == nil || k["path"] == nil {
							continue
						}
						byPath[k["path"].(string)] += text[ev.MessageID]
						if k["path"] == "researcher-2" && k["tool_call_id"] != "c2" {
							t.Errorf("researcher-2's message names call %v", k["tool_call_id"])
						}
					}
				}
				want := map[string]string{"researcher-1": "Looking at AA is réd" + "Done.", "researcher-2": "B is blue",
					"researcher-1/coder-1": "deeper"}
				for p, w := range want {
					if byPath[p] != w {
						t.Errorf("%s streamed %q, want %q", p, byPath[p], w)
					}
				}
			}
			for _, st := range run.Steps {
				if got := text[a.messageID(st.Number, st.Attempt)]; got != st.Text {
					t.Errorf("step %d attempt %d streamed %q, the reducer kept %q", st.Number, st.Attempt, got, st.Text)
				}
			}
		})
	}
}

func readEnvelopes(t *testing.T, path string) []keel.Envelope {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []keel.Envelope
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var env keel.Envelope
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, env)
	}
	return out
}

// A step waiting for its turn under a rate limit (docs/contract.md §20.5)
// reaches AG-UI as CUSTOM model.waiting, its value the event's data: each
// notice the reducer applied, and none it ignored (a stale, abandoned or
// undecodable one).
func TestAGUIPassesWaiting(t *testing.T) {
	envs := readEnvelopes(t, filepath.Join("..", "..", "transcript", "testdata", "rate_limit.jsonl"))
	const run = "rl/run-1"
	a := newAGUIRun("thread", "agui-run", run)
	var sent []aguiEvent
	applied := 0
	for _, env := range envs {
		if env.RunID != run {
			continue
		}
		evs, ended, err := a.translate(env)
		if err != nil {
			t.Fatal(err)
		}
		if env.Type == keel.TypeModelWaiting && len(evs) > 0 {
			applied++
		}
		for _, ev := range evs {
			if ev.Type == aguiCustom && ev.Name == keel.TypeModelWaiting {
				sent = append(sent, ev)
			}
		}
		if ended {
			break
		}
	}
	// Of run 1's sixteen notices, seven are applied: the others are of
	// another step, an abandoned or streaming attempt, zero, negative,
	// undecodable, or after the end.
	if applied != 7 || len(sent) != 7 {
		t.Fatalf("%d notices applied, %d sent as CUSTOM model.waiting; want 7 and 7", applied, len(sent))
	}
	var w keel.ModelWaiting
	if err := json.Unmarshal(sent[0].Value, &w); err != nil || w.Limit != "anthropic:claude-sonnet-4-5" || w.Wait.Std().Milliseconds() != 4200 {
		t.Fatalf("first CUSTOM model.waiting %s: %v", sent[0].Value, err)
	}
}

// A use of a hosted tool (hosted_tool.activity) reaches AG-UI as an
// activity message of its own: ACTIVITY_SNAPSHOT, its activityType the
// tool's name, its content the use as the transcript keeps it, then the
// keel event as CUSTOM. A use the reducer ignores (a repeated ID, an
// abandoned attempt's, an invalid step) sends nothing; one of a step it
// never saw only the CUSTOM. A reset that drops a use names its activity
// message, as it names the abandoned text message.
func TestAGUIMapsHostedTools(t *testing.T) {
	envs := readEnvelopes(t, filepath.Join("..", "..", "transcript", "testdata", "hosted.jsonl"))
	const run = "hs/run-1"
	a := newAGUIRun("thread", "agui-run", run)
	var activities, customs []aguiEvent
	var reset aguiEvent
	failures := 0
	for _, env := range envs {
		evs, ended, err := a.translate(env)
		if err != nil {
			failures++ // the use whose URLs are no list
			continue
		}
		for _, ev := range evs {
			switch {
			case ev.Type == aguiActivitySnapshot:
				activities = append(activities, ev)
			case ev.Type == aguiCustom && ev.Name == keel.TypeHostedToolActivity:
				customs = append(customs, ev)
			case ev.Type == aguiCustom && ev.Name == keel.TypeProviderStreamReset:
				reset = ev
			}
		}
		if ended {
			break
		}
	}
	if failures != 1 {
		t.Fatalf("%d translations failed, want the one undecodable use", failures)
	}
	var ids []string
	for _, ev := range activities {
		ids = append(ids, ev.MessageID)
	}
	wantIDs := []string{run + "/step-1/hosted/5", run + "/step-1/hosted/6", run + "/step-1/hosted/7", run + "/step-1/hosted/12",
		run + "/step-2/hosted/16", run + "/step-2/hosted/22", run + "/step-2/hosted/23", run + "/step-2/hosted/24"}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("activity messages %q, want %q", ids, wantIDs)
	}
	if len(customs) != len(wantIDs)+1 {
		t.Fatalf("%d CUSTOM hosted_tool.activity, want %d (the use of a step never started among them)", len(customs), len(wantIDs)+1)
	}
	first, err := json.Marshal(activities[0])
	if err != nil {
		t.Fatal(err)
	}
	at := envs[slices.IndexFunc(envs, func(e keel.Envelope) bool { return e.Seq == 5 })].At
	want := `{"type":"ACTIVITY_SNAPSHOT","timestamp":` + strconv.FormatInt(at.UnixMilli(), 10) + `,"messageId":"hs/run-1/step-1/hosted/5",` +
		`"content":{"step":1,"attempt":1,"name":"web_search","id":"srvtoolu_1","detail":"","query":"keel durable agents",` +
		`"urls":["https://example.com/keel","https://example.org/temporal","https://example.net/agents"]},` +
		`"activityType":"web_search","metadata":{"keel":{"seq":5}}}`
	if string(first) != want {
		t.Fatalf("first activity\n%s\nwant\n%s", first, want)
	}
	if k := activities[2]; k.ActivityType != "code_execution" {
		t.Errorf("third activity's type %q", k.ActivityType)
	}
	big := activities[5].Content.(aguiHosted)
	if len(big.URLs) != transcript.MaxURLs || !big.Truncated {
		t.Errorf("a use with too many URLs sends %d (truncated %v)", len(big.URLs), big.Truncated)
	}
	meta, _ := reset.Metadata["keel"].(map[string]any)
	if got, _ := meta["abandoned_activity_ids"].([]string); !slices.Equal(got, []string{run + "/step-2/hosted/16"}) {
		t.Errorf("the reset names %v, want the activity of attempt 1's use", meta["abandoned_activity_ids"])
	}
}

// A run's hook events (docs/contract.md §23) reach AG-UI as keel's facts,
// never as a person's message: boundary input as an activity message of
// its own (ACTIVITY_SNAPSHOT, activityType boundary_input, its content the
// event's data) then CUSTOM; a hook's decision and failure as CUSTOM; the
// stop's run.failed as RUN_ERROR hook_stopped. A repeat sends nothing,
// and a decision that does not decode fails the translation.
func TestAGUIMapsHooks(t *testing.T) {
	envs := readEnvelopes(t, filepath.Join("..", "..", "transcript", "testdata", "hooks.jsonl"))
	const run = "hk/run-1"
	a := newAGUIRun("thread", "agui-run", run)
	var activities []aguiEvent
	customs := map[string]int{}
	var last aguiEvent
	failures := 0
	for _, env := range envs {
		evs, ended, err := a.translate(env)
		if err != nil {
			failures++ // the decision whose action is a number
			continue
		}
		for _, ev := range evs {
			switch {
			case ev.Type == aguiActivitySnapshot:
				activities = append(activities, ev)
			case ev.Type == aguiCustom:
				customs[ev.Name]++
			case ev.Type == aguiTextMessageStart && ev.Role != "assistant":
				t.Errorf("a %s message: %+v", ev.Role, ev)
			}
			last = ev
		}
		if ended {
			break
		}
	}
	if failures != 1 {
		t.Fatalf("%d translations failed, want the one undecodable decision", failures)
	}
	var ids []string
	for _, ev := range activities {
		ids = append(ids, ev.MessageID+" "+ev.ActivityType)
	}
	if want := []string{run + "/input/2 boundary_input", run + "/input/14 boundary_input", run + "/input/18 boundary_input"}; !slices.Equal(ids, want) {
		t.Fatalf("activity messages %q, want %q", ids, want)
	}
	first, err := json.Marshal(activities[0])
	if err != nil {
		t.Fatal(err)
	}
	at := envs[1].At
	want := `{"type":"ACTIVITY_SNAPSHOT","timestamp":` + strconv.FormatInt(at.UnixMilli(), 10) + `,"messageId":"hk/run-1/input/2",` +
		`"content":{"input_id":"in-1","source":"mail","point":"run_start","step":0,"text":"2 new messages: invoice, lunch"},` +
		`"activityType":"boundary_input","metadata":{"keel":{"seq":2}}}`
	if string(first) != want {
		t.Fatalf("first activity\n%s\nwant\n%s", first, want)
	}
	for typ, n := range map[string]int{keel.TypeBoundaryInputApplied: 3, keel.TypeHookDecided: 3, keel.TypeHookFailed: 1} {
		if customs[typ] != n {
			t.Errorf("%d CUSTOM %s, want %d", customs[typ], typ, n)
		}
	}
	if last.Type != aguiRunError || last.Code != "hook_stopped" || last.Message != "the day's quota is spent" {
		t.Errorf("the run ends with %+v, want RUN_ERROR hook_stopped", last)
	}
}
