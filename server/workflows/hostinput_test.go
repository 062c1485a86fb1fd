package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/tool"
)

// A request ID used twice in one tool batch is refused: here a tool that
// asks the same question again after it was answered (bypassing tool.Ask,
// which would have returned the answer) gets an error result instead of
// looping forever.
func TestReusedRequestIDIsRejected(t *testing.T) {
	asks := 0
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"stubborn","arguments":{}}]},
	  {"text":["gave up"]}]}`,
		tool.Func("stubborn", "Always asks.", nil, func(context.Context, json.RawMessage) (tool.Result, error) {
			asks++
			return tool.Result{}, &tool.NeedInput{Question: tool.Question{ID: "q", Prompt: "Again?"}}
		}))
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateRespond, "answer-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("answer rejected: %v", err) },
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, api.RespondRequest{RequestID: "c1/q", Answer: json.RawMessage(`"yes"`)})
	}, time.Minute)
	res := env.execSession(t, promptOf("go", "stubborn"))

	require.Equal(t, 2, asks, "asked, answered, asked again")
	reqs := find[keel.HostInputRequested](t, res.Events)
	require.Len(t, reqs, 1, "the second ask is not a new request")
	fin := find[keel.ToolFinished](t, res.Events)
	require.Len(t, fin, 1)
	require.Equal(t, keel.ToolError, fin[0].Status)
	require.Contains(t, fin[0].Output, "already used in this tool batch")
	require.Equal(t, "gave up", res.Outcome.Text)
}

// Answers are validated before they enter history: a wrong shape, an
// unknown ID and an answer too costly to check (1e999999 read as an exact
// integer, docs/contract.md §21.1) are refused, a good answer is
// delivered once.
func TestRespondValidation(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"tool_calls":[{"id":"c1","name":"ask_user","arguments":{"question":"How many?","schema":{"type":"integer"}}}]},
	  {"text":["thanks"]}]}`, tool.AskUser())
	var rejections []string
	respond := func(id, req string, answer string, accepted bool) {
		env.UpdateWorkflow(api.UpdateRespond, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) {
				if accepted {
					t.Errorf("%s rejected: %v", id, err)
				}
				rejections = append(rejections, err.Error())
			},
			OnAccept: func() {
				if !accepted {
					t.Errorf("%s accepted", id)
				}
			},
			OnComplete: func(any, error) {},
		}, api.RespondRequest{RequestID: req, Answer: json.RawMessage(answer)})
	}
	env.RegisterDelayedCallback(func() {
		respond("bad-shape", "c1/ask_user", `"three"`, false)
		respond("unknown", "c9/ask_user", `3`, false)
		respond("costly", "c1/ask_user", `1e999999`, false)
		respond("good", "c1/ask_user", `3`, true)
		respond("again", "c1/ask_user", `4`, false)
	}, time.Minute)
	res := env.execSession(t, promptOf("go", "ask_user"))
	require.Len(t, rejections, 4)
	require.Contains(t, rejections[0], "answer to \"c1/ask_user\"")
	require.Contains(t, rejections[1], "no host-input request \"c9/ask_user\"")
	require.Contains(t, rejections[2], "too costly to check")
	require.Contains(t, rejections[3], "already answered")
	require.Len(t, find[keel.HostInputResolved](t, res.Events), 1)
	require.Equal(t, "3", res.Messages[2].Content)
}
